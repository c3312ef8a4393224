package l3l2

import (
	"errors"
	"fmt"

	"kernbench/engine/machine"
	"kernbench/engine/sim"
)

// RegionState is the user-visible state of an L3 region handle.
type RegionState uint8

// Region states: live → released (after Free) or poisoned (after a failure
// that may have corrupted progress). Free stays valid in every state.
const (
	RegionLive RegionState = iota + 1
	RegionReleased
	RegionPoisoned
)

func (s RegionState) String() string {
	switch s {
	case RegionLive:
		return "LIVE"
	case RegionReleased:
		return "RELEASED"
	case RegionPoisoned:
		return "POISONED"
	}
	return fmt.Sprintf("RegionState(%d)", uint8(s))
}

// Region is the L3 (host) handle of a region: orch.create_l3_l2_region.
// Its operations cross PCIe: each costs T(pcie path between the host and
// the chip's HBM, nbytes), counter operations move 4 bytes, and the time is
// spent by the calling process (a nil process is charged nothing).
type Region struct {
	st    *regionState
	pt    *port
	state RegionState
	cause error // first poison cause
}

// CreateRegion allocates a region for chip worker (the SIP index) in the
// HBM of that chip's PE 0: payloadBytes of payload and a 64-byte aligned
// range of counterBytes (a positive multiple of 4) after it. Creation is a
// control-path operation and takes no simulated time.
func (h *Hub) CreateRegion(worker int, payloadBytes, counterBytes uint64) (*Region, error) {
	const op = "create_l3_l2_region"
	if payloadBytes == 0 {
		return nil, &RegionError{Op: op, Code: BadPayloadRange, Msg: "payload_bytes must be > 0"}
	}
	if counterBytes == 0 || counterBytes%CounterBytes != 0 {
		return nil, &RegionError{Op: op, Code: BadCounterRange, Msg: fmt.Sprintf("counter_bytes must be a positive multiple of %d (got %d)", CounterBytes, counterBytes)}
	}
	st, err := h.allocate(worker, payloadBytes, counterBytes)
	if err != nil {
		return nil, &RegionError{Op: op, Code: CodeBadArgument, Msg: err.Error(), Cause: err}
	}
	r := &Region{st: st, pt: hostPort(st), state: RegionLive}
	st.l3 = r
	return r, nil
}

// ID is the region id (never 0).
func (r *Region) ID() uint64 { return r.st.id }

// Worker is the chip (SIP index) the region lives on.
func (r *Region) Worker() int { return r.st.worker }

// State is LIVE, RELEASED or POISONED.
func (r *Region) State() RegionState { return r.state }

// Cause is the first failure that poisoned the region, or nil.
func (r *Region) Cause() error { return r.cause }

// Descriptor is the region's descriptor, whatever the state (for Go code
// and tests; scripts use DescriptorScalars).
func (r *Region) Descriptor() Descriptor { return r.st.descriptor() }

// Payload and Counters are the simulated memory behind the region.
func (r *Region) Payload() machine.Region  { return r.st.payload }
func (r *Region) Counters() machine.Region { return r.st.counters }

// PhysicallyReleased reports whether the region's memory was given back.
func (r *Region) PhysicallyReleased() bool { return r.st.freed }

// Free releases the handle (logically; see Hub.ReleaseFreed). Idempotent
// and valid in every state.
func (r *Region) Free() { r.state = RegionReleased }

func (r *Region) errf(op string, code Code, format string, args ...any) error {
	return &RegionError{Op: op, Code: code, RegionID: r.st.id, Msg: fmt.Sprintf(format, args...)}
}

// usable rejects use of a released or poisoned handle (never poisons).
func (r *Region) usable(op string) error {
	switch r.state {
	case RegionReleased:
		return r.errf(op, CodeReleased, "region has been released")
	case RegionPoisoned:
		return &RegionError{Op: op, Code: CodePoisoned, RegionID: r.st.id, Msg: fmt.Sprintf("region is poisoned: %v", r.cause), Cause: r.cause}
	}
	return nil
}

func (r *Region) poison(cause error) {
	if r.state == RegionLive {
		r.state, r.cause = RegionPoisoned, cause
	}
}

// failed handles an error after a command was issued: the region is
// poisoned unless the simulation is merely unwinding the process.
func (r *Region) failed(op string, err error) error {
	if errors.Is(err, sim.ErrKilled) {
		return err
	}
	e := &RegionError{Op: op, Code: CodeLocalOperation, RegionID: r.st.id, Msg: err.Error(), Cause: err}
	r.poison(e)
	return e
}

func (r *Region) validation(op string, err error) error {
	var de *DescriptorError
	if errors.As(err, &de) {
		return &RegionError{Op: op, Code: de.Code, RegionID: r.st.id, Msg: de.Msg}
	}
	return err
}

// DescriptorScalars returns the six descriptor scalars to pass to L2.
func (r *Region) DescriptorScalars() ([]uint64, error) {
	if err := r.usable("descriptor_scalars"); err != nil {
		return nil, err
	}
	return r.st.descriptor().Scalars(), nil
}

