package l3l2

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func goodBinding() Binding {
	l, _ := NewLayout(4, 128, 192)
	return Binding{QueueMagicVersion, 0, 1, 0x1000, l.PayloadBytes, 0x1000 + 1024, 384, 4, 128, 192}
}

// Rule (docs/l3l2.md, The binding): the SPSQ magic_version is
// 0x5350535100010000 and the whole 64-bit value must match; anything else
// (minor included) fails closed with "unsupported SPSQ version".
func TestQueue_Binding_MagicVersionExact(t *testing.T) {
	if QueueMagicVersion != 0x5350535100010000 {
		t.Fatalf("QueueMagicVersion = %#x", QueueMagicVersion)
	}
	for _, mv := range []uint64{0, 0x5350535100010001, 0x5350535100020000, 0x5350535200010000, 0x4C334C3200030000} {
		b := goodBinding()
		b.MagicVersion = mv
		_, err := DecodeBinding(b.Scalars())
		if err == nil || !strings.Contains(err.Error(), "unsupported SPSQ version") {
			t.Errorf("magic %#x: %v", mv, err)
		}
	}
	if _, err := DecodeBinding(goodBinding().Scalars()); err != nil {
		t.Fatal(err)
	}
}

// Rule (docs/l3l2.md, The binding): exactly ten scalars; transaction_id != 0;
// session bits may be 0; depth a power of two in [1, 2^30]; arenas positive
// multiples of 64; ranges valid as a region's.
func TestQueue_Binding_DecodeRules(t *testing.T) {
	mod := func(f func(b *Binding)) []uint64 {
		b := goodBinding()
		f(&b)
		return b.Scalars()
	}
	for _, tc := range []struct {
		name string
		s    []uint64
		want string // "" = ok
	}{
		{"ok", goodBinding().Scalars(), ""},
		{"session bits set", mod(func(b *Binding) { b.SessionInstanceIDBits = math.MaxUint64 }), ""},
		{"nine scalars", goodBinding().Scalars()[:9], "exactly 10"},
		{"eleven scalars", append(goodBinding().Scalars(), 0), "exactly 10"},
		{"transaction 0", mod(func(b *Binding) { b.TransactionID = 0 }), "transaction_id"},
		{"depth 0", mod(func(b *Binding) { b.Depth = 0 }), "depth"},
		{"depth 3", mod(func(b *Binding) { b.Depth = 3 }), "depth"},
		{"depth 2^31", mod(func(b *Binding) { b.Depth = 1 << 31 }), "depth"},
		{"input arena 0", mod(func(b *Binding) { b.InputArenaBytes = 0 }), "input_arena_bytes"},
		{"output arena 100", mod(func(b *Binding) { b.OutputArenaBytes = 100 }), "output_arena_bytes"},
		{"payload 0", mod(func(b *Binding) { b.PayloadBytes = 0 }), "BAD_PAYLOAD_RANGE"},
		{"counter misaligned", mod(func(b *Binding) { b.CounterBase += 4 }), "BAD_COUNTER_RANGE"},
		{"counter overlaps payload", mod(func(b *Binding) { b.CounterBase = 0x1000 }), "BAD_COUNTER_RANGE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := DecodeBinding(tc.s)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.s, b.Scalars()); diff != "" {
					t.Errorf("round trip (-want +got):\n%s", diff)
				}
				return
			}
			var be *BindingError
			if !errors.As(err, &be) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("DecodeBinding = %v, want a BindingError mentioning %q", err, tc.want)
			}
		})
	}
}

