package l3l2

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// SPSC queue ABI (docs/l3l2.md, "The binding" and "Layout").
const (
	QueueMagic        uint32 = 0x53505351 // "SPSQ"
	QueueMajor        uint16 = 1
	QueueMinor        uint16 = 0
	QueueMagicVersion uint64 = uint64(QueueMagic)<<32 | uint64(QueueMajor)<<16 | uint64(QueueMinor)

	BindingScalars    = 10
	DescriptorBytes   = 32 // one ring slot: {seq, opcode, payload_offset, payload_nbytes}
	ArenaAlign        = 64
	CounterStride     = 64
	QueueCounterBytes = 384
	MaxDepth          = 1 << 30

	// Counter offsets (each on its own 64-byte line) and their writers.
	InputDescTailOffset  = 0   // L3
	InputDescHeadOffset  = 64  // L2
	OutputDescTailOffset = 128 // L2
	OutputDescHeadOffset = 192 // L3
	InitiatorAbortOffset = 256 // L3
	PeerAbortOffset      = 320 // L2
)

// Opcode is a queue descriptor's opcode.
type Opcode uint64

// Opcodes. Anything else is INVALID_OPCODE.
const (
	OpData  Opcode = 1
	OpStop  Opcode = 2 // input only, zero-byte
	OpError Opcode = 3 // an ordinary message; the queue never interprets it
)

func (o Opcode) String() string {
	switch o {
	case OpData:
		return "DATA"
	case OpStop:
		return "STOP"
	case OpError:
		return "ERROR"
	}
	return fmt.Sprintf("INVALID_OPCODE(%d)", uint64(o))
}

// Binding is the ten-scalar SPSC queue endpoint binding (the only binding).
type Binding struct {
	MagicVersion          uint64
	SessionInstanceIDBits uint64
	TransactionID         uint64
	PayloadBase           uint64
	PayloadBytes          uint64
	CounterBase           uint64
	CounterBytes          uint64
	Depth                 uint64
	InputArenaBytes       uint64
	OutputArenaBytes      uint64
}

// Scalars encodes b in ABI order.
func (b Binding) Scalars() []uint64 {
	return []uint64{b.MagicVersion, b.SessionInstanceIDBits, b.TransactionID, b.PayloadBase, b.PayloadBytes,
		b.CounterBase, b.CounterBytes, b.Depth, b.InputArenaBytes, b.OutputArenaBytes}
}

// BindingError is a binding that failed decoding (fail closed).
type BindingError struct{ Msg string }

func (e *BindingError) Error() string { return "invalid SPSC queue binding: " + e.Msg }

func bindErr(format string, args ...any) error {
	return &BindingError{Msg: fmt.Sprintf(format, args...)}
}

// DecodeBinding decodes exactly ten scalars and validates them (Validate).
// Success implies that Layout succeeds.
func DecodeBinding(s []uint64) (Binding, error) {
	if len(s) != BindingScalars {
		return Binding{}, bindErr("need exactly %d scalars, got %d", BindingScalars, len(s))
	}
	b := Binding{s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9]}
	if err := b.Validate(); err != nil {
		return Binding{}, err
	}
	return b, nil
}

// Validate checks, in order: the whole magic_version (anything but
// 0x5350535100010000 is "unsupported SPSQ version"), transaction_id != 0,
// the payload and counter ranges as a region descriptor's, and the layout
// parameters (depth a power of two ≤ 2^30, arenas positive multiples of
// 64). It does not compare payload_bytes/counter_bytes with the layout:
// that is the endpoint's BAD_ARGUMENT check.
func (b Binding) Validate() error {
	if b.MagicVersion != QueueMagicVersion {
		return bindErr("unsupported SPSQ version %#016x (want %#016x)", b.MagicVersion, QueueMagicVersion)
	}
	if b.TransactionID == 0 {
		return bindErr("transaction_id must be non-zero")
	}
	d := Descriptor{MagicVersion: RegionMagicVersion, RegionID: b.TransactionID,
		PayloadBase: b.PayloadBase, PayloadBytes: b.PayloadBytes, CounterBase: b.CounterBase, CounterBytes: b.CounterBytes}
	if err := d.Validate(); err != nil {
		return bindErr("region: %v", err)
	}
	if _, err := NewLayout(b.Depth, b.InputArenaBytes, b.OutputArenaBytes); err != nil {
		return bindErr("%v", err)
	}
	return nil
}

