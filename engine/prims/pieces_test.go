package prims

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/engine/dtype"
	"kernbench/engine/machine"
)

// A buffer is cut into pieces of whole elements, the last one shorter;
// an empty one is one empty piece; an element larger than a piece is the
// call's IpcqMessageTooLarge.
func TestPieces(t *testing.T) {
	tests := []struct {
		name         string
		dt           dtype.DType
		piece, total int64
		wantCounts   []int64
		wantErr      string
	}{
		{name: "one piece", dt: dtype.F32, piece: 64, total: 16, wantCounts: []int64{16}},
		{name: "the last piece shorter", dt: dtype.F32, piece: 16, total: 10, wantCounts: []int64{4, 4, 2}},
		{name: "a piece not a whole number of elements", dt: dtype.F32, piece: 10, total: 5, wantCounts: []int64{2, 2, 1}},
		{name: "empty", dt: dtype.F16, piece: 8, total: 0, wantCounts: []int64{0}},
		{name: "an element larger than a piece", dt: dtype.F64, piece: 4, total: 3,
			wantErr: "IpcqMessageTooLarge: tl.recv_copy: rank 2: one f64 element exceeds a message of 4 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			per, err := PieceElems("tl.recv_copy", 2, tt.dt, tt.piece)
			if tt.wantErr != "" {
				var pe *Error
				if !errors.As(err, &pe) || pe.Kind != KindIpcqMessageTooLarge || err.Error() != tt.wantErr {
					t.Fatalf("got %v, want %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for j := range Pieces(tt.total, per) {
				got = append(got, PieceCount(j, per, tt.total))
			}
			if diff := cmp.Diff(tt.wantCounts, got); diff != "" {
				t.Errorf("piece counts (-want +got):\n%s", diff)
			}
		})
	}
}

// The next message is taken as a piece when it carries the piece's dtype
// and count; otherwise the error says what it carries.
func TestNextPiece(t *testing.T) {
	tests := []struct {
		name     string
		meta     machine.MsgMeta
		wantKind string
		wantErr  string
	}{
		{name: "the piece", meta: machine.MsgMeta{DType: uint8(dtype.F32), Count: 4, NBytes: 16, Seq: 5}},
		{name: "another dtype", meta: machine.MsgMeta{DType: uint8(dtype.I32), Count: 4, NBytes: 16, Seq: 5}, wantKind: KindDtypeMismatch,
			wantErr: "DtypeMismatch: tl.recv_reduce_send: rank 1 recv W: message #5 carries i32, the buffer is f32"},
		{name: "raw bytes", meta: machine.MsgMeta{Count: 16, NBytes: 16, Seq: 5}, wantKind: KindDtypeMismatch,
			wantErr: "DtypeMismatch: tl.recv_reduce_send: rank 1 recv W: message #5 carries raw bytes, the buffer is f32"},
		{name: "fewer elements", meta: machine.MsgMeta{DType: uint8(dtype.F32), Count: 3, NBytes: 12, Seq: 5}, wantKind: KindOutOfBounds,
			wantErr: "OutOfBounds: tl.recv_reduce_send: rank 1 recv W: message #5 carries 3 elements where this piece has 4 (send a buffer of the same length as the one received into)"},
		{name: "bytes past the elements", meta: machine.MsgMeta{DType: uint8(dtype.F32), Count: 4, NBytes: 18, Seq: 5}, wantKind: KindOutOfBounds,
			wantErr: "OutOfBounds: tl.recv_reduce_send: rank 1 recv W: message #5 carries 4 elements where this piece has 4 (send a buffer of the same length as the one received into)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The ring's sixth message (5 received before it) is in slot 1
			// of four.
			q := &machine.QueuePair{Dir: "W", Rank: 1, MyTail: 5, Slots: make([]machine.RxSlot, 4)}
			q.Slots[1].Meta = tt.meta
			meta, err := NextPiece(q, "tl.recv_reduce_send", 1, dtype.F32, 4)
			if tt.wantKind == "" {
				if err != nil || meta != &q.Slots[1].Meta {
					t.Fatalf("got %v, %v; want slot 1's metadata", meta, err)
				}
				return
			}
			var pe *Error
			if !errors.As(err, &pe) || pe.Kind != tt.wantKind || err.Error() != tt.wantErr {
				t.Fatalf("got %v\nwant %s", err, tt.wantErr)
			}
		})
	}
}
