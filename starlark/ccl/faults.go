package ccl

import (
	"fmt"
	"strings"

	"kernbench/starlark/errkind"
	"kernbench/starlark/report"
)

// faultStop is f, the failure of a run whose processes stopped waiting,
// as the fault that held what they waited for when a stopped resource
// held transfers (kind FaultStopped): not a deadlock of the algorithm, nor
// slow ranks. Any other failure is returned as it is.
func (w *world) faultStop(f *report.Failure) *report.Failure {
	switch f.ErrorKind() {
	case errkind.Deadlock, errkind.WaitTimeout, errkind.Watchdog:
	default:
		return f
	}
	var held []string
	for _, u := range report.FaultUses(w.m, w.s.Now()) {
		if u.Stalled > 0 {
			held = append(held, fmt.Sprintf("%s (%s) held %d transfer(s) from %s", u.Resource, u.Fault, u.Stalled, report.RanksText(u.StalledRanks)))
		}
	}
	if len(held) == 0 {
		return f
	}
	report.WithKind(errkind.FaultStopped, f)
	// The waits go round through the stopped resource, not through each
	// other: the wait-for graph and cycle of a deadlock, and its hint,
	// would mislead. The blocked processes stay.
	f.Cycle, f.WaitFor, f.Hint = nil, nil, ""
	if i := strings.Index(f.Detail, "wait-for graph ("); i >= 0 {
		f.Detail = strings.TrimRight(f.Detail[:i], "\n")
	}
	f.Msg = fmt.Sprintf("a fault stopped the run: %s; they never arrive, and %d process(es) wait for ever (below)", strings.Join(held, "; "), len(f.Blocked))
	return f
}
