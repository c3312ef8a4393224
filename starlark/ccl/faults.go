package ccl

import (
	"fmt"

	"kernbench/starlark/report"
)

// faultsHeld names each resource a fault stopped that held transfers,
// what the fault is and who sent them; nil when none did.
func (w *world) faultsHeld() []string {
	var held []string
	for _, u := range report.FaultUses(w.m, w.now()) {
		if u.Stalled > 0 {
			held = append(held, fmt.Sprintf("%s (%s) held %d transfer(s) from %s", u.Resource, u.Fault, u.Stalled, report.RanksText(u.StalledRanks)))
		}
	}
	return held
}
