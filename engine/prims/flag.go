package prims

import "kernbench/engine/sim"

// Flag is a one-shot flag between the processes of one rank (a tl.event):
// one sets it once its work is in memory, the others wait until then.
type Flag struct {
	IsSet bool
	// SetAt is where it was set (a script position, for messages).
	SetAt   any
	waiters []*sim.Proc
}

// Wait parks p until the flag is set (at once when it is); meanwhile p
// waits on on, what a deadlock report names.
func (f *Flag) Wait(p *sim.Proc, on any) error {
	for !f.IsSet {
		f.waiters = append(f.waiters, p)
		p.Wait, p.WaitSince = on, p.Sim().Now()
		err := p.Park()
		p.Wait = nil
		if err != nil {
			return err
		}
	}
	return nil
}

// Set sets the flag (at) and wakes its waiters, in the order they began
// to wait.
func (f *Flag) Set(at any) {
	f.IsSet, f.SetAt = true, at
	for _, w := range f.waiters {
		w.Wake()
	}
	f.waiters = nil
}
