package l3l2

import (
	"errors"
	"fmt"

	"kernbench/engine/machine"
	"kernbench/engine/sim"
)

// RegionEndpoint is the L2 (AICPU) view of a region built from its
// descriptor scalars: l2.region_endpoint. Its operations are local HBM
// accesses (T(HBM port, nbytes), 4 bytes for counters) charged to the
// calling process. Every failure is recorded as the endpoint's error, and
// once an error is recorded every later operation returns it (sticky).
//
// Methods return nil or the sticky *EndpointError; the Starlark layer
// turns an error into False/None and exposes Err as error().
type RegionEndpoint struct {
	h    *Hub
	desc Descriptor
	st   *regionState
	pt   *port
	err  *EndpointError
}

// RegionEndpoint decodes descriptor scalars (the first six of the list) and
// resolves them to a region of this machine. A descriptor that fails
// decoding, or whose ranges are not inside one region that is still
// physically allocated, gives an endpoint whose error is BAD_DESCRIPTOR
// (op init).
func (h *Hub) RegionEndpoint(scalars []uint64) *RegionEndpoint {
	e := &RegionEndpoint{h: h}
	d, err := DecodeDescriptor(scalars)
	if err != nil {
		id := uint64(0)
		if len(scalars) > 1 {
			id = scalars[1]
		}
		e.set(EndpointBadDescriptor, "init", id, 0, 0, 0, "invalid descriptor scalars: "+err.Error())
		return e
	}
	e.desc = d
	st := h.resolve(d)
	if st == nil {
		e.set(EndpointBadDescriptor, "init", d.RegionID, 0, 0, 0, "descriptor ranges are not inside an allocated region of this machine")
		return e
	}
	e.st, e.pt = st, localPort(st)
	return e
}

// Err is the recorded error, or nil while the endpoint is healthy.
func (e *RegionEndpoint) Err() *EndpointError { return e.err }

// Descriptor is the decoded descriptor (zero if decoding failed).
func (e *RegionEndpoint) Descriptor() Descriptor { return e.desc }

func (e *RegionEndpoint) set(kind EndpointErrorKind, op string, region, addr uint64, operand, observed int32, msg string) error {
	if e.err == nil {
		e.err = &EndpointError{Kind: kind, Op: op, RegionID: region, CounterAddr: addr, Operand: operand, Observed: observed, Msg: msg}
	}
	return e.err
}

func (e *RegionEndpoint) sticky() error {
	if e.err != nil {
		return e.err
	}
	return nil
}

// underneath records a failure of the simulated memory access itself.
func (e *RegionEndpoint) underneath(op string, addr uint64, operand int32, err error) error {
	if errors.Is(err, sim.ErrKilled) {
		return err
	}
	return e.set(EndpointLocalOperation, op, e.desc.RegionID, addr, operand, 0, err.Error())
}

// CounterAddr is the address of the counter at offset (OUT_OF_BOUNDS for
// an overflow, misaligned or out-of-range offset).
func (e *RegionEndpoint) CounterAddr(offset uint64) (uint64, error) {
	if err := e.sticky(); err != nil {
		return 0, err
	}
	addr, err := e.desc.CounterAddr(offset)
	if err != nil {
		return 0, e.set(EndpointOutOfBounds, "counter_addr", e.desc.RegionID, addr, 0, 0, "counter offset is out of bounds: "+err.Error())
	}
	return addr, nil
}

// checkSignal validates a counter address, the operand and the op or cmp.
func (e *RegionEndpoint) checkSignal(op string, addr uint64, value int64, valid bool, what string) (int32, error) {
	if err := e.sticky(); err != nil {
		return 0, err
	}
	v, ok := toInt32(value)
	if err := e.desc.CheckCounterAddr(addr); err != nil {
		return 0, e.set(EndpointOutOfBounds, op, e.desc.RegionID, addr, v, 0, "invalid counter address: "+err.Error())
	}
	if !ok {
		return 0, e.set(EndpointLocalOperation, op, e.desc.RegionID, addr, 0, 0, fmt.Sprintf("operand %d does not fit an int32", value))
	}
	if !valid {
		return 0, e.set(EndpointSignalProtocol, op, e.desc.RegionID, addr, v, 0, "invalid "+what)
	}
	return v, nil
}