// Layout computes the queue layout of b's depth and arenas.
func (b Binding) Layout() (Layout, error) {
	return NewLayout(b.Depth, b.InputArenaBytes, b.OutputArenaBytes)
}

// Layout is the payload and counter layout of a queue; both sides compute
// it independently from (depth, input_arena_bytes, output_arena_bytes).
type Layout struct {
	Depth            uint64
	InputArenaBytes  uint64
	OutputArenaBytes uint64

	InputDescOffset   uint64 // 0
	OutputDescOffset  uint64 // depth*32
	InputArenaOffset  uint64 // align64(2*depth*32)
	OutputArenaOffset uint64 // align64(input_arena_offset + input_arena_bytes)
	PayloadBytes      uint64 // output_arena_offset + output_arena_bytes

	InputDescTailOffset  uint64
	InputDescHeadOffset  uint64
	OutputDescTailOffset uint64
	OutputDescHeadOffset uint64
	InitiatorAbortOffset uint64
	PeerAbortOffset      uint64
	CounterBytes         uint64 // 384
}

// LayoutError is a layout that cannot be built.
type LayoutError struct{ Msg string }

func (e *LayoutError) Error() string { return e.Msg }

var errLayoutOverflow = &LayoutError{Msg: "SPSC queue layout calculation overflowed u64"}

func add64(a, b uint64) (uint64, error) {
	s, c := bits.Add64(a, b, 0)
	if c != 0 {
		return 0, errLayoutOverflow
	}
	return s, nil
}

func align64(v uint64) (uint64, error) {
	r := v % ArenaAlign
	if r == 0 {
		return v, nil
	}
	return add64(v, ArenaAlign-r)
}

// NewLayout computes the layout; every addition is overflow-checked and
// nothing half-computed is returned on error.
func NewLayout(depth, inputArena, outputArena uint64) (Layout, error) {
	if depth == 0 || depth&(depth-1) != 0 || depth > MaxDepth {
		return Layout{}, &LayoutError{Msg: fmt.Sprintf("depth must be a power of two in [1, 2^30] (got %d)", depth)}
	}
	if inputArena == 0 || inputArena%ArenaAlign != 0 {
		return Layout{}, &LayoutError{Msg: fmt.Sprintf("input_arena_bytes must be a positive multiple of %d (got %d)", ArenaAlign, inputArena)}
	}
	if outputArena == 0 || outputArena%ArenaAlign != 0 {
		return Layout{}, &LayoutError{Msg: fmt.Sprintf("output_arena_bytes must be a positive multiple of %d (got %d)", ArenaAlign, outputArena)}
	}
	hi, ring := bits.Mul64(depth, DescriptorBytes)
	if hi != 0 {
		return Layout{}, errLayoutOverflow
	}
	outDesc := ring // input ring at 0
	descEnd, err := add64(outDesc, ring)
	if err != nil {
		return Layout{}, err
	}
	inArena, err := align64(descEnd)
	if err != nil {
		return Layout{}, err
	}
	inEnd, err := add64(inArena, inputArena)
	if err != nil {
		return Layout{}, err
	}
	outArena, err := align64(inEnd)
	if err != nil {
		return Layout{}, err
	}
	payload, err := add64(outArena, outputArena)
	if err != nil {
		return Layout{}, err
	}
	return Layout{
		Depth: depth, InputArenaBytes: inputArena, OutputArenaBytes: outputArena,
		InputDescOffset: 0, OutputDescOffset: outDesc, InputArenaOffset: inArena, OutputArenaOffset: outArena,
		PayloadBytes:        payload,
		InputDescTailOffset: InputDescTailOffset, InputDescHeadOffset: InputDescHeadOffset,
		OutputDescTailOffset: OutputDescTailOffset, OutputDescHeadOffset: OutputDescHeadOffset,
		InitiatorAbortOffset: InitiatorAbortOffset, PeerAbortOffset: PeerAbortOffset,
		CounterBytes: QueueCounterBytes,
	}, nil
}

// slotOffset is the payload offset of the ring slot of 0-based message
// index i in the ring at ringOffset: slot (seq-1) & (depth-1) with seq = i+1.
func (l Layout) slotOffset(ringOffset, i uint64) uint64 {
	return ringOffset + (i&(l.Depth-1))*DescriptorBytes
}

// ---------------------------------------------------------------------------
// Protocol arithmetic shared by both sides.

