package machine

import (
	"fmt"
	"testing"

	"kernbench/engine/sim"
)

// Rule (engine/sim, partition.go: what the machine needs): with
// SplitAtSIP, a transfer that crosses SIPs books its own SIP's segment
// when it starts and the far SIP's when its head reaches it. On an idle
// path its times are the whole path's, for transfers whose injection
// ends before the head crosses and for those still injecting then.
func TestSplitAtSIPKeepsIdlePaths(t *testing.T) {
	for _, spaces := range [][2]Space{{TCM, TCM}, {HBM, SRAM}, {SRAM, HBM}} {
		for _, n := range []int64{1, 4096, 1 << 20, 64 << 20} {
			for _, pes := range [][2]int{{0, 9}, {6, 13}, {3, 1}} {
				name := fmt.Sprintf("%v->%v/%d/pe%d->pe%d", spaces[0], spaces[1], n, pes[0], pes[1])
				t.Run(name, func(t *testing.T) {
					var got [2]sim.Time
					for i, split := range []bool{false, true} {
						p := testParams()
						p.SplitAtSIP = split
						m := newTestMachine(t, p)
						a, b := m.PE(pes[0]), m.PE(pes[1])
						mem := func(pe *PE, s Space) *Memory {
							return map[Space]*Memory{TCM: pe.TCM, SRAM: pe.SRAM, HBM: pe.HBM}[s]
						}
						d := &doneRecorder{sim: m.Sim}
						path := m.MemToMem(mem(a, spaces[0]), mem(b, spaces[1]))
						m.Submit(a, &Transfer{Path: path, N: n, VC: VCComm, Owner: d}, false)
						if err := m.Sim.Run(); err != nil {
							t.Fatal(err)
						}
						if want := path.IdleTime(n); d.at != want {
							t.Errorf("split %v: completion at %v, want the idle path's %v", split, d.at, want)
						}
						got[i] = d.at
					}
					if got[0] != got[1] {
						t.Errorf("split: %v, whole path: %v", got[1], got[0])
					}
				})
			}
		}
	}
}

// Rule (the same): under contention a far SIP's resource serves
// transfers in the order their heads reach it. A 4 KiB transfer from PE
// 0 (SIP 0) into PE 9's HBM (SIP 1) is issued at 0 and its head reaches
// PE 9's HBM port at 1120 ns; PE 9 reads 1 MiB of its own HBM from 300 ns,
// holding the port until 2348 ns. Booked as a whole at 0, the transfer
// went first and the read waited for it; split, the read (booked at
// 300 ns, before the head crossed at 610 ns) goes first and the
// transfer waits.
func TestSplitAtSIPServesAFarResourceInHeadOrder(t *testing.T) {
	ns := sim.Nanosecond
	for _, split := range []bool{false, true} {
		p := testParams()
		p.SplitAtSIP = split
		m := newTestMachine(t, p)
		a, b := m.PE(0), m.PE(9)
		x := &doneRecorder{sim: m.Sim}
		xPath := m.MemToMem(a.HBM, b.HBM)
		m.Submit(a, &Transfer{Path: xPath, N: 4096, VC: VCComm, Owner: x}, false)
		y := &doneRecorder{sim: m.Sim}
		yPath := m.MemToMem(b.HBM, b.TCM)
		m.Sim.At(300*ns, sim.HandlerFunc(func() {
			m.Submit(b, &Transfer{Path: yPath, N: 1 << 20, VC: VCCompute, Owner: y}, false)
		}))
		if err := m.Sim.Run(); err != nil {
			t.Fatal(err)
		}
		hbm := b.HBM.Port
		if !split {
			if want := xPath.IdleTime(4096); x.at != want || y.at <= 300*ns+yPath.IdleTime(1<<20) {
				t.Errorf("whole path: the transfer at %v (want its idle %v), the read at %v (want it delayed)", x.at, want, y.at)
			}
			continue
		}
		readEnd := 300*ns + hbm.Xfer(1<<20) // the read holds the port until then
		wantX := readEnd + hbm.Xfer(4096) + hbm.Latency
		if wantY := 300*ns + yPath.IdleTime(1<<20); x.at != wantX || y.at != wantY {
			t.Errorf("split: the transfer at %v, the read at %v; want %v (after the read) and %v (idle)", x.at, y.at, wantX, wantY)
		}
	}
}

