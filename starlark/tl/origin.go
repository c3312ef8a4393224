package tl

import (
	"fmt"

	"go.starlark.net/starlark"

	"kernbench/engine/machine"
	"kernbench/engine/sim"
)

// WatchOrigins makes m name, for each operation issued, the tl call that
// issues it (machine.OriginOf): the call running in the current process
// of the issuing PE's Sim (its SIP's in a partitioned run).
// Only a run
// diagnosing a phase-2 mismatch does this (a Starlark frame lookup per
// operation); its op_log then says which call issued each record.
func WatchOrigins(m *machine.Machine) {
	m.OriginOf = func(s *sim.Sim) string {
		// (The fused primitives take no steps in such a run: their
		// operations are issued by their process too.)
		p := s.Running()
		if p == nil {
			return ""
		}
		th, ok := p.Data.(*starlark.Thread)
		if !ok {
			return ""
		}
		k, ok := th.Local(threadKernelKey).(*Kernel)
		if !ok {
			return ""
		}
		return k.describeCall(th)
	}
}

// describeCall names the tl call k's thread th is in: the rank, the
// thread, the builtin and its call site.
func (k *Kernel) describeCall(th *starlark.Thread) string {
	who := fmt.Sprintf("rank %d", k.Rank)
	if k.Thread != 0 {
		who += " " + k.ThreadName
	}
	if c := k.Running(); c != nil {
		return fmt.Sprintf("%s %s at %v", who, c.Name, k.fusedSite())
	}
	if th.CallStackDepth() < 2 {
		return who
	}
	// (A tl builtin's frame is named as the user wrote it: tl.fetch.)
	return fmt.Sprintf("%s %s at %v", who, th.CallFrame(0).Name, th.CallFrame(1).Pos)
}
