// Package wiring turns a run's configuration into what its simulated
// machine is built from, and nothing else: machine parameters and faults
// from the system section, the IPCQ configuration from the settings, and
// every rank's neighbour map (the builtin topology, then the module's
// neighbors() hook) as validated links. starlark/ccl builds its worlds,
// and kernbench check its maps, from them.
package wiring

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"go.starlark.net/starlark"

	"kernbench/engine/config"
	"kernbench/engine/machine"
	"kernbench/engine/sim"
	"kernbench/engine/topology"
	"kernbench/starlark/script"
	"kernbench/starlark/tl"
)

// MachineParams converts the system section and settings into engine units:
// bandwidth as integer bytes per microsecond, times in picoseconds.
func MachineParams(sys config.System, set config.Settings) machine.Params {
	link := func(bw, lat float64) machine.LinkParams {
		return machine.LinkParams{BytesPerUs: int64(math.Round(bw * 1000)), Latency: sim.Time(math.Round(lat * 1000))}
	}
	mem := func(m config.Memory) machine.MemParams {
		return machine.MemParams{Capacity: m.Capacity, LinkParams: link(m.BandwidthGBps, m.LatencyNs)}
	}
	return machine.Params{
		Sips: sys.Sips, CubesPerSip: sys.CubesPerSip, PesPerCube: sys.PesPerCube,
		PeNoc: link(sys.Links.PeNoc.BandwidthGBps, sys.Links.PeNoc.LatencyNs),
		Ucie:  link(sys.Links.Ucie.BandwidthGBps, sys.Links.Ucie.LatencyNs),
		Pcie:  link(sys.Links.Pcie.BandwidthGBps, sys.Links.Pcie.LatencyNs),
		Tcm:   mem(sys.Memory.Tcm), Sram: mem(sys.Memory.Sram), Hbm: mem(sys.Memory.Hbm),
		Math:            link(sys.Math.BytesPerNs, sys.Math.LatencyNs),
		VCWeightCompute: int64(set.VCWeights.Compute), VCWeightComm: int64(set.VCWeights.Comm),
		VCChunkSize: set.VCChunkSize,
		Placement:   sys.Placement,
		Faults:      faultParams(sys).faults,
	}
}

// machineFaults are system.faults as the machine's faults, with the entry
// each came from.
type machineFaults struct {
	faults []machine.Fault
	from   []int // the index in system.faults of faults[i]
}

// faultParams converts system.faults: a link entry is one fault; a PE
// entry one on each of its math unit and memory ports, and, when it
// stops, on its NoC links too (nothing enters or leaves a stopped PE).
func faultParams(sys config.System) machineFaults {
	var mf machineFaults
	ps := func(ns float64) sim.Time { return sim.Time(math.Round(ns * 1000)) }
	for i, e := range sys.Faults {
		f := machine.Fault{BandwidthFactor: e.BandwidthFactor, ExtraLatency: ps(e.LatencyNs), Jitter: ps(e.JitterNs), Seed: e.Seed,
			StopAt: ps(max(e.StopAtNs, 0)), Stops: e.StopAtNs >= 0}
		if e.Link != "" {
			f.Resource = e.Link
			mf.faults, mf.from = append(mf.faults, f), append(mf.from, i)
			continue
		}
		if e.Slowdown != 0 {
			f.BandwidthFactor = 1 / e.Slowdown
		}
		names := []string{fmt.Sprintf("math pe%d", e.PE), fmt.Sprintf("tcm pe%d", e.PE), fmt.Sprintf("hbm pe%d", e.PE)}
		for _, name := range names {
			f.Resource = name
			mf.faults, mf.from = append(mf.faults, f), append(mf.from, i)
		}
		if f.Stops {
			cube := e.PE / max(1, sys.PesPerCube)
			for _, name := range []string{fmt.Sprintf("pe_noc pe%d->c%d", e.PE, cube), fmt.Sprintf("pe_noc c%d->pe%d", cube, e.PE)} {
				mf.faults, mf.from = append(mf.faults, machine.Fault{Resource: name, StopAt: f.StopAt, Stops: true}), append(mf.from, i)
			}
		}
	}
	return mf
}

