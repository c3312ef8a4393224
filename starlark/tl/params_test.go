package tl

import (
	"kernbench/engine/machine"
	"kernbench/engine/sim"
)

// HarnessParams are the machine parameters of the tests' simulated
// machines (tl_test's harness worlds and the internal tests): one SIP of
// two cubes of four PEs.
func HarnessParams() machine.Params {
	ns := sim.Nanosecond
	return machine.Params{
		Sips: 1, CubesPerSip: 2, PesPerCube: 4,
		PeNoc: machine.LinkParams{BytesPerUs: 128_000, Latency: 10 * ns},
		Ucie:  machine.LinkParams{BytesPerUs: 64_000, Latency: 50 * ns},
		Pcie:  machine.LinkParams{BytesPerUs: 32_000, Latency: 500 * ns},
		Tcm:   machine.MemParams{Capacity: 1 << 20, LinkParams: machine.LinkParams{BytesPerUs: 512_000, Latency: 2 * ns}},
		Sram:  machine.MemParams{Capacity: 8 << 20, LinkParams: machine.LinkParams{BytesPerUs: 256_000, Latency: 10 * ns}},
		Hbm:   machine.MemParams{Capacity: 1 << 30, LinkParams: machine.LinkParams{BytesPerUs: 512_000, Latency: 100 * ns}},
		Math:  machine.LinkParams{BytesPerUs: 256_000, Latency: 4 * ns},

		VCWeightCompute: 1, VCWeightComm: 1,
	}
}
