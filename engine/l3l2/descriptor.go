package l3l2

import (
	"fmt"
	"math/bits"
)

// Region descriptor ABI (docs/l3l2.md, "The descriptor").
const (
	RegionMagic        uint32 = 0x4C334C32 // "L3L2"
	RegionMajor        uint16 = 3
	RegionMinor        uint16 = 0
	RegionMagicVersion uint64 = uint64(RegionMagic)<<32 | uint64(RegionMajor)<<16 | uint64(RegionMinor)

	// RegionDescriptorScalars is the number of u64 scalars of a descriptor.
	RegionDescriptorScalars = 6
	// CounterBytes is the size of one signal counter (an int32).
	CounterBytes = 4
	// CounterBaseAlign is the required alignment of a descriptor's counter_base.
	CounterBaseAlign = 64
	// LineBytes is the cache line of the single-writer rule.
	LineBytes = 64
)

// Code is a descriptor validation result name (docs/l3l2.md). The names are
// the reference runtime's, so messages and tests can match them exactly.
type Code string

// Validation result names.
const (
	BadMagicVersion Code = "BAD_MAGIC_VERSION"
	BadRegionID     Code = "BAD_REGION_ID"
	BadPayloadRange Code = "BAD_PAYLOAD_RANGE"
	BadCounterRange Code = "BAD_COUNTER_RANGE"
	OutOfBounds     Code = "OUT_OF_BOUNDS"
	BadScalarCount  Code = "BAD_SCALAR_COUNT"
)

// DescriptorError is a region descriptor, counter address or payload range
// that failed validation. Code is one of the validation result names.
type DescriptorError struct {
	Code Code
	Msg  string
}

func (e *DescriptorError) Error() string { return string(e.Code) + ": " + e.Msg }

