// Package machinetest holds what tests of the packages above
// engine/machine share to build a small simulated machine.
package machinetest

import (
	"kernbench/engine/machine"
	"kernbench/engine/sim"
)

// Params is a machine of sips SIPs of cubes cubes of pes PEs each, with
// the link, memory and math numbers of the shipped ccl.yaml (1 GiB of HBM
// per PE).
func Params(sips, cubes, pes int) machine.Params {
	ns := sim.Nanosecond
	return machine.Params{
		Sips: sips, CubesPerSip: cubes, PesPerCube: pes,
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
