package ccl

import (
	"errors"
	"math"
	"strings"
	"testing"

	"kernbench"
	"kernbench/starlark/errkind"
	"kernbench/starlark/report"
)

// faultRun runs target timing-only at 16 ranks (cubes 0 and 1 of the
// default machine) and bytes with the --fault items and returns its time
// and the faults as the report names them.
func faultRun(t *testing.T, target string, world int, bytes int64, faults ...string) (float64, []report.FaultUse) {
	t.Helper()
	rep, err := Run(target, Options{Embedded: kernbench.Files, WorldSize: world, Sizes: []int64{bytes}, TimingOnly: true, Faults: faults})
	if err != nil {
		t.Fatalf("%s with faults %q: %v", target, faults, err)
	}
	return rep.Results[0].SimTimeNs, rep.Results[0].Faults
}

// A link at half bandwidth on a ring's path slows the ring as the α-β
// model says: only the bandwidth term of its bottleneck changes, and a
// ring allreduce moves 2(p-1)/p × n bytes through every link. A tree of 8
// ranks (one cube) never crosses the link: its time does not move, and the
// report says the fault went unused.
func TestFaultSlowsByTheAlphaBetaPrediction(t *testing.T) {
	const n, p = 4 << 20, 16
	const ucieGBps = 64.0 // the shipped ccl.yaml's UCIe bandwidth, the ring's bottleneck
	base, _ := faultRun(t, "ring_allreduce", p, n)
	slow, uses := faultRun(t, "ring_allreduce", p, n, "link=ucie c0->c1,bandwidth_factor=0.5")
	moved := 2 * float64(p-1) / p * n
	want := base + moved/(ucieGBps*0.5) - moved/ucieGBps
	if math.Abs(slow-want)/want > 0.02 {
		t.Errorf("ring at half UCIe bandwidth: %.0f ns, α-β predicts %.0f ns (unfaulted %.0f ns): off by %.1f%%", slow, want, base, 100*math.Abs(slow-want)/want)
	}
	if len(uses) != 1 || !uses[0].Used || uses[0].Bytes == 0 || uses[0].Fault != "bandwidth ×0.5" {
		t.Errorf("the report's faults: %+v, want the link used, with the bytes it carried", uses)
	}
	treeBase, _ := faultRun(t, "tree_allreduce", 8, n)
	tree, treeUses := faultRun(t, "tree_allreduce", 8, n, "link=ucie c0->c1,bandwidth_factor=0.5")
	if tree != treeBase {
		t.Errorf("a tree within one cube: %.0f ns with the fault, %.0f ns without", tree, treeBase)
	}
	if len(treeUses) != 1 || treeUses[0].Used || !strings.Contains(treeUses[0].String(), "not used by this run") {
		t.Errorf("the tree's report: %+v, want the fault named as not used", treeUses)
	}
}

// Jitter is deterministic: the same seed gives the same time, another
// seed another, and both are slower than none.
func TestFaultJitterIsReproducible(t *testing.T) {
	const n = 256 << 10
	base, _ := faultRun(t, "ring_allreduce", 16, n)
	a, _ := faultRun(t, "ring_allreduce", 16, n, "link=ucie c0->c1,jitter_ns=200,seed=1")
	again, _ := faultRun(t, "ring_allreduce", 16, n, "link=ucie c0->c1,jitter_ns=200,seed=1")
	other, _ := faultRun(t, "ring_allreduce", 16, n, "link=ucie c0->c1,jitter_ns=200,seed=2")
	if a != again {
		t.Errorf("seed 1 twice: %.3f ns and %.3f ns", a, again)
	}
	if a == other {
		t.Errorf("seeds 1 and 2 gave the same time %.3f ns", a)
	}
	if a <= base || other <= base {
		t.Errorf("jitter did not slow the ring: %.0f and %.0f ns, %.0f ns without", a, other, base)
	}
}

// A fault naming a resource the machine does not have, or a second fault
// on one resource, is a configuration error at the entry.
func TestFaultNamesAreChecked(t *testing.T) {
	for _, tc := range []struct {
		faults []string
		want   string
	}{
		{[]string{"link=ucie c0->c9,bandwidth_factor=0.5"}, `--fault link=ucie c0->c9,bandwidth_factor=0.5: system.faults[0]: no resource "ucie c0->c9" on this machine`},
		{[]string{"pe=3,slowdown=2", "link=math pe3,latency_ns=5"}, "--fault link=math pe3,latency_ns=5: system.faults[1]: math pe3 has a fault already (--fault pe=3,slowdown=2, system.faults[0])"},
		// Every bad entry is named, not only the first; a PE entry once.
		{[]string{"link=ucie c0->c9,bandwidth_factor=0.5", "pe=99,slowdown=2", "link=ucie c0->c1,latency_ns=5", "link=ucie c0->c1,latency_ns=6"},
			"--fault link=ucie c0->c9,bandwidth_factor=0.5: system.faults[0]: no resource \"ucie c0->c9\" on this machine (4 cubes, 4 per SIP: a UCIe link joins two cubes of one SIP); " +
				"resources are named as `kernbench check --show-map` prints them: pe_noc peP->cC, pe_noc cC->peP, ucie cA->cB (cubes of one SIP), pcie sS->host, pcie host->sS, math peP, tcm peP, hbm peP, sram cC\n" +
				"--fault pe=99,slowdown=2: system.faults[1]: pe 99: the machine has 32 PEs (0 to 31)\n" +
				"--fault link=ucie c0->c1,latency_ns=6: system.faults[3]: ucie c0->c1 has a fault already (--fault link=ucie c0->c1,latency_ns=5, system.faults[2])"},
	} {
		_, err := Run("ring_allreduce", Options{Embedded: kernbench.Files, WorldSize: 4, Sizes: []int64{4096}, Faults: tc.faults})
		var f *report.Failure
		if !errors.As(err, &f) || f.ErrorKind() != errkind.Config || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("faults %q: got %v, want a ConfigError containing %q", tc.faults, err, tc.want)
		}
	}
}

// A link that stops mid-run ends the run as the fault's, kind
// FaultStopped: the message names the link, the transfers it held and
// the rank that sent them, and the blocked processes follow; not a
// deadlock of the algorithm nor a slow run.
func TestFaultStopNamesWhatWaited(t *testing.T) {
	_, err := Run("ring_allreduce", Options{Embedded: kernbench.Files, WorldSize: 16, Sizes: []int64{1 << 20}, TimingOnly: true,
		Faults: []string{"link=ucie c0->c1,stop_at_ns=5000"}})
	var f *report.Failure
	if !errors.As(err, &f) || f.ErrorKind() != errkind.FaultStopped {
		t.Fatalf("got %v, want a FaultStopped failure", err)
	}
	for _, want := range []string{"a fault stopped the run: ucie c0->c1 (stops at t=5000ns) held", "transfer(s) from rank 7;"} {
		if !strings.Contains(f.Msg, want) {
			t.Errorf("message %q lacks %q", f.Msg, want)
		}
	}
	if len(f.Blocked) == 0 {
		t.Error("the failure lists no blocked process")
	}
	if f.Cycle != nil || f.Hint != "" || strings.Contains(f.Detail, "wait-for graph") {
		t.Errorf("a stop reported as a deadlock (cycle %v, hint %q, detail %q): the waits go through the stopped link", f.Cycle, f.Hint, f.Detail)
	}
}
