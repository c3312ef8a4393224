package prims

import (
	"kernbench/engine/dtype"
	"kernbench/engine/machine"
)

// A fused primitive's buffer of total elements goes as pieces of at most
// per elements (a piece of bytes holds per whole elements), the last one
// shorter; an empty buffer is one empty piece. The pieces are worked out
// where they are used: a piece allocates nothing.

// PieceElems is the number of elements of dt a piece of piece bytes
// holds, or, when one element is larger, the IpcqMessageTooLarge error of
// fn's call on rank.
func PieceElems(fn string, rank int, dt dtype.DType, piece int64) (int64, error) {
	per := piece / int64(dt.Size())
	if per == 0 {
		return 0, errorf(KindIpcqMessageTooLarge, "%s: rank %d: one %s element exceeds a message of %d bytes", fn, rank, dt, piece)
	}
	return per, nil
}

// Pieces is how many pieces of per elements a buffer of total elements
// is cut into (at least one).
func Pieces(total, per int64) int64 { return max(1, (total+per-1)/per) }

// PieceCount is the number of elements of piece j.
func PieceCount(j, per, total int64) int64 { return min(per, total-j*per) }

// NextPiece returns the metadata of q's next message, which must be
// there, in place (nothing delivers into the slot before its credit
// returns), or, when the message is not a piece of count elements of dt,
// the DtypeMismatch or OutOfBounds error of fn's call on rank.
func NextPiece(q *machine.QueuePair, fn string, rank int, dt dtype.DType, count int64) (*machine.MsgMeta, error) {
	meta := &q.Slots[q.MyTail%uint64(len(q.Slots))].Meta
	if dtype.DType(meta.DType) != dt || meta.Count != count || meta.NBytes != count*int64(dt.Size()) {
		return nil, pieceError(q, fn, rank, dt, meta, count)
	}
	return meta, nil
}

// pieceError is the error of q's message meta, which is not a piece of
// count elements of dt.
func pieceError(q *machine.QueuePair, fn string, rank int, dt dtype.DType, meta *machine.MsgMeta, count int64) error {
	if got := dtype.DType(meta.DType); got != dt {
		name := "raw bytes"
		if got.Valid() {
			name = got.String()
		}
		return errorf(KindDtypeMismatch, "%s: rank %d recv %s: message #%d carries %s, the buffer is %s", fn, rank, q.Dir, meta.Seq, name, dt)
	}
	return errorf(KindOutOfBounds, "%s: rank %d recv %s: message #%d carries %d elements where this piece has %d (send a buffer of the same length as the one received into)", fn, rank, q.Dir, meta.Seq, meta.Count, count)
}
