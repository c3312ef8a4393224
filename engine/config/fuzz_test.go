package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func FuzzLoad(f *testing.F) {
	for _, s := range loadSeeds() {
		f.Add([]byte(s[0]), s[1])
	}
	f.Fuzz(func(t *testing.T, data []byte, set string) {
		var sets []string // several --set items, separated by NUL
		if set != "" {
			sets = strings.Split(set, "\x00")
		}
		c, err := Load("ccl.yaml", data, sets)
		checkLoaded(t, c, err)
	})
}

// loadSeeds are the seeds of FuzzLoad and FuzzLoadOverlay: the default
// without its comments (small seeds minimize quickly) and a few files
// with --set items (separated by NUL).
func loadSeeds() [][2]string {
	var compact []string
	for _, l := range strings.Split(string(DefaultYAML()), "\n") {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "#") {
			compact = append(compact, l)
		}
	}
	return [][2]string{
		{lines(compact...), ""},
		{with(), "defaults.n_slots=4"},
		{with("    params: {x: &a [1, 2.5, s], y: *a}"), "algorithms.a.params.z={k: [1]}"},
		{with("system: {placement: [1, 0], memory: {tcm: {capacity: 1.5K}}}"), "system.links.ucie.bandwidth_gbps=32.5"},
		{with("    vc_weights: {comm: 2}"), "defaults.vc_weights={compute: 1, comm: 3}"},
		{"defaults: {algorithm: [x\n", "="},
		{"", "algorithms.a.module=a.star"},
	}
}

// FuzzLoadOverlay: a local ccl.yaml laid over the embedded default (what
// kernbench reads) gives what FuzzLoad checks: a valid configuration or
// every error with its position.
func FuzzLoadOverlay(f *testing.F) {
	for _, s := range loadSeeds() {
		f.Add([]byte(s[0]), s[1])
	}
	f.Add([]byte("defaults: {world_size: 4}\nalgorithms:\n  ring_allreduce: {buffer_kind: hbm}\n  b: {module: b.star}\n"), "")
	f.Add([]byte("defaults: &d {n_slots: 4}\nalgorithms: {ring_allreduce: *d}\n"), "defaults.algorithm=ring_allreduce")
	f.Add([]byte("system:\n  sips: 2\n"), "system.faults=[{pe: 1, slowdown: 2}]")
	f.Fuzz(func(t *testing.T, data []byte, set string) {
		var sets []string
		if set != "" {
			sets = strings.Split(set, "\x00")
		}
		c, err := LoadOverlay("local.yaml", data, sets)
		checkLoaded(t, c, err)
	})
}

// checkLoaded checks what Load and LoadOverlay promise: a configuration
// that keeps checkInvariants, or an *Error (Errors) each with its
// position and message, up to maxErrors and the line saying decoding
// stopped.
func checkLoaded(t *testing.T, c *Config, err error) {
	t.Helper()
	if err != nil {
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("error %v is %T, want *Error", err, err)
		}
		if c != nil {
			t.Fatal("Load returned both a config and an error")
		}
		var es Errors
		if errors.As(err, &es) {
			if len(es) < 2 || len(es) > maxErrors+1 {
				t.Fatalf("%d errors in an Errors: %v", len(es), err)
			}
			for _, e := range es {
				if e.Pos == "" || e.Msg == "" {
					t.Fatalf("error without position or message: %q", e)
				}
			}
		} else if e.Pos == "" || e.Msg == "" {
			t.Fatalf("error without position or message: %q", e)
		}
		return
	}
	checkInvariants(t, c)
}

// checkInvariants checks what every successfully loaded config promises.
func checkInvariants(t *testing.T, c *Config) {
	t.Helper()
	if !slices.IsSorted(c.AlgorithmNames) || len(c.AlgorithmNames) != len(c.Algorithms) || len(c.Algorithms) == 0 {
		t.Fatalf("bad algorithm names %q for %d algorithms", c.AlgorithmNames, len(c.Algorithms))
	}
	for _, name := range c.AlgorithmNames {
		a := c.Algorithms[name]
		if a == nil || a.Name != name || !isIdent(name) || !strings.HasSuffix(a.Module, ".star") {
			t.Fatalf("bad algorithm %q: %+v", name, a)
		}
		if !slices.Contains(topologies, a.Topology) || a.Collective != "" && !slices.Contains(collectives, a.Collective) {
			t.Fatalf("algorithm %q: bad topology %q or collective %q", name, a.Topology, a.Collective)
		}
		s, err := c.Settings(name)
		if err != nil {
			t.Fatal(err)
		}
		checkSettings(t, s)
	}
	if _, ok := c.Algorithms[c.Defaults.Algorithm]; !ok {
		t.Fatalf("defaults.algorithm %q is not an algorithm", c.Defaults.Algorithm)
	}
	checkSettings(t, c.Defaults)
	s := c.System
	if s.Sips < 1 || s.CubesPerSip < 1 || s.PesPerCube < 1 {
		t.Fatalf("bad system %+v", s)
	}
	seen := map[int]bool{}
	for _, pe := range s.Placement {
		if pe < 0 || pe >= s.NumPEs() || seen[pe] {
			t.Fatalf("bad placement %v", s.Placement)
		}
		seen[pe] = true
	}
	for _, l := range []Link{s.Links.PeNoc, s.Links.Ucie, s.Links.Pcie} {
		if l.BandwidthGBps <= 0 || l.LatencyNs < 0 || decimals(l.BandwidthGBps) > 3 || decimals(l.LatencyNs) > 3 {
			t.Fatalf("bad link %+v", l)
		}
	}
	for _, m := range []Memory{s.Memory.Tcm, s.Memory.Sram, s.Memory.Hbm} {
		if m.Capacity < 1 || m.BandwidthGBps <= 0 || m.LatencyNs < 0 {
			t.Fatalf("bad memory %+v", m)
		}
	}
}

func checkSettings(t *testing.T, s Settings) {
	t.Helper()
	ok := s.WorldSize >= 1 && slices.Contains(bufferKinds, s.BufferKind) &&
		slices.Contains(backpressures, s.Backpressure) && s.PollIntervalNs >= 1 &&
		s.NSlots >= 1 && s.SlotSize >= 1 && s.VCChunkSize >= 1 &&
		s.VCWeights.Compute >= 1 && s.VCWeights.Comm >= 1 && s.IpcqCreditSizeBytes >= 1 &&
		s.IpcqOverheadNs >= 0 && s.DeadlockTimeoutNs >= 1 && s.MaxSimTimeNs >= 1 &&
		(s.MeshShape == nil || len(s.MeshShape) == 2 && s.MeshShape[0] >= 1 && s.MeshShape[1] >= 1)
	if !ok {
		t.Fatalf("bad settings %+v", s)
	}
}