// Rule (docs/l3l2.md, Layout): the layout worked cases (depth, in, out) →
// (out_desc, in_arena, out_arena, payload).
func TestQueue_Layout_WorkedCases(t *testing.T) {
	type got struct{ OutDesc, InArena, OutArena, Payload uint64 }
	for _, tc := range []struct {
		depth, in, out uint64
		want           got
	}{
		{1, 64, 64, got{32, 64, 128, 192}},
		{4, 128, 192, got{128, 256, 384, 576}},
		{8, 192, 64, got{256, 512, 704, 768}},
	} {
		l, err := NewLayout(tc.depth, tc.in, tc.out)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, got{l.OutputDescOffset, l.InputArenaOffset, l.OutputArenaOffset, l.PayloadBytes}); diff != "" {
			t.Errorf("(%d, %d, %d) (-want +got):\n%s", tc.depth, tc.in, tc.out, diff)
		}
		if l.InputDescOffset != 0 || l.CounterBytes != 384 {
			t.Errorf("input ring at %d, counters %d", l.InputDescOffset, l.CounterBytes)
		}
	}
}

// Rule (docs/l3l2.md, Layout): every addition of the layout is
// overflow-checked; overflow is an error and nothing half-computed is
// returned.
func TestQueue_Layout_OverflowIsError(t *testing.T) {
	big := uint64(math.MaxUint64) &^ 63
	for _, tc := range [][3]uint64{{1 << 30, big, 64}, {1, 64, big}, {1, big - 64, big}} {
		l, err := NewLayout(tc[0], tc[1], tc[2])
		if err == nil || !strings.Contains(err.Error(), "overflow") || l != (Layout{}) {
			t.Errorf("NewLayout%v = %+v, %v; want an overflow error and a zero layout", tc, l, err)
		}
	}
}

// Rule (docs/l3l2.md, Layout): six counters on a 64-byte stride —
// input_desc_tail 0, input_desc_head 64, output_desc_tail 128,
// output_desc_head 192, initiator_abort 256, peer_abort 320; 384 bytes.
func TestQueue_Layout_CountersOn64ByteStride(t *testing.T) {
	l, _ := NewLayout(2, 64, 64)
	got := []uint64{l.InputDescTailOffset, l.InputDescHeadOffset, l.OutputDescTailOffset, l.OutputDescHeadOffset, l.InitiatorAbortOffset, l.PeerAbortOffset, l.CounterBytes}
	if diff := cmp.Diff([]uint64{0, 64, 128, 192, 256, 320, 384}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// Rule (docs/l3l2.md, Messages): counters hold the signed low 32 bits;
// refresh takes delta = int32(uint32(observed) - uint32(local)) and local +=
// delta, so local 0xFFFFFFFF seeing 0 becomes 0x100000000.
func TestQueue_Counter_ReconstructAcrossWrap(t *testing.T) {
	for _, tc := range []struct {
		obs          int32
		local, depth uint64
		want         uint64
	}{
		{0, 0xFFFFFFFF, 4, 0x100000000},
		{3, 0xFFFFFFFE, 8, 0x100000003},
		{low32(0x1_0000_0005), 0x1_0000_0001, 4, 0x1_0000_0005},
		{low32(1 << 31), 1<<31 - 1, 1, 1 << 31}, // INT32_MAX -> INT32_MIN is +1
		{7, 7, 4, 7},
	} {
		got, ok := reconstruct(tc.obs, tc.local, tc.depth)
		if !ok || got != tc.want {
			t.Errorf("reconstruct(%d, %#x, %d) = %#x, %v; want %#x", tc.obs, tc.local, tc.depth, got, ok, tc.want)
		}
	}
}

// Rule (docs/l3l2.md, Messages): a delta outside [0, depth] is rejected (the
// caller poisons with "counter reconstruction failed").
func TestQueue_Counter_RejectNegativeOrTooLargeDelta(t *testing.T) {
	for _, tc := range []struct {
		obs          int32
		local, depth uint64
	}{
		{4, 5, 8},                   // went backwards
		{5, 0, 4},                   // more progress than the ring holds
		{0, 0xFFFFFFFF - 4, 4},      // 5 across the wrap
		{math.MinInt32, 0, 1 << 30}, // delta negative as int32
	} {
		if got, ok := reconstruct(tc.obs, tc.local, tc.depth); ok || got != tc.local {
			t.Errorf("reconstruct(%d, %#x, %d) = %#x, %v; want rejection", tc.obs, tc.local, tc.depth, got, ok)
		}
	}
}
