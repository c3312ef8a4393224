package admit

import (
	"fmt"
	"sort"

	"kernbench/engine/topology"
	"kernbench/starlark/errkind"
	"kernbench/starlark/hostmem"
	"kernbench/starlark/report"
)

// World refuses a large world whose ranks alone (their
// machine, process and interpreter state: the estimate's per-rank part,
// which the size's buffers, rings and op_log only add to) would need more
// host memory than --max-memory, before anything of the world is built.
// The full estimate (checkMemory) needs the installed rings, so it comes
// after the topology and the queue pairs are set up: a world of millions
// of ranks used to fill the memory there, even with --max-memory 1K, and
// end in a Go fatal error. Setting up a world costs about its per-rank
// part (100,000 ranks: 3.7 GB, against 30 KiB a rank), so a world whose
// per-rank part is under setUpFloor is set up and gets the full estimate,
// whose refusal names more ways to fit.
func World(world int, topology string, channels int, limit int64, limitIsDefault bool) error {
	if limit <= 0 {
		return nil
	}
	// A direction's set-up (its neighbour map entry, validation, queue
	// pair and slots) counts with the rank's: full_mesh's grow as the
	// square of the world.
	ranksOf := func(w int) int64 { return WorldSetUpBytes(topology, w, channels) }
	e := hostmem.Estimate{Ranks: ranksOf(world), Runtime: hostmem.RuntimeBytes}
	if e.Total() <= limit || e.Ranks <= setUpFloor {
		return nil
	}
	// The largest world whose ranks and directions alone fit (0: none).
	fit := sort.Search(world, func(w int) bool { return hostmem.SatAdd(ranksOf(w+1), hostmem.RuntimeBytes) > limit })
	lt := hostmem.LimitText(limit, limitIsDefault)
	ref := &report.Refusal{Kind: errkind.MemoryLimit.Name, Estimate: e.Total(), Limit: limit, TimingOnly: e.Total()}
	ref.Reason = fmt.Sprintf("world_size %d needs at least %s of host memory, over --max-memory %s; a smaller --world-size or raise --max-memory",
		world, hostmem.FormatBytes(e.Total()), lt)
	alt := "a smaller --world-size"
	if fit >= 1 {
		alt += fmt.Sprintf(" (the ranks and their directions alone fit up to %d)", fit)
	}
	ref.Message = fmt.Sprintf("world_size %d needs at least %s of host memory before any buffer (%s), over --max-memory %s; try %s, or raise --max-memory",
		world, hostmem.FormatBytes(e.Total()), e.Parts(), lt, alt)
	return report.WithKind(errkind.MemoryLimit, &report.Failure{Rank: -1, Msg: ref.Message, Err: ref})
}

// WorldSetUpBytes is the estimate's part for the ranks of a world of w
// ranks on topology and their directions, before any buffer.
func WorldSetUpBytes(topo string, w, channels int) int64 {
	return hostmem.SetUpBytes(int64(w), hostmem.SatMul(int64(w), topology.Degree(topo, w, channels)))
}

// setUpFloor: a world whose per-rank estimate is at most this (8738
// ranks of 30 KiB) is set up before its memory is estimated (about as
// much again): under a ulimit -v that would leave the Go heap no room.
const setUpFloor = 256 << 20
