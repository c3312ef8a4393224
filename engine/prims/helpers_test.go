package prims

import (
	"testing"

	"kernbench/engine/machine"
	"kernbench/engine/machine/machinetest"
	"kernbench/engine/sim"
)

// newMachine is a timing-only machine of ranks PEs, placed.
func newMachine(t *testing.T, ranks int) *machine.Machine {
	t.Helper()
	m, err := machine.New(sim.New(), machinetest.Params(1, 1, ranks))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Place(ranks); err != nil {
		t.Fatal(err)
	}
	m.SetTimingOnly()
	return m
}

// site is a call site for the tests: a line, 0 for none.
type site int

func (s site) IsValid() bool  { return s != 0 }
func (s site) String() string { return "kernel.star:" + string(rune('0'+s)) }
