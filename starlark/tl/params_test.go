package tl

import (
	"kernbench/engine/machine"
	"kernbench/engine/machine/machinetest"
)

// HarnessParams are the machine parameters of the tests' simulated
// machines (tl_test's harness worlds and the internal tests): one SIP of
// two cubes of four PEs.
func HarnessParams() machine.Params { return machinetest.Params(1, 2, 4) }

// SetPieceSteps turns the fused primitives' steps on or off (off: the
// process does every wait of their pipelines) for tl_test's comparisons.
func SetPieceSteps(on bool) { pieceStepsOff = !on }