// CheckFaults says, at the entry of system.faults, what the machine of mp
// would refuse: a name it has no resource of, two entries for one
// resource. Every bad entry is named, once (errors.Join, in entry order).
func CheckFaults(sys config.System, mp machine.Params) error {
	entries := sys.Faults
	mf := faultParams(sys)
	first := make(map[string]int)
	var errs []error
	bad := make(map[int]bool) // entries already reported
	for i, f := range mf.faults {
		from := mf.from[i]
		if bad[from] {
			continue
		}
		e := entries[from]
		at := fmt.Sprintf("%s: system.faults[%d]", e.Pos, from)
		if e.PE >= 0 && e.PE >= mp.Sips*mp.CubesPerSip*mp.PesPerCube {
			errs, bad[from] = append(errs, fmt.Errorf("%s: pe %d: the machine has %d PEs (0 to %d)", at, e.PE, mp.Sips*mp.CubesPerSip*mp.PesPerCube, mp.Sips*mp.CubesPerSip*mp.PesPerCube-1)), true
			continue
		}
		if err := mp.ResourceNamed(f.Resource); err != nil {
			errs, bad[from] = append(errs, fmt.Errorf("%s: %w", at, err)), true
			continue
		}
		if j, dup := first[f.Resource]; dup && mf.from[j] != from {
			errs, bad[from] = append(errs, fmt.Errorf("%s: %s has a fault already (%s, system.faults[%d]): give one entry per resource, with every change in it",
				at, f.Resource, entries[mf.from[j]].Pos, mf.from[j])), true
			continue
		}
		first[f.Resource] = i
	}
	return errors.Join(errs...)
}

// IPCQConfig is the process group's IPCQ configuration under set: buffer
// kind, backpressure and polling, ring depth, slot size, credits and
// per-message overhead.
func IPCQConfig(set config.Settings) (machine.IPCQConfig, error) {
	kind, err := machine.ParseSpace(set.BufferKind)
	if err != nil {
		return machine.IPCQConfig{}, err
	}
	bp := machine.Sleep
	if set.Backpressure == "poll" {
		bp = machine.Poll
	}
	return machine.IPCQConfig{
		BufferKind: kind, Backpressure: bp, PollInterval: sim.Time(set.PollIntervalNs) * sim.Nanosecond,
		NSlots: set.NSlots, SlotSize: set.SlotSize, CreditBytes: set.IpcqCreditSizeBytes,
		Overhead: sim.Time(set.IpcqOverheadNs) * sim.Nanosecond,
	}, nil
}

// InitError is a failure while setting up the process group: topology,
// neighbors() hook, rx rings, placement. Exit status 2.
type InitError struct{ Err error }

func (e *InitError) Error() string { return e.Err.Error() }
func (e *InitError) Unwrap() error { return e.Err }

// MapSpec is what a run's neighbour maps are built from.
type MapSpec struct {
	File      string
	topology  string
	world     int
	meshShape []int
	channels  int // 0 = 1
	Hook      starlark.Callable
	Params    []starlark.Tuple // the algorithm's params, for neighbors(**params)
	Sys       config.System    // for neighbors(location=, machine=)
}

// Shape sets the topology, world size, mesh shape and channels the maps
// are built for.
func (s *MapSpec) Shape(topology string, world int, set config.Settings) {
	s.topology, s.world, s.meshShape, s.channels = topology, world, set.MeshShape, set.Channels
}

// hookKwargs are the keyword arguments neighbors() declares: any of the
// algorithm's params it names (all of them when it takes **kwargs), and
// location / machine when it names them.
func (s *MapSpec) hookKwargs() []starlark.Tuple {
	fn, ok := s.Hook.(*starlark.Function)
	if !ok {
		return nil
	}
	named := map[string]bool{}
	for i := range fn.NumParams() {
		name, _ := fn.Param(i)
		named[name] = true
	}
	var kw []starlark.Tuple
	for _, kv := range s.Params {
		if k := string(kv[0].(starlark.String)); named[k] || fn.HasKwargs() {
			kw = append(kw, kv)
		}
	}
	if named["location"] {
		kw = append(kw, starlark.Tuple{starlark.String("location"), tl.LocationFunc("location", func(rank int) (int, int, int, error) {
			if rank < 0 || rank >= s.world {
				return 0, 0, 0, fmt.Errorf("rank %d is outside [0, %d)", rank, s.world)
			}
			return s.Sys.Location(rank)
		})})
	}
	if named["machine"] {
		kw = append(kw, starlark.Tuple{starlark.String("machine"), tl.MachineValue(s.Sys.Sips, s.Sys.CubesPerSip, s.Sys.PesPerCube, s.world)})
	}
	return kw
}

