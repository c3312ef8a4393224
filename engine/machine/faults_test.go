package machine

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/engine/sim"
)

// Rule (model §2): T(path, n) = Σ latency + n / min bandwidth holds on an
// idle path whose resource a fault degrades, with the degraded figures:
// bandwidth × factor, latency + extra.
// PE 0 (cube 0) to PE 4 (cube 1) crosses pe_noc, ucie c0->c1 and pe_noc;
// the UCIe link is the slowest at 64 GB/s.
func TestDegradedLinkFollowsTheFormula(t *testing.T) {
	ns := sim.Nanosecond
	const n = 1 << 20
	for _, tc := range []struct {
		name  string
		fault Fault
		lat   []sim.Time
		bw    []int64
	}{
		{"no fault", Fault{Resource: "ucie c0->c1"}, []sim.Time{10 * ns, 50 * ns, 10 * ns}, []int64{128_000, 64_000, 128_000}},
		{"half bandwidth", Fault{Resource: "ucie c0->c1", BandwidthFactor: 0.5}, []sim.Time{10 * ns, 50 * ns, 10 * ns}, []int64{128_000, 32_000, 128_000}},
		{"extra latency", Fault{Resource: "ucie c0->c1", ExtraLatency: 200 * ns}, []sim.Time{10 * ns, 250 * ns, 10 * ns}, []int64{128_000, 64_000, 128_000}},
		{"a slow PE NoC link becomes the bottleneck", Fault{Resource: "pe_noc pe0->c0", BandwidthFactor: 0.25}, []sim.Time{10 * ns, 50 * ns, 10 * ns}, []int64{32_000, 64_000, 128_000}},
		{"the other direction is not slowed", Fault{Resource: "ucie c1->c0", BandwidthFactor: 0.5}, []sim.Time{10 * ns, 50 * ns, 10 * ns}, []int64{128_000, 64_000, 128_000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testParams()
			p.Faults = []Fault{tc.fault}
			m := newTestMachine(t, p)
			path := m.PEToPE(m.PE(0), m.PE(4))
			if got, want := path.IdleTime(n), formula(tc.lat, tc.bw, n); got != want {
				t.Errorf("idle time of %d bytes: %v, want %v", n, got, want)
			}
		})
	}
}

// Rule (model §1, §2): jitter keeps a run deterministic and the idle-path
// time a lower bound. It is drawn per booking from a stream of the seed
// and the resource's name: the same seed gives the same arrivals, another seed
// others, each within [0, jitter] of the undisturbed arrival.
func TestJitterIsSeeded(t *testing.T) {
	const jitter = 40 * sim.Nanosecond
	arrivals := func(seed uint64) []sim.Time {
		p := testParams()
		if seed != 0 {
			p.Faults = []Fault{{Resource: "ucie c0->c1", Jitter: jitter, Seed: seed}}
		}
		m := newTestMachine(t, p)
		path := m.PEToPE(m.PE(0), m.PE(4))
		var out []sim.Time
		for i := 0; i < 32; i++ {
			at := sim.Time(i) * sim.Microsecond // idle path at each booking
			a, _ := path.book(at, at, 4096, nil, 0, m.slowBooking)
			out = append(out, a-at)
		}
		return out
	}
	base, a, again, other := arrivals(0), arrivals(7), arrivals(7), arrivals(8)
	if diff := cmp.Diff(a, again); diff != "" {
		t.Errorf("seed 7 twice differs (-first +second):\n%s", diff)
	}
	if cmp.Equal(a, other) {
		t.Errorf("seeds 7 and 8 gave the same arrivals: %v", a)
	}
	spread := false
	for i := range base {
		d := a[i] - base[i]
		if d < 0 || d > jitter {
			t.Errorf("booking %d: jitter %v, want within [0, %v]", i, d, jitter)
		}
		spread = spread || d != a[0]-base[0]
	}
	if !spread {
		t.Errorf("every booking got the same jitter %v", a[0]-base[0])
	}
}

// A stopped resource carries what leaves it before the stop and nothing
// after: a later booking never arrives, nor does one queued behind it, and
// the machine's fault report counts them and names the PE that issued
// the first.
func TestStoppedLinkHoldsWhatWasNotThrough(t *testing.T) {
	p := testParams()
	stop := 10 * sim.Microsecond
	p.Faults = []Fault{{Resource: "ucie c0->c1", StopAt: stop, Stops: true}}
	m := newTestMachine(t, p)
	path := m.PEToPE(m.PE(0), m.PE(4))
	before, _ := path.book(0, 0, 4096, m.PE(0).dma, 0, m.slowBooking)
	if before >= stop {
		t.Fatalf("a booking at t=0 arrives at %v, after the stop at %v", before, stop)
	}
	after, _ := path.book(stop, stop, 4096, m.PE(1).dma, 0, m.slowBooking)
	if after != sim.Never {
		t.Errorf("a booking at the stop arrives at %v, want never", after)
	}
	behind, _ := path.book(stop+sim.Microsecond, stop+sim.Microsecond, 64, m.PE(2).dma, 0, m.slowBooking)
	if behind != sim.Never {
		t.Errorf("a booking after the stop arrives at %v, want never", behind)
	}
	fs := m.Faults()
	if len(fs) != 1 || !fs[0].Used || fs[0].Stalled != 2 {
		t.Fatalf("fault report %+v, want the link used with 2 stalled bookings", fs)
	}
	if diff := cmp.Diff([]int{1, 2}, fs[0].StalledFrom); diff != "" {
		t.Errorf("stalled bookings' PEs (-want +got):\n%s", diff)
	}
}

// A fault names a resource as the machine names it; anything else is
// refused with the forms names take, and so is a second fault for one
// resource.
func TestFaultNames(t *testing.T) {
	p := testParams() // 2 SIPs × 2 cubes × 4 PEs
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"ucie c0->c1", true}, {"ucie c3->c2", true}, {"ucie c1->c2", false}, {"ucie c0->c0", false},
		{"pe_noc pe5->c1", true}, {"pe_noc c1->pe5", true}, {"pe_noc pe5->c0", false}, {"pe_noc pe16->c4", false},
		{"pcie s1->host", true}, {"pcie host->s0", true}, {"pcie s2->host", false},
		{"math pe15", true}, {"tcm pe0", true}, {"hbm pe3", true}, {"math pe16", false}, {"sram c3", true}, {"sram c4", false},
		{"ucie c01->c1", false}, {"ucie c0->c1 ", false}, {"link 3", false}, {"", false},
	} {
		err := p.ResourceNamed(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("ResourceNamed(%q) = %v, want ok %v", tc.name, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "kernbench check --show-map") {
			t.Errorf("ResourceNamed(%q): %v does not say how resources are named", tc.name, err)
		}
	}
	p.Faults = []Fault{{Resource: "math pe1", BandwidthFactor: 0.5}, {Resource: "math pe1", ExtraLatency: 1}}
	if _, err := New(sim.New(), p); err == nil || !strings.Contains(err.Error(), "one fault per resource") {
		t.Errorf("two faults for one resource: %v, want refused", err)
	}
}
