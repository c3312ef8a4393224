package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// system.faults: each entry a link by name or a PE by index, with what
// deviates; positions are kept for messages about the entry.
func TestFaults(t *testing.T) {
	c, err := Load("ccl.yaml", []byte(with("system:", "  faults:",
		"    - link: ucie c0->c1",
		"      bandwidth_factor: 0.5",
		"      latency_ns: 20",
		"    - pe: 3",
		"      slowdown: 2",
		"      stop_at_ns: 5000",
		"    - link: pcie s0->host",
		"      jitter_ns: 40",
		"      seed: 7",
	)), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []Fault{
		{Link: "ucie c0->c1", PE: -1, BandwidthFactor: 0.5, LatencyNs: 20, StopAtNs: -1, Pos: "ccl.yaml:8"},
		{PE: 3, Slowdown: 2, StopAtNs: 5000, Pos: "ccl.yaml:11"},
		{Link: "pcie s0->host", PE: -1, JitterNs: 40, Seed: 7, StopAtNs: -1, Pos: "ccl.yaml:14"},
	}
	if diff := cmp.Diff(want, c.System.Faults); diff != "" {
		t.Errorf("faults (-want +got):\n%s", diff)
	}
	if c2 := c.Clone(); &c2.System.Faults[0] == &c.System.Faults[0] {
		t.Error("Clone shares the faults")
	}
}

func TestFaultErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		entry []string
		want  string
	}{
		{"not a list", []string{"  faults: {link: x}"}, "ccl.yaml:7: system.faults: got mapping, want a list of faults"},
		{"neither link nor pe", []string{"  faults:", "    - latency_ns: 3"}, "ccl.yaml:8: system.faults[0]: give exactly one of link: NAME and pe: INDEX"},
		{"both", []string{"  faults:", "    - {link: ucie c0->c1, pe: 1, latency_ns: 3}"}, "give exactly one of link: NAME and pe: INDEX"},
		{"slowdown on a link", []string{"  faults:", "    - {link: ucie c0->c1, slowdown: 2}"}, "system.faults[0]: slowdown is for a PE (pe: INDEX); a link takes bandwidth_factor, latency_ns, jitter_ns (with seed) and stop_at_ns"},
		{"bandwidth on a PE", []string{"  faults:", "    - {pe: 1, bandwidth_factor: 0.5}"}, "system.faults[0]: bandwidth_factor, latency_ns, jitter_ns and seed are for a link (link: NAME); a PE takes slowdown and stop_at_ns"},
		// A seed on a PE is a link's key on a PE, not a seed missing its
		// jitter (a PE has no jitter to give it).
		{"seed on a PE", []string{"  faults:", "    - {pe: 1, slowdown: 2, seed: 3}"}, "system.faults[0]: bandwidth_factor, latency_ns, jitter_ns and seed are for a link (link: NAME)"},
		{"seed alone", []string{"  faults:", "    - {link: ucie c0->c1, seed: 3}"}, "seed without jitter_ns changes nothing"},
		{"no change", []string{"  faults:", "    - {link: ucie c0->c1}"}, "system.faults[0]: the fault changes nothing"},
		{"factor 1", []string{"  faults:", "    - {link: ucie c0->c1, bandwidth_factor: 1}"}, "system.faults[0]: the fault changes nothing"},
		{"slowdown 1", []string{"  faults:", "    - {pe: 3, slowdown: 1}"}, "system.faults[0]: the fault changes nothing"},
		{"zero factor", []string{"  faults:", "    - {link: ucie c0->c1, bandwidth_factor: 0}"}, "system.faults[0].bandwidth_factor: got 0, want > 0 and <= 1000"},
		{"unknown key", []string{"  faults:", "    - {link: ucie c0->c1, bandwidth: 0.5}"}, `system.faults[0]: unknown key "bandwidth" (allowed: bandwidth_factor, jitter_ns, latency_ns, link, pe, seed, slowdown, stop_at_ns)`},
		{"negative pe", []string{"  faults:", "    - {pe: -1, slowdown: 2}"}, "system.faults[0].pe: got -1, want >= 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load("ccl.yaml", []byte(with(append([]string{"system:"}, tc.entry...)...)), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// --fault items are system.faults entries as key=value pairs: the same
// keys and checks, each mistake at the item.
func TestParseFaults(t *testing.T) {
	got, err := ParseFaults([]string{"link=ucie c0->c1,bandwidth_factor=0.5,latency_ns=20", "pe=3,slowdown=2", "link=pcie s0->host,jitter_ns=40,seed=7", "link=ucie c1->c0,stop_at_ns=5000"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Fault{
		{Link: "ucie c0->c1", PE: -1, BandwidthFactor: 0.5, LatencyNs: 20, StopAtNs: -1, Pos: "--fault link=ucie c0->c1,bandwidth_factor=0.5,latency_ns=20"},
		{PE: 3, Slowdown: 2, StopAtNs: -1, Pos: "--fault pe=3,slowdown=2"},
		{Link: "pcie s0->host", PE: -1, JitterNs: 40, Seed: 7, StopAtNs: -1, Pos: "--fault link=pcie s0->host,jitter_ns=40,seed=7"},
		{Link: "ucie c1->c0", PE: -1, StopAtNs: 5000, Pos: "--fault link=ucie c1->c0,stop_at_ns=5000"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("faults (-want +got):\n%s", diff)
	}
	for _, tc := range []struct{ item, want string }{
		{"link=ucie c0->c1", "--fault link=ucie c0->c1: fault: the fault changes nothing"},
		{"link=ucie c0->c1,bandwidth_factor=half", "--fault link=ucie c0->c1,bandwidth_factor=half: fault.bandwidth_factor: got \"half\", want number"},
		{"pe=2,slowdown", `--fault pe=2,slowdown: "slowdown" is not key=value (keys: bandwidth_factor, jitter_ns, latency_ns, link, pe, seed, slowdown, stop_at_ns)`},
		{"pe=2,speed=3", `--fault pe=2,speed=3: fault: unknown key "speed"`},
	} {
		if _, err := ParseFaults([]string{tc.item}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseFaults(%q) = %v, want an error containing %q", tc.item, err, tc.want)
		}
	}
}