// A machine of one SIP has no boundary: SplitAtSIP changes nothing.
func TestSplitAtSIPOnOneSIP(t *testing.T) {
	p := testParams()
	p.Sips, p.SplitAtSIP = 1, true
	m := newTestMachine(t, p)
	if m.splitAtSIP {
		t.Error("a one-SIP machine splits transfers")
	}
}

func TestLookahead(t *testing.T) {
	ns := sim.Nanosecond
	cases := []struct {
		name string
		edit func(p *Params)
		want sim.Time
	}{
		{"shipped links: PCIe and the fastest port", func(p *Params) {}, 502 * ns},
		{"one SIP", func(p *Params) { p.Sips = 1 }, 0},
		{"untimed", func(p *Params) { p.Untimed = true }, 0},
		{"credits bound it: a fast PCIe, slow ports", func(p *Params) {
			p.Pcie.Latency, p.PeNoc.Latency = ns, ns
			p.Tcm.Latency, p.Sram.Latency, p.Hbm.Latency = 50*ns, 50*ns, 50*ns
		}, 4 * ns},
		{"no latency anywhere", func(p *Params) {
			p.Pcie.Latency, p.PeNoc.Latency = 0, 0
			p.Tcm.Latency, p.Sram.Latency, p.Hbm.Latency = 0, 0, 0
		}, 0},
	}
	for _, c := range cases {
		p := testParams()
		c.edit(&p)
		if got := p.Lookahead(); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// Rule (engine/sim, partition.go: what the machine needs): the two sides
// of a split transfer only exchange messages that arrive at least the
// lookahead after they are sent (Machine.post panics otherwise), and
// they count the events booking the path whole counts. Every PE of each
// SIP sends to memories of the other on both channels, issued together
// and staggered, under the shipped-like links, links where the credit
// bounds the lookahead, and faults that add latency.
func TestSplitAtSIPMessagesKeepTheLookahead(t *testing.T) {
	ns := sim.Nanosecond
	cases := []struct {
		name string
		edit func(p *Params)
	}{
		{"test links", func(p *Params) {}},
		{"fast PCIe, slow ports", func(p *Params) {
			p.Pcie.Latency, p.PeNoc.Latency = ns, ns
			p.Tcm.Latency, p.Sram.Latency, p.Hbm.Latency = 50*ns, 50*ns, 50*ns
		}},
		{"faults add latency", func(p *Params) {
			p.Faults = []Fault{{Resource: "pcie host->s1", Jitter: 40 * ns}, {Resource: "hbm pe9", ExtraLatency: 7 * ns}}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var events [2]uint64
			for i, split := range []bool{false, true} {
				p := testParams()
				c.edit(&p)
				p.SplitAtSIP = split
				m := newTestMachine(t, p)
				if split && m.look <= 0 {
					t.Fatalf("lookahead %v", m.look)
				}
				var done []*doneRecorder
				for src := range 16 {
					a, b := m.PE(src), m.PE((src+8+src%3)%16)
					for k, dst := range []*Memory{b.HBM, b.TCM, b.SRAM} {
						for _, vc := range []VC{VCCompute, VCComm} {
							d := &doneRecorder{sim: m.Sim}
							done = append(done, d)
							from := []*Memory{a.HBM, a.TCM, a.SRAM}[(k+int(vc))%3]
							path := m.MemToMem(from, dst)
							n := int64(1+k) << (8 + 4*int(vc))
							m.Sim.At(sim.Time(src%4*k)*100*ns, sim.HandlerFunc(func() {
								m.Submit(a, &Transfer{Path: path, N: n, VC: vc, Owner: d}, false)
							}))
						}
					}
				}
				if err := m.Sim.Run(); err != nil {
					t.Fatal(err)
				}
				for k, d := range done {
					if !d.done {
						t.Fatalf("split %v: transfer %d never completed", split, k)
					}
				}
				events[i] = m.Sim.Events()
			}
			if events[0] != events[1] {
				t.Errorf("events: split %d, whole path %d", events[1], events[0])
			}
		})
	}
}

// Machine.post refuses a message within the lookahead: a partitioned
// run could not deliver it in time.
func TestPostChecksTheLookahead(t *testing.T) {
	p := testParams()
	p.SplitAtSIP = true
	m := newTestMachine(t, p)
	defer func() {
		if r := recover(); r == nil {
			t.Error("a message within the lookahead was scheduled")
		}
	}()
	m.post(0, 1, m.look-1, sim.HandlerFunc(func() {}))
}
