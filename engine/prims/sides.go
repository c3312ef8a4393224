package prims

import "kernbench/engine/machine"

// Sides arbitrate a rank's direction sides between its threads (each
// named by a comparable value of the caller's): one thread at a time may
// use the send side, or the receive side, of a queue pair.
type Sides struct {
	m map[sideKey]*SideUse
}

// sideKey names one side of a queue pair: its send side or its receive
// side.
type sideKey struct {
	q    *machine.QueuePair
	send bool
}

// SideUse is a thread's operation in progress on a direction side: the
// thread, the operation's name and where it was called.
type SideUse struct {
	By any
	Op string
	At any
	n  int // uses by By not yet released
}

// Use marks q's send or receive side as used by by's operation op (at)
// until the returned release is called; in use by another thread, the
// side is not taken and that thread's use is returned. Uses by the same
// thread nest: the side is free when each has been released.
func (s *Sides) Use(q *machine.QueuePair, send bool, by any, op string, at any) (release func(), other *SideUse) {
	if s.m == nil {
		s.m = map[sideKey]*SideUse{}
	}
	key := sideKey{q, send}
	u := s.m[key]
	if u != nil && u.By != by {
		return nil, u
	}
	if u == nil {
		u = &SideUse{By: by, Op: op, At: at}
		s.m[key] = u
	}
	u.n++
	released := false
	return func() {
		if released {
			return
		}
		released = true
		if u.n--; u.n == 0 && s.m[key] == u {
			delete(s.m, key)
		}
	}, nil
}

// OperandRead is a fused primitive of thread By reading its local operand
// Reg (its loads are issued over the whole call).
type OperandRead struct {
	By  any
	Reg machine.Region
	Op  string
	At  any
}

// OperandReads are the local operands a rank's threads' primitives are
// reading.
type OperandReads struct {
	list []*OperandRead
}

// Any reports whether a primitive reads an operand.
func (rs *OperandReads) Any() bool { return len(rs.list) != 0 }

// Add registers by's primitive op (at) as reading reg until done.
func (rs *OperandReads) Add(by any, reg machine.Region, op string, at any) (done func()) {
	r := &OperandRead{By: by, Reg: reg, Op: op, At: at}
	rs.list = append(rs.list, r)
	return func() {
		for i, x := range rs.list {
			if x == r {
				rs.list = append(rs.list[:i], rs.list[i+1:]...)
				return
			}
		}
	}
}

// Conflict returns the first read by another thread than by of an
// operand overlapping dst, or nil.
func (rs *OperandReads) Conflict(by any, dst machine.Region) *OperandRead {
	for _, r := range rs.list {
		if r.By != by && r.Reg.Overlaps(dst) {
			return r
		}
	}
	return nil
}
