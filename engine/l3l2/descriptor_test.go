package l3l2

import (
	"errors"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func descCode(err error) Code {
	var de *DescriptorError
	if errors.As(err, &de) {
		return de.Code
	}
	if err != nil {
		return "?"
	}
	return ""
}

// Rule (docs/l3l2.md, The descriptor): the region's magic_version is
// 0x4C334C3200030000 ("L3L2", major 3, minor 0).
func TestRegion_Descriptor_MagicVersionConstant(t *testing.T) {
	if RegionMagicVersion != 0x4C334C3200030000 {
		t.Fatalf("RegionMagicVersion = %#x, want 0x4C334C3200030000", RegionMagicVersion)
	}
}

// Rule (docs/l3l2.md, The descriptor): validation runs in the order
// BAD_MAGIC_VERSION, BAD_REGION_ID, BAD_PAYLOAD_RANGE, BAD_COUNTER_RANGE,
// BAD_SCALAR_COUNT; the first failing check is reported.
func TestRegion_Descriptor_ValidationOrder(t *testing.T) {
	good := []uint64{RegionMagicVersion, 7, 0x1000, 256, 0x2000, 128}
	with := func(i int, v uint64) []uint64 {
		s := append([]uint64(nil), good...)
		s[i] = v
		return s
	}
	everythingBad := []uint64{0xDEAD, 0, 0, 0, 3, 0}
	for _, tc := range []struct {
		name string
		s    []uint64
		want Code
	}{
		{"valid", good, ""},
		{"all fields bad: magic first", everythingBad, BadMagicVersion},
		{"bad magic beats short list", []uint64{0xDEAD}, BadMagicVersion},
		{"bad major", with(0, 0x4C334C3200020000), BadMagicVersion},
		{"bad magic word", with(0, 0x4C334C3300030000), BadMagicVersion},
		{"id 0 beats bad ranges", []uint64{RegionMagicVersion, 0, 0, 0, 3, 0}, BadRegionID},
		{"id 0 beats short list", []uint64{RegionMagicVersion, 0}, BadRegionID},
		{"payload beats counter", []uint64{RegionMagicVersion, 1, 0x1000, 0, 3, 0}, BadPayloadRange},
		{"payload beats short list", []uint64{RegionMagicVersion, 1, 0x1000, 0}, BadPayloadRange},
		{"counter", with(5, 0), BadCounterRange},
		{"empty", nil, BadScalarCount},
		{"magic only", []uint64{RegionMagicVersion}, BadScalarCount},
		{"five scalars", good[:5], BadScalarCount},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := DecodeDescriptor(tc.s)
			if got := descCode(err); got != tc.want {
				t.Fatalf("DecodeDescriptor(%#x) = %v, want %q", tc.s, err, tc.want)
			}
			if err == nil {
				if diff := cmp.Diff(tc.s, d.Scalars()); diff != "" {
					t.Errorf("round trip (-want +got):\n%s", diff)
				}
				if err := d.Validate(); err != nil {
					t.Errorf("Validate after a successful decode: %v", err)
				}
			}
		})
	}
}

// Rule (docs/l3l2.md, The descriptor): magic and major are checked exactly;
// the minor is not.
func TestRegion_Descriptor_MinorVersionNotChecked(t *testing.T) {
	for _, minor := range []uint64{0, 1, 0xFFFF} {
		s := []uint64{RegionMagicVersion | minor, 1, 0, 64, 64, 4}
		if _, err := DecodeDescriptor(s); err != nil {
			t.Errorf("minor %d: %v", minor, err)
		}
	}
}

// Rule (docs/l3l2.md, The descriptor): payload_base 0 and counter_base 0 are
// valid; only sizes, alignment, overflow, overlap and region_id 0 decide
// validity.
func TestRegion_Descriptor_ZeroBasesValid(t *testing.T) {
	for _, s := range [][]uint64{
		{RegionMagicVersion, 1, 0, 64, 64, 64},  // payload at 0
		{RegionMagicVersion, 1, 128, 64, 0, 64}, // counters at 0
	} {
		if _, err := DecodeDescriptor(s); err != nil {
			t.Errorf("DecodeDescriptor(%v): %v", s, err)
		}
	}
}