// SignalNotify sets or adds to the counter at addr. A write to a line
// another agent owns is a single-writer violation (SIGNAL_PROTOCOL).
func (e *RegionEndpoint) SignalNotify(p *sim.Proc, addr uint64, value int64, op NotifyOp) error {
	const name = "signal_notify"
	v, err := e.checkSignal(name, addr, value, op.Valid(), "notify operation")
	if err != nil {
		return err
	}
	if err := e.pt.notify(p, addr, v, op, "l2_signal_notify"); err != nil {
		var ve *ViolationError
		if errors.As(err, &ve) {
			return e.set(EndpointSignalProtocol, name, e.desc.RegionID, addr, v, 0, ve.Error())
		}
		return e.underneath(name, addr, v, err)
	}
	return nil
}

// SignalTest reads the counter once: (matched, observed).
func (e *RegionEndpoint) SignalTest(p *sim.Proc, addr uint64, value int64, cmp WaitCmp) (TestResult, error) {
	const name = "signal_test"
	v, err := e.checkSignal(name, addr, value, cmp.Valid(), "wait comparison")
	if err != nil {
		return TestResult{}, err
	}
	res, err := e.pt.test(p, addr, v, cmp)
	if err != nil {
		return TestResult{}, e.underneath(name, addr, v, err)
	}
	return res, nil
}

// SignalWait waits until the counter satisfies cmp against value. A zero
// timeout is a live no-attempt: on a healthy endpoint it returns
// (0, false, nil) at once. A positive timeout that passes records
// SIGNAL_TIMEOUT with the last observed value (sticky, like every endpoint
// error). ok is true when the comparison matched.
func (e *RegionEndpoint) SignalWait(p *sim.Proc, addr uint64, value int64, cmp WaitCmp, timeout sim.Time) (observed int32, ok bool, err error) {
	const name = "signal_wait"
	v, err := e.checkSignal(name, addr, value, cmp.Valid(), "wait comparison")
	if err != nil {
		return 0, false, err
	}
	if timeout < 0 {
		return 0, false, e.set(EndpointLocalOperation, name, e.desc.RegionID, addr, v, 0, fmt.Sprintf("negative timeout %v", timeout))
	}
	if timeout == 0 {
		return 0, false, nil
	}
	if p == nil {
		return 0, false, e.set(EndpointLocalOperation, name, e.desc.RegionID, addr, v, 0, "a blocking wait needs a simulated process")
	}
	obs, matched, err := e.pt.wait(p, name, addr, v, cmp, timeout)
	if err != nil {
		return obs, false, e.underneath(name, addr, v, err)
	}
	if !matched {
		return obs, false, e.set(EndpointSignalTimeout, name, e.desc.RegionID, addr, v, obs, "wait timed out")
	}
	return obs, true, nil
}

func (e *RegionEndpoint) checkPayload(op string, offset, n uint64) error {
	if err := e.sticky(); err != nil {
		return err
	}
	if err := e.desc.CheckPayload(offset, n); err != nil {
		return e.set(EndpointOutOfBounds, op, e.desc.RegionID, 0, 0, 0, "payload range is out of bounds: "+err.Error())
	}
	if err := e.pt.ok(); err != nil {
		return e.set(EndpointLocalOperation, op, e.desc.RegionID, 0, 0, 0, err.Error())
	}
	return nil
}

// payloadRegion is the simulated memory behind payload [offset, +n) of the
// descriptor (which may describe a sub-range of the region).
func (e *RegionEndpoint) payloadRegion(offset, n uint64) machine.Region {
	base := e.desc.PayloadBase - e.st.payload.Addr()
	return e.st.payload.Sub(int64(base+offset), int64(n))
}

// PayloadRead returns a live view of payload [offset, +nbytes): the
// simulated memory itself, not a copy, so later writes show through. No
// bytes move, so no time is charged; a PE kernel reading the view pays.
func (e *RegionEndpoint) PayloadRead(offset, nbytes uint64) (machine.Region, error) {
	if err := e.checkPayload("payload_read", offset, nbytes); err != nil {
		return machine.Region{}, err
	}
	return e.payloadRegion(offset, nbytes), nil
}

// PayloadWrite copies data (small metadata or status) into the payload at
// offset.
func (e *RegionEndpoint) PayloadWrite(p *sim.Proc, offset uint64, data []byte) error {
	const name = "payload_write"
	if err := e.checkPayload(name, offset, uint64(len(data))); err != nil {
		return err
	}
	base := e.desc.PayloadBase - e.st.payload.Addr()
	if err := e.pt.writePayload(p, base+offset, data, "l2_payload_write"); err != nil {
		return e.underneath(name, 0, 0, err)
	}
	return nil
}
