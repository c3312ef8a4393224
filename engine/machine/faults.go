package machine

import (
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"

	"kernbench/engine/sim"
)

// Faults and variability: one resource of the machine (a link, a memory
// port, a math unit, by the name the machine gives it, as `kernbench check
// --show-map` prints it) deviates from the parameters of its kind. A
// degraded bandwidth or an added latency changes the resource when it is
// made, so the booking path is the same as without faults. Jitter and a
// stop act on each booking: a machine with either books every path
// through the general path (bookSlow), as a traced one does; the fast path
// of a machine without them is unchanged.

// Fault is one resource's deviation. Zero fields change nothing.
type Fault struct {
	// Resource is the resource's name: "ucie c0->c1", "pe_noc pe3->c0",
	// "pcie s0->host", "math pe3", "tcm pe3", "sram c0".
	Resource string
	// BandwidthFactor multiplies the resource's bandwidth (0: unchanged).
	BandwidthFactor float64
	// ExtraLatency is added to the resource's latency.
	ExtraLatency sim.Time
	// Jitter, when > 0, adds to each booking a latency drawn uniformly
	// from [0, Jitter] picoseconds, from a stream of Seed and the
	// resource's name: the same seed gives the same times.
	Jitter sim.Time
	Seed   uint64
	// StopAt, when Stops, is when the resource stops carrying anything: a
	// booking that has not left it by then never does.
	StopAt sim.Time
	Stops  bool
}

func (f Fault) String() string {
	var parts []string
	if f.BandwidthFactor != 0 {
		parts = append(parts, fmt.Sprintf("bandwidth ×%g", f.BandwidthFactor))
	}
	if f.ExtraLatency > 0 {
		parts = append(parts, fmt.Sprintf("latency +%v", f.ExtraLatency))
	}
	if f.Jitter > 0 {
		parts = append(parts, fmt.Sprintf("jitter 0–%v (seed %d)", f.Jitter, f.Seed))
	}
	if f.Stops {
		parts = append(parts, fmt.Sprintf("stops at t=%v", f.StopAt))
	}
	if len(parts) == 0 {
		parts = append(parts, "no change")
	}
	return f.Resource + ": " + strings.Join(parts, ", ")
}

// perBooking says the fault acts on each booking (jitter, a stop).
func (f Fault) perBooking() bool { return f.Jitter > 0 || f.Stops }

// resourceFault is a resource's fault as its bookings apply it.
type resourceFault struct {
	Fault
	rng uint64 // the jitter stream's state (splitmix64)
	// Stalled counts the bookings the stop held for ever; StalledFrom
	// lists the PEs whose DMA issued the first of them (-1: no DMA).
	Stalled     int64
	StalledFrom []int
}

// maxStalledFrom bounds the PEs a stop lists.
const maxStalledFrom = 8

// jitter draws the next booking's extra latency.
func (f *resourceFault) jitter() sim.Time {
	f.rng += 0x9e3779b97f4a7c15
	z := f.rng
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return sim.Time(z % uint64(f.Jitter+1))
}

// stall notes a booking the stop holds for ever, from source's PE.
func (f *resourceFault) stall(source *dmaEngine) {
	f.Stalled++
	pe := -1
	if source != nil && source.pe != nil {
		pe = source.pe.ID
	}
	if len(f.StalledFrom) < maxStalledFrom && !slices.Contains(f.StalledFrom, pe) {
		f.StalledFrom = append(f.StalledFrom, pe)
	}
}

// applyFault changes r as its fault says, when it has one.
func (m *Machine) applyFault(r *Resource) {
	f, ok := m.faults[r.Name]
	if !ok {
		return
	}
	if f.BandwidthFactor != 0 && r.BytesPerUs > 0 {
		r.BytesPerUs = max(1, int64(math.Round(float64(r.BytesPerUs)*f.BandwidthFactor)))
	}
	r.Latency = sim.Add(r.Latency, f.ExtraLatency)
	if f.perBooking() {
		h := fnv.New64a()
		h.Write([]byte(r.Name))
		r.rareOf().fault = &resourceFault{Fault: f, rng: f.Seed ^ h.Sum64()}
	}
}

// FaultState is a fault as a run left it, for reports.
type FaultState struct {
	Fault
	// Used: the run made the resource (a fault on a resource the run never
	// made changed nothing); Bytes and BusyTime are its use.
	Used     bool
	Bytes    int64
	BusyTime sim.Time
	// Stalled bookings and the PEs that issued them (a stop).
	Stalled     int64
	StalledFrom []int
	// Charged is the bytes of accesses charged at the resource's
	// parameters without booking it (Path.ChargeFor: an L3/L2 region's).
	Charged int64
}