// Rule (docs/l3l2.md, The descriptor): an L2 task's scalar list may carry
// more scalars after the six of the descriptor (e.g. counter offsets);
// decoding uses the first six.
func TestRegion_Descriptor_ExtraScalarsIgnored(t *testing.T) {
	s := []uint64{RegionMagicVersion, 9, 0x1000, 64, 0x2000, 128, 0, 64}
	d, err := DecodeDescriptor(s)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s[:6], d.Scalars()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// Rule (docs/l3l2.md, The descriptor): BAD_PAYLOAD_RANGE is payload_bytes 0
// or base+bytes overflowing; BAD_COUNTER_RANGE is counter_bytes 0 or not a
// multiple of 4, base not 64-aligned, overflow, or overlap with the payload.
func TestRegion_Descriptor_RangeChecks(t *testing.T) {
	const M = math.MaxUint64
	for _, tc := range []struct {
		name                 string
		pBase, pN, cBase, cN uint64
		want                 Code
	}{
		{"ok adjacent", 0, 64, 64, 8, ""},
		{"payload 0 bytes", 0, 0, 64, 8, BadPayloadRange},
		{"payload overflow", M - 10, 11, 0, 8, BadPayloadRange},
		{"payload ends at max", M - 10, 10, 0, 8, ""},
		{"counter 0 bytes", 0, 64, 64, 0, BadCounterRange},
		{"counter bytes not x4", 0, 64, 64, 6, BadCounterRange},
		{"counter base misaligned", 0, 64, 68, 8, BadCounterRange},
		{"counter overflow", 0, 64, M - 63, 128, BadCounterRange},
		{"counter overlaps payload end", 0, 65, 64, 8, BadCounterRange},
		{"counter contains payload", 100, 4, 64, 128, BadCounterRange},
		{"counter before payload", 128, 64, 64, 64, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Descriptor{RegionMagicVersion, 1, tc.pBase, tc.pN, tc.cBase, tc.cN}
			if got := descCode(d.Validate()); got != tc.want {
				t.Errorf("Validate = %q, want %q", got, tc.want)
			}
		})
	}
}

// Rule (docs/l3l2.md, Counters): a counter address must be 4-aligned
// (BAD_COUNTER_RANGE) and within [base, base+bytes-4] (OUT_OF_BOUNDS).
func TestRegion_CounterAddr_AlignmentAndBounds(t *testing.T) {
	d := Descriptor{RegionMagicVersion, 1, 0, 64, 128, 16}
	for _, tc := range []struct {
		offset uint64
		want   Code
	}{
		{0, ""}, {4, ""}, {12, ""}, // 12 = bytes-4: the last counter
		{2, BadCounterRange},
		{14, BadCounterRange},
		{16, OutOfBounds},
		{1 << 40, OutOfBounds},
		{math.MaxUint64 - 3, OutOfBounds}, // base + offset overflows
	} {
		addr, err := d.CounterAddr(tc.offset)
		if got := descCode(err); got != tc.want {
			t.Errorf("CounterAddr(%d) = %v, want %q", tc.offset, err, tc.want)
		}
		if err == nil && addr != 128+tc.offset {
			t.Errorf("CounterAddr(%d) = %d, want %d", tc.offset, addr, 128+tc.offset)
		}
	}
	if got := descCode(d.CheckCounterAddr(124)); got != OutOfBounds {
		t.Errorf("address below base: %q, want OUT_OF_BOUNDS", got)
	}
}

// Rule (docs/l3l2.md, Counters): a payload access needs nbytes > 0
// (BAD_PAYLOAD_RANGE) and offset+nbytes within the payload without overflow
// (OUT_OF_BOUNDS).
func TestRegion_Payload_AccessChecks(t *testing.T) {
	d := Descriptor{RegionMagicVersion, 1, 0, 64, 128, 16}
	for _, tc := range []struct {
		off, n uint64
		want   Code
	}{
		{0, 64, ""}, {63, 1, ""},
		{0, 0, BadPayloadRange},
		{64, 0, BadPayloadRange},
		{1, 64, OutOfBounds},
		{64, 1, OutOfBounds},
		{math.MaxUint64, 2, OutOfBounds},
	} {
		if got := descCode(d.CheckPayload(tc.off, tc.n)); got != tc.want {
			t.Errorf("CheckPayload(%d, %d) = %q, want %q", tc.off, tc.n, got, tc.want)
		}
	}
}

// Rule (docs/l3l2.md, Counters): WaitCmp compares observed ⋄ value as signed
// int32; only EQ=0 … LE=5 are valid, NotifyOp only Set=0 and Add=1.
func TestRegion_WaitCmp_Signed(t *testing.T) {
	const minI, maxI = math.MinInt32, math.MaxInt32
	type row struct {
		obs, val int32
		want     [6]bool // EQ NE GT GE LT LE
	}
	for _, r := range []row{
		{5, 5, [6]bool{true, false, false, true, false, true}},
		{-1, 0, [6]bool{false, true, false, false, true, true}},
		{0, -1, [6]bool{false, true, true, true, false, false}},
		{minI, maxI, [6]bool{false, true, false, false, true, true}}, // unsigned order would say GT
		{maxI, minI, [6]bool{false, true, true, true, false, false}},
	} {
		for c := WaitEQ; c <= WaitLE; c++ {
			if got := c.Eval(r.obs, r.val); got != r.want[c] {
				t.Errorf("%d %v %d = %v, want %v", r.obs, c, r.val, got, r.want[c])
			}
		}
	}
	if WaitCmp(6).Valid() || WaitCmp(6).Eval(1, 1) {
		t.Error("WaitCmp 6 is valid")
	}
	if !NotifySet.Valid() || !NotifyAdd.Valid() || NotifyOp(2).Valid() {
		t.Error("NotifyOp validity wrong")
	}
	if got := []string{WaitEQ.String(), WaitNE.String(), WaitGT.String(), WaitGE.String(), WaitLT.String(), WaitLE.String(), NotifySet.String(), NotifyAdd.String()}; !cmp.Equal(got, []string{"EQ", "NE", "GT", "GE", "LT", "LE", "Set", "Add"}) {
		t.Errorf("names %v", got)
	}
}