func descErr(code Code, format string, args ...any) error {
	return &DescriptorError{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Descriptor is the six-scalar region descriptor L3 hands to L2. Bases are
// physical addresses of the simulated machine (machine.Region.Addr).
type Descriptor struct {
	MagicVersion uint64
	RegionID     uint64
	PayloadBase  uint64
	PayloadBytes uint64
	CounterBase  uint64
	CounterBytes uint64
}

// Scalars encodes d in ABI order.
func (d Descriptor) Scalars() []uint64 {
	return []uint64{d.MagicVersion, d.RegionID, d.PayloadBase, d.PayloadBytes, d.CounterBase, d.CounterBytes}
}

// DecodeDescriptor decodes and validates the first six scalars (an L2 task's
// scalar list may carry more after them).
//
// The checks run in the order docs/l3l2.md lists them: magic/version, region
// id, payload range, counter range, and last the scalar count. A check whose
// scalars are missing reports BAD_SCALAR_COUNT, so a short list whose first
// scalars are already wrong reports the earlier, more specific error (the
// reference runtime checks the count first; with six or more scalars both
// orders agree).
func DecodeDescriptor(s []uint64) (Descriptor, error) {
	need := func(n int) error {
		if len(s) < n {
			return descErr(BadScalarCount, "region descriptor needs %d scalars, got %d", RegionDescriptorScalars, len(s))
		}
		return nil
	}
	var d Descriptor
	if err := need(1); err != nil {
		return d, err
	}
	d.MagicVersion = s[0]
	if err := d.checkMagic(); err != nil {
		return d, err
	}
	if err := need(2); err != nil {
		return d, err
	}
	d.RegionID = s[1]
	if d.RegionID == 0 {
		return d, descErr(BadRegionID, "region_id 0 is reserved")
	}
	if err := need(4); err != nil {
		return d, err
	}
	d.PayloadBase, d.PayloadBytes = s[2], s[3]
	if err := d.checkPayloadRange(); err != nil {
		return d, err
	}
	if err := need(6); err != nil {
		return d, err
	}
	d.CounterBase, d.CounterBytes = s[4], s[5]
	if err := d.checkCounterRange(); err != nil {
		return d, err
	}
	return d, nil
}

// Validate checks d in the spec's order (magic, id, payload, counter).
func (d Descriptor) Validate() error {
	if err := d.checkMagic(); err != nil {
		return err
	}
	if d.RegionID == 0 {
		return descErr(BadRegionID, "region_id 0 is reserved")
	}
	if err := d.checkPayloadRange(); err != nil {
		return err
	}
	return d.checkCounterRange()
}

func (d Descriptor) checkMagic() error {
	// Magic and major must match; the minor version is not checked.
	if uint32(d.MagicVersion>>32) != RegionMagic || uint16(d.MagicVersion>>16) != RegionMajor {
		return descErr(BadMagicVersion, "magic_version %#016x, want magic %#x major %d", d.MagicVersion, RegionMagic, RegionMajor)
	}
	return nil
}

func (d Descriptor) checkPayloadRange() error {
	if d.PayloadBytes == 0 {
		return descErr(BadPayloadRange, "payload_bytes is 0")
	}
	if _, c := bits.Add64(d.PayloadBase, d.PayloadBytes, 0); c != 0 {
		return descErr(BadPayloadRange, "payload_base %#x + payload_bytes %d overflows u64", d.PayloadBase, d.PayloadBytes)
	}
	return nil
}

func (d Descriptor) checkCounterRange() error {
	switch {
	case d.CounterBytes == 0:
		return descErr(BadCounterRange, "counter_bytes is 0")
	case d.CounterBytes%CounterBytes != 0:
		return descErr(BadCounterRange, "counter_bytes %d is not a multiple of %d", d.CounterBytes, CounterBytes)
	case d.CounterBase%CounterBaseAlign != 0:
		return descErr(BadCounterRange, "counter_base %#x is not %d-byte aligned", d.CounterBase, CounterBaseAlign)
	}
	if _, c := bits.Add64(d.CounterBase, d.CounterBytes, 0); c != 0 {
		return descErr(BadCounterRange, "counter_base %#x + counter_bytes %d overflows u64", d.CounterBase, d.CounterBytes)
	}
	if rangesOverlap(d.PayloadBase, d.PayloadBytes, d.CounterBase, d.CounterBytes) {
		return descErr(BadCounterRange, "counter range [%#x, +%d) overlaps payload range [%#x, +%d)", d.CounterBase, d.CounterBytes, d.PayloadBase, d.PayloadBytes)
	}
	return nil
}

// rangesOverlap reports whether two non-empty, non-overflowing ranges share
// a byte (the caller has checked overflow).
func rangesOverlap(a, an, b, bn uint64) bool {
	if an == 0 || bn == 0 {
		return false
	}
	if a < b {
		return b-a < an
	}
	return a-b < bn
}

// CounterAddr is the address of the counter at offset from counter_base,
// validated as CheckCounterAddr does.
func (d Descriptor) CounterAddr(offset uint64) (uint64, error) {
	addr, c := bits.Add64(d.CounterBase, offset, 0)
	if c != 0 {
		return 0, descErr(OutOfBounds, "counter offset %d overflows counter_base %#x", offset, d.CounterBase)
	}
	if err := d.CheckCounterAddr(addr); err != nil {
		return 0, err
	}
	return addr, nil
}

// CheckCounterAddr validates a counter address: 4-byte aligned
// (BAD_COUNTER_RANGE) and within [counter_base, counter_base+counter_bytes-4]
// (OUT_OF_BOUNDS).
func (d Descriptor) CheckCounterAddr(addr uint64) error {
	if addr%CounterBytes != 0 {
		return descErr(BadCounterRange, "counter address %#x is not %d-byte aligned", addr, CounterBytes)
	}
	if err := d.checkCounterRange(); err != nil {
		return err
	}
	last := d.CounterBase + d.CounterBytes - CounterBytes
	if addr < d.CounterBase || addr > last {
		return descErr(OutOfBounds, "counter address %#x is outside [%#x, %#x]", addr, d.CounterBase, last)
	}
	return nil
}

// CheckPayload validates a payload access of n bytes at offset: n > 0
// (BAD_PAYLOAD_RANGE) and offset+n within the payload without overflow
// (OUT_OF_BOUNDS).
func (d Descriptor) CheckPayload(offset, n uint64) error {
	if n == 0 {
		return descErr(BadPayloadRange, "payload access of 0 bytes")
	}
	end, c := bits.Add64(offset, n, 0)
	if c != 0 || end > d.PayloadBytes {
		return descErr(OutOfBounds, "payload access [%d, +%d) exceeds payload_bytes %d", offset, n, d.PayloadBytes)
	}
	return nil
}

// NotifyOp is how a notify changes a counter.
type NotifyOp uint32

// Notify operations (ABI values).
const (
	NotifySet NotifyOp = 0 // store the operand
	NotifyAdd NotifyOp = 1 // add the operand (read-modify-write, not atomic; wraps at 32 bits)
)

// Valid reports whether o is Set or Add.
func (o NotifyOp) Valid() bool { return o == NotifySet || o == NotifyAdd }

func (o NotifyOp) String() string {
	switch o {
	case NotifySet:
		return "Set"
	case NotifyAdd:
		return "Add"
	}
	return fmt.Sprintf("NotifyOp(%d)", uint32(o))
}

// WaitCmp is the comparison of a test or wait: observed ⋄ value, as signed
// int32.
type WaitCmp uint32

// Comparisons (ABI values).
const (
	WaitEQ WaitCmp = 0
	WaitNE WaitCmp = 1
	WaitGT WaitCmp = 2
	WaitGE WaitCmp = 3
	WaitLT WaitCmp = 4
	WaitLE WaitCmp = 5
)

// Valid reports whether c is one of EQ NE GT GE LT LE.
func (c WaitCmp) Valid() bool { return c <= WaitLE }

// Eval reports whether observed ⋄ value holds (false for an invalid c).
func (c WaitCmp) Eval(observed, value int32) bool {
	switch c {
	case WaitEQ:
		return observed == value
	case WaitNE:
		return observed != value
	case WaitGT:
		return observed > value
	case WaitGE:
		return observed >= value
	case WaitLT:
		return observed < value
	case WaitLE:
		return observed <= value
	}
	return false
}

func (c WaitCmp) String() string {
	switch c {
	case WaitEQ:
		return "EQ"
	case WaitNE:
		return "NE"
	case WaitGT:
		return "GT"
	case WaitGE:
		return "GE"
	case WaitLT:
		return "LT"
	case WaitLE:
		return "LE"
	}
	return fmt.Sprintf("WaitCmp(%d)", uint32(c))
}

// TestResult is a one-shot counter snapshot: whether observed satisfied the
// comparison, and the observed value. A mismatch is not an error.
type TestResult struct {
	Matched  bool
	Observed int32
}

// toInt32 checks that a script-level integer operand fits a counter.
func toInt32(v int64) (int32, bool) {
	if v < -1<<31 || v > 1<<31-1 {
		return 0, false
	}
	return int32(v), true
}