// NeighborTables builds every rank's neighbour map: the builtin generator,
// then the module's neighbors() hook, then validation (I3).
func NeighborTables(s MapSpec, th *starlark.Thread) ([][]machine.Link, *topology.Topology, error) {
	file, topo, world, hook := s.File, s.topology, s.world, s.Hook
	t, err := topology.Builtin(topo, world, s.meshShape, max(1, s.channels))
	if err != nil {
		return nil, nil, &InitError{fmt.Errorf("%s: %w", file, err)}
	}
	if topology.RequiresNeighborsHook(topo) && hook == nil {
		return nil, nil, &InitError{fmt.Errorf("%s: topology %q requires the module to define neighbors(rank, world_size, neighbor_map)", file, topo)}
	}
	if hook != nil {
		kw := s.hookKwargs()
		for r := 0; r < world; r++ {
			d := starlark.NewDict(len(t.Maps[r]))
			for _, dir := range sortedDirs(t.Maps[r]) {
				_ = d.SetKey(starlark.String(dir), starlark.MakeInt(t.Maps[r][dir]))
			}
			v, err := starlark.Call(th, hook, starlark.Tuple{starlark.MakeInt(r), starlark.MakeInt(world), d}, kw)
			if err != nil {
				err = script.Stopped(th, err)
				return nil, nil, &InitError{fmt.Errorf("%s: neighbors(%d, %d, ...) failed: %w", file, r, world, err)}
			}
			if v != starlark.None {
				d, ok := v.(*starlark.Dict)
				if !ok {
					return nil, nil, &InitError{fmt.Errorf("%s: neighbors(%d, %d, ...) must return a dict or None, got %s", file, r, world, v.Type())}
				}
				m := map[string]int{}
				for _, kv := range d.Items() {
					k, ok1 := kv[0].(starlark.String)
					peer, err := starlark.AsInt32(kv[1])
					if !ok1 || err != nil {
						return nil, nil, &InitError{fmt.Errorf("%s: neighbors(%d, %d, ...) returned %s: %s; want direction name (str) -> peer rank (int)", file, r, world, kv[0], kv[1])}
					}
					m[string(k)] = peer
				}
				t.Maps[r] = m
			}
		}
	}
	if hook != nil {
		// A one-way map ({"E": (rank + 2) % world_size}) gets the
		// receiving ends it implies on the peers.
		topology.ImplyReceiveEnds(t)
	}
	pairing, err := topology.Validate(t)
	if err != nil {
		return nil, nil, &InitError{fmt.Errorf("%s: %w", file, err)}
	}
	// Every rank's links in one array (at 65,536 ranks, two allocations per
	// rank fewer).
	n := 0
	for _, ps := range pairing {
		n += len(ps)
	}
	all := make([]machine.Link, 0, n)
	links := make([][]machine.Link, world)
	for r, ps := range pairing {
		if len(ps) == 0 {
			continue // (nil, as before: a rank without directions)
		}
		from := len(all)
		for _, p := range ps {
			all = append(all, machine.Link{Dir: p.Dir, Peer: p.Peer, PeerDir: p.PeerDir, RecvOnly: p.RecvOnly})
		}
		links[r] = all[from:len(all):len(all)]
	}
	return links, t, nil
}

func sortedDirs(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// LinkBandwidth is the bottleneck bandwidth (GB/s) of the path from a rank
// to its slowest installed neighbour, minimised over ranks; 0 without
// neighbours.
func LinkBandwidth(m *machine.Machine, g *machine.Group) float64 {
	var worst int64
	for _, ep := range g.EPs {
		for _, q := range ep.QPs {
			if q.RecvOnly {
				continue
			}
			bw := m.PEToPE(ep.PE, g.EPs[q.Peer].PE).Bottleneck()
			if bw > 0 && (worst == 0 || bw < worst) {
				worst = bw
			}
		}
	}
	return float64(worst) / 1000
}