// Faults is every fault of the machine's parameters, in their order, with
// what the run did with its resource.
func (m *Machine) Faults() []FaultState {
	if len(m.Params.Faults) == 0 {
		return nil
	}
	byName := make(map[string]*Resource)
	for _, r := range m.links {
		if r == nil {
			continue
		}
		if _, ok := m.faults[r.Name]; ok {
			byName[r.Name] = r
		}
	}
	out := make([]FaultState, 0, len(m.Params.Faults))
	for _, f := range m.Params.Faults {
		st := FaultState{Fault: f}
		if r := byName[f.Resource]; r != nil {
			st.Used, st.Bytes, st.BusyTime = true, r.Bytes, r.BusyTime
			if f := r.fault(); f != nil {
				st.Stalled, st.StalledFrom = f.Stalled, slices.Clone(f.StalledFrom)
			}
			if r.rare != nil {
				st.Charged = r.rare.charged
			}
		}
		out = append(out, st)
	}
	return out
}

// validFaults checks the faults of p: one per resource, factors and times
// in range, names the machine gives (ResourceNamed).
func (p Params) validFaults() error {
	seen := make(map[string]bool, len(p.Faults))
	for i, f := range p.Faults {
		if seen[f.Resource] {
			return fmt.Errorf("machine: fault %d: %s has a fault already: give one fault per resource, with every change in it", i, f.Resource)
		}
		seen[f.Resource] = true
		if err := p.ResourceNamed(f.Resource); err != nil {
			return fmt.Errorf("machine: fault %d: %w", i, err)
		}
		if f.BandwidthFactor < 0 || math.IsNaN(f.BandwidthFactor) || math.IsInf(f.BandwidthFactor, 0) {
			return fmt.Errorf("machine: fault %d (%s): bandwidth factor %g, want > 0", i, f.Resource, f.BandwidthFactor)
		}
		if f.ExtraLatency < 0 || f.Jitter < 0 || f.StopAt < 0 {
			return fmt.Errorf("machine: fault %d (%s): negative time", i, f.Resource)
		}
	}
	return nil
}

// ResourceNamed says whether a machine of these parameters has (or would
// make, when a run uses it) a resource of this name; the error names the
// forms the names take.
func (p Params) ResourceNamed(name string) error {
	pes, cubes := p.Sips*p.CubesPerSip*p.PesPerCube, p.Sips*p.CubesPerSip
	bad := func(why string) error {
		return fmt.Errorf("no resource %q on this machine (%s); resources are named as `kernbench check --show-map` prints them: "+
			"pe_noc peP->cC, pe_noc cC->peP, ucie cA->cB (cubes of one SIP), pcie sS->host, pcie host->sS, math peP, tcm peP, hbm peP, sram cC", name, why)
	}
	var a, b int
	switch {
	case scan(name, "pe_noc pe%d->c%d", &a, &b):
		if a < 0 || a >= pes || b != a/p.PesPerCube {
			return bad(fmt.Sprintf("PE %d is in cube %d", a, a/max(1, p.PesPerCube)))
		}
	case scan(name, "pe_noc c%d->pe%d", &b, &a):
		if a < 0 || a >= pes || b != a/p.PesPerCube {
			return bad(fmt.Sprintf("PE %d is in cube %d", a, a/max(1, p.PesPerCube)))
		}
	case scan(name, "ucie c%d->c%d", &a, &b):
		if a < 0 || b < 0 || a >= cubes || b >= cubes || a == b || a/p.CubesPerSip != b/p.CubesPerSip {
			return bad(fmt.Sprintf("%d cubes, %d per SIP: a UCIe link joins two cubes of one SIP", cubes, p.CubesPerSip))
		}
	case scan(name, "pcie s%d->host", &a), scan(name, "pcie host->s%d", &a):
		if a < 0 || a >= p.Sips {
			return bad(fmt.Sprintf("%d SIP(s)", p.Sips))
		}
	case scan(name, "math pe%d", &a), scan(name, "tcm pe%d", &a), scan(name, "hbm pe%d", &a):
		if a < 0 || a >= pes {
			return bad(fmt.Sprintf("%d PEs", pes))
		}
	case scan(name, "sram c%d", &a):
		if a < 0 || a >= cubes {
			return bad(fmt.Sprintf("%d cubes", cubes))
		}
	default:
		return bad("not a resource name")
	}
	return nil
}

// scan reads name in format exactly (fmt.Sscanf, and nothing left over
// or reformatted: "ucie c01->c1" is not "ucie c1->c1").
func scan(name, format string, args ...any) bool {
	var rest string
	n, _ := fmt.Sscanf(name+" end", format+" %s", append(args, &rest)...)
	if n != len(args)+1 || rest != "end" {
		return false
	}
	vals := make([]any, len(args))
	for i, a := range args {
		vals[i] = *a.(*int)
	}
	return fmt.Sprintf(format, vals...) == name
}