// low32 is the signed low 32 bits a counter holds for a monotonic value.
func low32(v uint64) int32 { return int32(uint32(v)) }

// reconstruct advances a local monotonic value by the progress an observed
// low-32-bit counter shows: delta = int32(uint32(observed) - uint32(local))
// must be in [0, depth] ("counter reconstruction failed" otherwise).
func reconstruct(observed int32, local, depth uint64) (uint64, bool) {
	delta := int32(uint32(observed) - uint32(local))
	if delta < 0 || uint64(delta) > depth {
		return local, false
	}
	return local + uint64(delta), true
}

// expectedOffset is where a payload of n > 0 bytes is placed for a byte
// cursor: at cursor % arena, or at the arena start if it would not fit
// before the arena's end (payloads never wrap).
func expectedOffset(cursor, n, arenaOffset, arenaBytes uint64) uint64 {
	pos := cursor % arenaBytes
	if pos+n > arenaBytes {
		return arenaOffset
	}
	return arenaOffset + pos
}

// advanceCursor moves a byte cursor past a payload of n > 0 bytes placed as
// expectedOffset says (the skipped tail of the arena counts as used).
// place is where a producer puts the next n payload bytes: the arena offset
// and its new tail cursor (skipping to the arena start rather than
// wrapping), or ok == false while the arena lacks room. Zero-byte messages
// take no space (offset 0).
func place(head, tail, n, arenaOffset, arenaBytes uint64) (offset, newTail uint64, ok bool) {
	if n == 0 {
		return 0, tail, true
	}
	end := advanceCursor(tail, n, arenaBytes)
	if end-head > arenaBytes {
		return 0, tail, false
	}
	return expectedOffset(tail, n, arenaOffset, arenaBytes), end, true
}

// replayReleased advances a producer's payload head over the descriptors
// its consumer released, slots [from, to) of the ring at ringOffset,
// checking each is the message it wrote (seq, then payload offset); bad
// reports a mismatch (the caller poisons).
func replayReleased(l Layout, what string, ringOffset, arenaOffset, arenaBytes, from, to uint64, payHead *uint64,
	read func(off uint64) (desc, error), bad func(format string, args ...any) error) error {
	for i := from; i < to; i++ {
		d, err := read(l.slotOffset(ringOffset, i))
		if err != nil {
			return err
		}
		if d.seq != i+1 {
			return bad("%s release replay seq mismatch (slot seq %d, want %d)", what, d.seq, i+1)
		}
		if d.nbytes == 0 {
			continue
		}
		if want := expectedOffset(*payHead, d.nbytes, arenaOffset, arenaBytes); d.offset != want {
			return bad("payload replay offset mismatch (offset %d, want %d)", d.offset, want)
		}
		*payHead = advanceCursor(*payHead, d.nbytes, arenaBytes)
	}
	return nil
}

func advanceCursor(cursor, n, arenaBytes uint64) uint64 {
	pos := cursor % arenaBytes
	if pos+n > arenaBytes {
		cursor += arenaBytes - pos
	}
	return cursor + n
}

// payloadInArena reports whether [offset, +n) (n > 0) lies inside the arena.
func payloadInArena(offset, n, arenaOffset, arenaBytes uint64) bool {
	end, c := bits.Add64(offset, n, 0)
	arenaEnd, c2 := bits.Add64(arenaOffset, arenaBytes, 0)
	return n > 0 && c == 0 && c2 == 0 && offset >= arenaOffset && end <= arenaEnd
}

// desc is one decoded ring slot.
type desc struct {
	seq, opcode, offset, nbytes uint64
}

func decodeDesc(b []byte) desc {
	le := binary.LittleEndian
	return desc{le.Uint64(b[0:]), le.Uint64(b[8:]), le.Uint64(b[16:]), le.Uint64(b[24:])}
}

// descFields encodes {opcode, payload_offset, payload_nbytes}, written
// before the seq word (publication order).
func descFields(op Opcode, offset, nbytes uint64) []byte {
	b := make([]byte, 24)
	le := binary.LittleEndian
	le.PutUint64(b[0:], uint64(op))
	le.PutUint64(b[8:], offset)
	le.PutUint64(b[16:], nbytes)
	return b
}

func seqWord(seq uint64) []byte {
	b := make([]byte, 8)
	binary.LittleEndian.PutUint64(b, seq)
	return b
}
