package tl

import (
	"kernbench/engine/dtype"
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

// PieceHandOvers is how often the steps of k's fused primitives handed
// the pipeline over to the process, by the wait only the process can do:
// a store into the local operand's piece to load (window), into the
// received slot to load (slot), into the dst piece to store (dst), or a
// send still reading the staging slot to fill (staging).
func PieceHandOvers(k *Kernel) (window, slot, dst, staging int) {
	pr := k.pipeline
	if pr == nil {
		return 0, 0, 0, 0
	}
	h := &pr.handedOver
	return int(h[atPiece]), int(h[atArrived] + h[atTaken]), int(h[atStoreDst]), int(h[atStage])
}

// StagingSlot is k's next staging slot for count elements of dt
// (stagingSlot), for tl_test's checks of the staging ring.
func StagingSlot(k *Kernel, dt dtype.DType, count int64) (machine.Region, error) {
	return k.stagingSlot("tl.recv_reduce_send", dt, count)
}
