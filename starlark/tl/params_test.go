package tl

import (
	"kernbench/engine/machine"
	"kernbench/engine/machine/machinetest"
)

// HarnessParams are the machine parameters of the tests' simulated
// machines (tl_test's harness worlds and the internal tests): one SIP of
// two cubes of four PEs.
func HarnessParams() machine.Params { return machinetest.Params(1, 2, 4) }