// PayloadWrite copies data into the payload at offset.
func (r *Region) PayloadWrite(p *sim.Proc, offset uint64, data []byte) error {
	const op = "payload_write"
	if err := r.usable(op); err != nil {
		return err
	}
	if err := r.st.descriptor().CheckPayload(offset, uint64(len(data))); err != nil {
		return r.validation(op, err)
	}
	if err := r.pt.writePayload(p, offset, data, "l3_payload_write"); err != nil {
		return r.failed(op, err)
	}
	return nil
}

// PayloadRead copies nbytes of payload at offset to the host.
func (r *Region) PayloadRead(p *sim.Proc, offset, nbytes uint64) ([]byte, error) {
	const op = "payload_read"
	if err := r.usable(op); err != nil {
		return nil, err
	}
	if err := r.st.descriptor().CheckPayload(offset, nbytes); err != nil {
		return nil, r.validation(op, err)
	}
	b, err := r.pt.readPayload(p, offset, nbytes)
	if err != nil {
		return nil, r.failed(op, err)
	}
	return b, nil
}

// Counter is an L3 handle to one int32 counter of a region.
type Counter struct {
	r      *Region
	offset uint64
	addr   uint64
}

// Counter returns the counter at offset from counter_base (4-byte aligned,
// inside the counter range). An invalid offset is rejected without
// poisoning.
func (r *Region) Counter(offset uint64) (*Counter, error) {
	const op = "counter"
	if err := r.usable(op); err != nil {
		return nil, err
	}
	addr, err := r.st.descriptor().CounterAddr(offset)
	if err != nil {
		return nil, r.validation(op, err)
	}
	return &Counter{r: r, offset: offset, addr: addr}, nil
}

// Offset is the counter's offset from counter_base; Addr its address.
func (c *Counter) Offset() uint64 { return c.offset }
func (c *Counter) Addr() uint64   { return c.addr }

// Notify sets the counter to value or adds value to it (op). value must
// fit an int32; Add wraps at 32 bits.
func (c *Counter) Notify(p *sim.Proc, value int64, op NotifyOp) error {
	const name = "signal_notify"
	r := c.r
	if err := r.usable(name); err != nil {
		return err
	}
	v, ok := toInt32(value)
	if !ok {
		return r.errf(name, CodeBadArgument, "value %d does not fit an int32", value)
	}
	if !op.Valid() {
		return r.errf(name, CodeBadArgument, "invalid NotifyOp %d (want Set=0 or Add=1)", uint32(op))
	}
	if err := r.pt.notify(p, c.addr, v, op, "l3_signal_notify"); err != nil {
		var ve *ViolationError
		if errors.As(err, &ve) {
			e := &RegionError{Op: name, Code: CodeSingleWriter, RegionID: r.st.id, Msg: ve.Violation.String(), Cause: ve}
			r.poison(e)
			return e
		}
		return r.failed(name, err)
	}
	return nil
}

// Test reads the counter once and compares it: (matched, observed). A
// mismatch is a normal result.
func (c *Counter) Test(p *sim.Proc, value int64, cmp WaitCmp) (TestResult, error) {
	const name = "signal_test"
	r := c.r
	if err := r.usable(name); err != nil {
		return TestResult{}, err
	}
	v, err := r.checkCmp(name, value, cmp)
	if err != nil {
		return TestResult{}, err
	}
	res, err := r.pt.test(p, c.addr, v, cmp)
	if err != nil {
		return TestResult{}, r.failed(name, err)
	}
	return res, nil
}

func (r *Region) checkCmp(name string, value int64, cmp WaitCmp) (int32, error) {
	v, ok := toInt32(value)
	if !ok {
		return 0, r.errf(name, CodeBadArgument, "value %d does not fit an int32", value)
	}
	if !cmp.Valid() {
		return 0, r.errf(name, CodeBadArgument, "invalid WaitCmp %d (want EQ=0 NE=1 GT=2 GE=3 LT=4 LE=5)", uint32(cmp))
	}
	return v, nil
}

// Wait blocks until the counter satisfies cmp against value and returns
// the observed value. timeout must be positive (finite); when it passes the
// call returns a *TimeoutError carrying the last observed value, at exactly
// start + timeout, and the region stays live. See port.wait for when the
// counter is sampled.
func (c *Counter) Wait(p *sim.Proc, value int64, cmp WaitCmp, timeout sim.Time) (int32, error) {
	const name = "signal_wait"
	r := c.r
	if err := r.usable(name); err != nil {
		return 0, err
	}
	v, err := r.checkCmp(name, value, cmp)
	if err != nil {
		return 0, err
	}
	if timeout <= 0 {
		return 0, r.errf(name, CodeBadArgument, "wait needs a finite positive timeout (got %v)", timeout)
	}
	if p == nil {
		return 0, r.errf(name, CodeBadArgument, "a blocking wait needs a simulated process")
	}
	obs, matched, err := r.pt.wait(p, "counter.wait", c.addr, v, cmp, timeout)
	if err != nil {
		return obs, r.failed(name, err)
	}
	if !matched {
		return obs, &TimeoutError{Op: fmt.Sprintf("region %d counter(%d).wait", r.st.id, c.offset), Timeout: timeout, Observed: obs, Counter: true}
	}
	return obs, nil
}
