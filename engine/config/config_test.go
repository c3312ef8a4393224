package config

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// cmpConfig compares configs on their exported fields; per-algorithm
// overrides are checked through Config.Settings.
// cmpConfig compares configurations; DefaultsGiven has its own test
// (TestDefaultsGiven).
var cmpConfig = []cmp.Option{cmpopts.IgnoreUnexported(Algorithm{}), cmpopts.IgnoreFields(Config{}, "DefaultsGiven"), cmpopts.IgnoreFields(Algorithm{}, "ParamsPos", "ModuleSet")}

// Where each param and a --set module came from (TestLoad leaves these
// out): a message about one names the --set item or its own line, not
// the entry's line in another file.
func TestParamsPosAndModuleSet(t *testing.T) {
	in := lines(
		"defaults: {algorithm: a}", // 1
		"algorithms:",              // 2
		"  a:",                     // 3
		"    module: a.star",       // 4
		"    params:",              // 5
		"      x: 1",               // 6
		"      y: 2",               // 7
		"  b: {module: b.star}",    // 8
	)
	got, err := Load("ccl.yaml", []byte(in), []string{"algorithms.a.params.y=3", "algorithms.a.params.z=4", "algorithms.b.module=c.star"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"x": "ccl.yaml:6", "y": "--set algorithms.a.params.y=3", "z": "--set algorithms.a.params.z=4"}
	if diff := cmp.Diff(want, got.Algorithms["a"].ParamsPos); diff != "" {
		t.Errorf("ParamsPos (-want +got):\n%s", diff)
	}
	if a, b := got.Algorithms["a"].ModuleSet, got.Algorithms["b"].ModuleSet; a != "" || b != "--set algorithms.b.module=c.star" {
		t.Errorf("ModuleSet = %q, %q; want \"\", the --set item", a, b)
	}
}

// An entry's own defaults keys (OverridePos) say where each was given: its
// line in the file, or the --set item that gave or replaced it.
func TestOverridePos(t *testing.T) {
	in := lines(
		"defaults: {algorithm: a}", // 1
		"algorithms:",              // 2
		"  a:",                     // 3
		"    module: a.star",       // 4
		"    mesh_shape: [3, 2]",   // 5
		"    n_slots: 4",           // 6
	)
	got, err := Load("ccl.yaml", []byte(in), []string{"algorithms.a.n_slots=16", "algorithms.a.channels=2"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"mesh_shape": "ccl.yaml:5", "n_slots": "--set algorithms.a.n_slots=16", "channels": "--set algorithms.a.channels=2"}
	if diff := cmp.Diff(want, got.Algorithms["a"].OverridePos); diff != "" {
		t.Errorf("OverridePos (-want +got):\n%s", diff)
	}
}

// lines joins its arguments as the lines of a file, so tests can count them.
func lines(ls ...string) string { return strings.Join(ls, "\n") + "\n" }

// minimal is the smallest valid file; cases that append to it start at
// line 6.
var minimal = []string{
	"defaults:",          // 1
	"  algorithm: a",     // 2
	"algorithms:",        // 3
	"  a:",               // 4
	"    module: a.star", // 5
}

func with(extra ...string) string { return lines(append(append([]string{}, minimal...), extra...)...) }

// expect is the config a file decodes to: Default()'s defaults and system,
// the given algorithms, then edit.
func expect(edit func(c *Config), algs ...*Algorithm) *Config {
	c := Default()
	c.Defaults.Algorithm = "a"
	c.Algorithms = map[string]*Algorithm{}
	c.AlgorithmNames = nil
	for _, a := range algs {
		c.Algorithms[a.Name] = a
		c.AlgorithmNames = append(c.AlgorithmNames, a.Name)
	}
	if edit != nil {
		edit(c)
	}
	return c
}

func alg(name, module string, line int) *Algorithm {
	return &Algorithm{Name: name, Module: module, Topology: "ring_1d", Line: line}
}

func TestLoad(t *testing.T) {
	tests := []struct {
		name string
		in   string
		sets []string
		want *Config
	}{
		{
			name: "minimal",
			in:   with(),
			want: expect(nil, alg("a", "a.star", 4)),
		},
		{
			name: "sections in any order, system null, params null",
			in: lines(
				"algorithms:",
				"  b: {module: x/b.star, params: }",
				"  a: {module: a.star, topology: mesh_2d, collective: alltoall}",
				"system:",
				"defaults: {algorithm: a, world_size: 16, mesh_shape: [4, 4]}",
			),
			want: expect(func(c *Config) {
				c.Defaults.WorldSize = 16
				c.Defaults.MeshShape = []int{4, 4}
				c.Algorithms["a"].Topology, c.Algorithms["a"].TopologyGiven = "mesh_2d", true
				c.Algorithms["a"].Collective = "alltoall"
			}, alg("a", "a.star", 3), alg("b", "x/b.star", 2)),
		},
		{
			name: "every defaults key",
			in: lines(
				"defaults:",
				"  algorithm: a",
				"  world_size: 4",
				"  buffer_kind: hbm",
				"  backpressure: poll",
				"  poll_interval_ns: 0x20",
				"  n_slots: 2",
				"  slot_size: 64KiB",
				"  vc_chunk_size: 1.5K",
				"  vc_weights: {comm: 3}",
				"  ipcq_credit_size_bytes: 8",
				"  ipcq_overhead_ns: 0",
				"  deadlock_timeout_ns: 1000",
				"  max_sim_time_ns: 2000",
				"  mesh_shape: [1, 4]",
				"  channels: 2",
				"algorithms:",
				"  a: {module: a.star}",
			),
			want: expect(func(c *Config) {
				c.Defaults = Settings{
					Algorithm: "a", WorldSize: 4, BufferKind: "hbm", Backpressure: "poll",
					PollIntervalNs: 32, NSlots: 2, SlotSize: 64 << 10, VCChunkSize: 1536,
					VCWeights:           VCWeights{Compute: c.Defaults.VCWeights.Compute, Comm: 3},
					IpcqCreditSizeBytes: 8, IpcqOverheadNs: 0, DeadlockTimeoutNs: 1000, MaxSimTimeNs: 2000,
					MeshShape: []int{1, 4}, Channels: 2,
				}
			}, alg("a", "a.star", 18)),
		},
		{
			name: "system merges with the defaults key by key",
			in: with(
				"system:",
				"  sips: 2",
				"  links:",
				"    ucie: {bandwidth_gbps: 12.345}",
				"    pcie: {latency_ns: 0.001}",
				"  memory:",
				"    sram: {capacity: 2MiB}",
				"    hbm: {capacity: 4096, bandwidth_gbps: 1e3, latency_ns: 99.5}",
				"  math: {bytes_per_ns: 0.5}",
				"  placement: [63, 0, 8]",
			),
			want: expect(func(c *Config) {
				s := &c.System
				s.Sips = 2
				s.Links.Ucie.BandwidthGBps = 12.345
				s.Links.Pcie.LatencyNs = 0.001
				s.Memory.Sram.Capacity = 2 << 20
				s.Memory.Hbm = Memory{Capacity: 4096, BandwidthGBps: 1000, LatencyNs: 99.5}
				s.Math.BytesPerNs = 0.5
				s.Placement = []int{63, 0, 8}
			}, alg("a", "a.star", 4)),
		},
		{
			name: "params of every type, with anchors",
			in: with(
				"    params:",
				"      chunks: 4",
				"      scale: 0.5",
				"      name: &n ring",
				"      fast: true",
				"      sizes: &s [1, 2.5, x]",
				"      nested: {a: *n, b: *s, 'c d': {e: -1}}",
				"      day: 2024-01-02",
			),
			want: expect(nil, &Algorithm{
				Name: "a", Module: "a.star", Topology: "ring_1d", Line: 4,
				Params: map[string]any{
					"chunks": int64(4), "scale": 0.5, "name": "ring", "fast": true,
					"sizes":  []any{int64(1), 2.5, "x"},
					"nested": map[string]any{"a": "ring", "b": []any{int64(1), 2.5, "x"}, "c d": map[string]any{"e": int64(-1)}},
					"day":    "2024-01-02",
				},
			}),
		},
		{
			name: "per-algorithm overrides",
			in: with(
				"    buffer_kind: sram",
				"    vc_weights: {compute: 2}",
				"    n_slots: 2",
			),
			want: expect(nil, &Algorithm{
				Name: "a", Module: "a.star", Topology: "ring_1d", Line: 4,
				OverrideKeys: []string{"buffer_kind", "n_slots", "vc_weights"},
				OverridePos:  map[string]string{"buffer_kind": "ccl.yaml:6", "vc_weights": "ccl.yaml:7", "n_slots": "ccl.yaml:8"},
			}),
		},
		{
			name: "empty collective",
			in:   with(`    collective: ""`),
			want: expect(nil, alg("a", "a.star", 4)),
		},
		{
			name: "sets",
			in:   with(),
			sets: []string{
				"defaults.n_slots=4",
				"system.links.ucie.bandwidth_gbps=32",
				"defaults.vc_weights={compute: 1, comm: 3}",
				"algorithms.a.params.chunks=4",
				"algorithms.a.params.tile.shape=[2, 2]",
				"algorithms.b.module=b.star",
				"defaults.mesh_shape=[2, 4]",
				"defaults.mesh_shape=null",
				"system.placement=[3, 2]",
				"defaults.slot_size=8K",
				"defaults.slot_size=16K",
			},
			want: expect(func(c *Config) {
				c.Defaults.NSlots = 4
				c.Defaults.SlotSize = 16 << 10
				c.Defaults.VCWeights = VCWeights{Compute: 1, Comm: 3}
				c.System.Links.Ucie.BandwidthGBps = 32
				c.System.Placement = []int{3, 2}
				c.Algorithms["a"].Params = map[string]any{
					"chunks": int64(4),
					"tile":   map[string]any{"shape": []any{int64(2), int64(2)}},
				}
			}, alg("a", "a.star", 4), alg("b", "b.star", 0)),
		},
		{
			name: "set creates sections of an empty file",
			in:   "",
			sets: []string{"defaults.algorithm=a", "algorithms.a={module: a.star}"},
			want: expect(nil, alg("a", "a.star", 0)),
		},
		{
			name: "set through an alias leaves the anchor alone",
			in: lines(
				"defaults: {algorithm: a}",
				"algorithms:",
				"  a: {module: a.star, params: &p {x: {y: 1}}}",
				"  b: {module: b.star, params: *p}",
			),
			sets: []string{"algorithms.b.params.x.y=2"},
			want: expect(func(c *Config) {
				c.Algorithms["a"].Params = map[string]any{"x": map[string]any{"y": int64(1)}}
				c.Algorithms["b"].Params = map[string]any{"x": map[string]any{"y": int64(2)}}
			}, alg("a", "a.star", 3), alg("b", "b.star", 4)),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Load("ccl.yaml", []byte(tt.in), tt.sets)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if diff := cmp.Diff(tt.want, got, cmpConfig...); diff != "" {
				t.Errorf("Load (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	const defaultsKeys = "algorithm, backpressure, buffer_kind, channels, deadlock_timeout_ns, ipcq_credit_size_bytes, ipcq_overhead_ns, max_sim_time_ns, mesh_shape, n_slots, poll_interval_ns, slot_size, vc_chunk_size, vc_weights, world_size"
	const entryKeys = "backpressure, buffer_kind, channels, collective, deadlock_timeout_ns, ipcq_credit_size_bytes, ipcq_overhead_ns, max_sim_time_ns, mesh_shape, module, n_slots, params, poll_interval_ns, slot_size, topology, vc_chunk_size, vc_weights, world_size"
	tests := []struct {
		name string
		in   string
		want string
	}{
		// Unknown keys, at every level.
		{"unknown top-level key", with("sytem: {}"),
			`ccl.yaml:6: top level: unknown key "sytem" (allowed: algorithms, defaults, select, system); did you mean "system"?`},
		{"defaults key at the top", with("world_size: 4"),
			`ccl.yaml:6: top level: unknown key "world_size" (allowed: algorithms, defaults, select, system); did you mean defaults.world_size (under defaults:)?`},
		{"unknown defaults key", lines("defaults:", "  algorithm: a", "  n_slot: 4", "algorithms: {a: {module: a.star}}"),
			`ccl.yaml:3: defaults: unknown key "n_slot" (allowed: ` + defaultsKeys + `); did you mean "n_slots"?`},
		{"unknown algorithm key", with("    modul: a.star"),
			`ccl.yaml:6: algorithms.a: unknown key "modul" (allowed: ` + entryKeys + `); did you mean "module"?`},
		{"algorithm key not allowed per algorithm", with("    algorithm: a"),
			`ccl.yaml:6: algorithms.a: unknown key "algorithm" (allowed: ` + entryKeys + `)`},
		{"unknown vc_weights key", lines("defaults:", "  algorithm: a", "  vc_weights: {compute: 1, com: 2}", "algorithms: {a: {module: a.star}}"),
			`ccl.yaml:3: defaults.vc_weights: unknown key "com" (allowed: comm, compute); did you mean "comm"?`},
		{"unknown system key", with("system:", "  sip: 2"),
			`ccl.yaml:7: system: unknown key "sip" (allowed: cubes_per_sip, faults, links, math, memory, pes_per_cube, placement, sips); did you mean "sips"?`},
		{"unknown link", with("system:", "  links:", "    nvlink: {}"),
			`ccl.yaml:8: system.links: unknown key "nvlink" (allowed: pcie, pe_noc, ucie)`},
		{"unknown link key", with("system:", "  links:", "    ucie: {bandwidth: 1}"),
			`ccl.yaml:8: system.links.ucie: unknown key "bandwidth" (allowed: bandwidth_gbps, latency_ns); did you mean "bandwidth_gbps"?`},
		{"unknown memory", with("system:", "  memory: {dram: {}}"),
			`ccl.yaml:7: system.memory: unknown key "dram" (allowed: hbm, sram, tcm); did you mean "hbm"?`},
		{"unknown memory key", with("system:", "  memory:", "    tcm:", "      size: 1MiB"),
			`ccl.yaml:9: system.memory.tcm: unknown key "size" (allowed: bandwidth_gbps, capacity, latency_ns)`},
		{"unknown math key", with("system: {math: {flops: 1}}"),
			`ccl.yaml:6: system.math: unknown key "flops" (allowed: bytes_per_ns, latency_ns)`},

		// Wrong types.
		{"string for int", lines("defaults:", "  algorithm: a", "  n_slots: four", "algorithms: {a: {module: a.star}}"),
			`ccl.yaml:3: defaults.n_slots: got "four", want int`},
		{"quoted int", lines("defaults:", "  algorithm: a", `  n_slots: "4"`, "algorithms: {a: {module: a.star}}"),
			`ccl.yaml:3: defaults.n_slots: got "4", want int`},
		{"float for int", lines("defaults:", "  algorithm: a", "  world_size: 8.0", "algorithms: {a: {module: a.star}}"),
			`ccl.yaml:3: defaults.world_size: got 8.0, want int`},
		{"sequence for int", lines("defaults:", "  algorithm: a", "  world_size: [8]", "algorithms: {a: {module: a.star}}"),
			`ccl.yaml:3: defaults.world_size: got sequence, want int`},
		{"null for int", lines("defaults:", "  algorithm: a", "  world_size:", "algorithms: {a: {module: a.star}}"),
			`ccl.yaml:3: defaults.world_size: got null, want int`},
		{"int too large", lines("defaults:", "  algorithm: a", "  max_sim_time_ns: 9223372036854775808", "algorithms: {a: {module: a.star}}"),
			`ccl.yaml:3: defaults.max_sim_time_ns: got 9223372036854775808, want <= 9223372036854775807`},
		{"scalar for section", lines("defaults: 3", "algorithms: {a: {module: a.star}}"),
			`ccl.yaml:1: defaults: got 3, want mapping`},
		{"sequence for algorithms", lines("defaults: {algorithm: a}", "algorithms: [a]"),
			`ccl.yaml:2: algorithms: got sequence, want mapping`},
		{"sequence at top level", "- a\n", `ccl.yaml:1: top level: got sequence, want mapping`},
		{"string for bandwidth", with("system: {links: {ucie: {bandwidth_gbps: fast}}}"),
			`ccl.yaml:6: system.links.ucie.bandwidth_gbps: got "fast", want number`},
		{"bool for latency", with("system: {math: {latency_ns: true}}"),
			`ccl.yaml:6: system.math.latency_ns: got true, want number`},
		{"infinite latency", with("system: {math: {latency_ns: .inf}}"),
			`ccl.yaml:6: system.math.latency_ns: got .inf, want a finite number`},
		{"float for size", with("system: {memory: {tcm: {capacity: 1.5}}}"),
			`ccl.yaml:6: system.memory.tcm.capacity: got 1.5, want a size (like 4096, 4K or 1MiB)`},
		{"int for module", with("  b: {module: 3}"),
			`ccl.yaml:6: algorithms.b.module: got 3, want string`},
		{"module not a .star file", with("  b: {module: b.py}"),
			`ccl.yaml:6: algorithms.b.module: got "b.py", want the path of a .star file`},
		{"sequence for params", with("    params: [1]"),
			`ccl.yaml:6: algorithms.a.params: got sequence, want mapping`},
		{"null param", with("    params: {x: 1, y: ~}"),
			`ccl.yaml:6: algorithms.a.params.y: got null, want int, float, string, bool, sequence or mapping`},
		{"param key not an identifier", with("    params: {chunk-size: 1}"),
			`ccl.yaml:6: algorithms.a.params: key "chunk-size" is not an identifier (params are keyword arguments of kernel())`},
		{"non-scalar key", with("    params: {[a]: 1}"),
			`ccl.yaml:6: algorithms.a.params: got sequence as a key, want a string`},
		{"mesh_shape of one", lines("defaults:", "  algorithm: a", "  mesh_shape: [4]", "algorithms: {a: {module: a.star}}"),
			`ccl.yaml:3: defaults.mesh_shape: got 1 entries, want [rows, cols]`},
		{"mesh_shape entry", lines("defaults:", "  algorithm: a", "  mesh_shape:", "    - 2", "    - two", "algorithms: {a: {module: a.star}}"),
			`ccl.yaml:5: defaults.mesh_shape[1]: got "two", want int`},
		{"placement not a list", with("system: {placement: 3}"),
			`ccl.yaml:6: system.placement: got 3, want sequence of int`},

		// Bad enum values.
		{"bad buffer_kind", lines("defaults:", "  algorithm: a", "  world_size: 8", "  buffer_kind: dram", "algorithms: {a: {module: a.star}}"),
			`ccl.yaml:4: defaults.buffer_kind: got "dram", want one of tcm, hbm, sram; did you mean "hbm"?`},
		{"int buffer_kind", lines("defaults:", "  algorithm: a", "  buffer_kind: 3", "algorithms: {a: {module: a.star}}"),
			`ccl.yaml:3: defaults.buffer_kind: got 3, want one of tcm, hbm, sram`},
		{"bad backpressure", lines("defaults:", "  algorithm: a", "  backpressure: spin", "algorithms: {a: {module: a.star}}"),
			`ccl.yaml:3: defaults.backpressure: got "spin", want one of sleep, poll`},
		{"bad per-algorithm buffer_kind", with("    buffer_kind: HBM"),
			`ccl.yaml:6: algorithms.a.buffer_kind: got "HBM", want one of tcm, hbm, sram; did you mean "hbm"?`},
		{"bad topology", with("    topology: torus"),
			`ccl.yaml:6: algorithms.a.topology: got "torus", want one of ring_1d, ring_1d_unidir, mesh_2d, tree_binary, full_mesh, none, custom; did you mean "mesh_2d"?`},
		{"bad collective", with("    collective: all_reduce"),
			`ccl.yaml:6: algorithms.a.collective: got "all_reduce", want one of allreduce, reduce_scatter, allgather, broadcast, reduce, alltoall; did you mean "allreduce"?`},

		// Out of range.
		{"zero n_slots", lines("defaults:", "  algorithm: a", "  n_slots: 0", "algorithms: {a: {module: a.star}}"),
			`ccl.yaml:3: defaults.n_slots: got 0, want >= 1`},
		{"negative world_size", lines("defaults:", "  algorithm: a", "  world_size: -2", "algorithms: {a: {module: a.star}}"),
			`ccl.yaml:3: defaults.world_size: got -2, want >= 1`},
		{"zero poll interval", lines("defaults:", "  algorithm: a", "  poll_interval_ns: 0", "algorithms: {a: {module: a.star}}"),
			`ccl.yaml:3: defaults.poll_interval_ns: got 0, want >= 1`},
		{"negative overhead", lines("defaults:", "  algorithm: a", "  ipcq_overhead_ns: -1", "algorithms: {a: {module: a.star}}"),
			`ccl.yaml:3: defaults.ipcq_overhead_ns: got -1, want >= 0`},
		{"zero vc weight", lines("defaults:", "  algorithm: a", "  vc_weights: {compute: 0, comm: 1}", "algorithms: {a: {module: a.star}}"),
			`ccl.yaml:3: defaults.vc_weights.compute: got 0, want >= 1`},
		{"zero slot size", lines("defaults:", "  algorithm: a", "  slot_size: 0K", "algorithms: {a: {module: a.star}}"),
			`ccl.yaml:3: defaults.slot_size: got "0K", want >= 1`},
		{"zero mesh rows", lines("defaults:", "  algorithm: a", "  mesh_shape: [0, 4]", "algorithms: {a: {module: a.star}}"),
			`ccl.yaml:3: defaults.mesh_shape[0]: got 0, want >= 1`},
		{"per-algorithm world_size", with("    world_size: 0"),
			`ccl.yaml:6: algorithms.a.world_size: got 0, want >= 1`},
		{"zero sips", with("system: {sips: 0}"),
			`ccl.yaml:6: system.sips: got 0, want >= 1`},
		{"too many PEs", with("system: {sips: 65536, cubes_per_sip: 65536}"),
			`ccl.yaml:6: system: sips × cubes_per_sip × pes_per_cube is more than 2147483647 PEs`},
		{"zero bandwidth", with("system: {links: {pcie: {bandwidth_gbps: 0}}}"),
			`ccl.yaml:6: system.links.pcie.bandwidth_gbps: got 0, want > 0`},
		{"huge bandwidth", with("system: {links: {pcie: {bandwidth_gbps: 1e10}}}"),
			`ccl.yaml:6: system.links.pcie.bandwidth_gbps: got 1e10, want <= 1e+09`},
		{"negative latency", with("system: {links: {pcie: {latency_ns: -0.5}}}"),
			`ccl.yaml:6: system.links.pcie.latency_ns: got -0.5, want >= 0`},
		{"negative placement", with("system: {placement: [0, -1]}"),
			`ccl.yaml:6: system.placement[1]: got -1, want >= 0`},
		{"placement beyond the PEs", with("system:", "  pes_per_cube: 2", "  placement:", "    - 0", "    - 8"),
			`ccl.yaml:10: system.placement[1]: got 8, want < 8 (sips × cubes_per_sip × pes_per_cube)`},
		{"placement reuses a PE", with("system:", "  placement: [4, 5,", "    4]"),
			`ccl.yaml:8: system.placement[2]: PE 4 is already used by rank 0`},

		// Too precise.
		{"too-precise bandwidth", with("system:", "  links:", "    ucie: {bandwidth_gbps: 64.0001}"),
			`ccl.yaml:8: system.links.ucie.bandwidth_gbps: got 64.0001, want at most 3 decimal places (bandwidth is kept in whole bytes per µs)`},
		{"too-precise memory bandwidth", with("system: {memory: {hbm: {bandwidth_gbps: 1e-4}}}"),
			`ccl.yaml:6: system.memory.hbm.bandwidth_gbps: got 1e-4, want at most 3 decimal places (bandwidth is kept in whole bytes per µs)`},
		{"too-precise latency", with("system: {links: {pe_noc: {latency_ns: 0.0005}}}"),
			`ccl.yaml:6: system.links.pe_noc.latency_ns: got 0.0005, want at most 3 decimal places (time is kept in whole picoseconds)`},

		// Duplicates.
		{"duplicate defaults key", lines("defaults:", "  algorithm: a", "  n_slots: 4", "  n_slots: 8", "algorithms: {a: {module: a.star}}"),
			`ccl.yaml:4: defaults: duplicate key "n_slots" (first at ccl.yaml:3)`},
		{"duplicate algorithm", with("  a:", "    module: b.star"),
			`ccl.yaml:6: algorithms: duplicate key "a" (first at ccl.yaml:4)`},
		{"duplicate section", with("defaults: {}"),
			`ccl.yaml:6: top level: duplicate key "defaults" (first at ccl.yaml:1)`},
		{"duplicate params key", with("    params:", "      x: {y: 1, y: 2}"),
			`ccl.yaml:7: algorithms.a.params.x: duplicate key "y" (first at ccl.yaml:7)`},

		// Missing pieces.
		{"empty file", "", "ccl.yaml:1: defaults is required\nccl.yaml:1: algorithms is required"},
		{"missing defaults", lines("algorithms: {a: {module: a.star}}"),
			`ccl.yaml:1: defaults is required`},
		{"missing algorithms", lines("# a comment", "defaults: {algorithm: a}"),
			`ccl.yaml:2: algorithms is required`},
		{"missing defaults.algorithm", lines("# comment", "defaults:", "  world_size: 4", "algorithms: {a: {module: a.star}}"),
			`ccl.yaml:2: defaults.algorithm is required`},
		{"no algorithms", lines("defaults: {algorithm: a}", "algorithms: {}"),
			`ccl.yaml:2: algorithms: want at least one algorithm`},
		{"null algorithms", lines("defaults: {algorithm: a}", "algorithms:"),
			`ccl.yaml:2: algorithms: want at least one algorithm`},
		{"missing module", with("  b:", "    topology: ring_1d"),
			`ccl.yaml:6: algorithms.b.module is required: b is no algorithm of the configuration yet, so its entry names its .star file (module: FILE.star, or --set algorithms.b.module=FILE.star)`},
		{"unknown defaults.algorithm", lines("defaults:", "  algorithm: ring", "algorithms:", "  b: {module: b.star}", "  a: {module: a.star}"),
			`ccl.yaml:2: defaults.algorithm: got "ring", want one of the algorithms: a, b`},
		{"algorithm name not an identifier", with("  ring-2: {module: r.star}"),
			`ccl.yaml:6: algorithms: name "ring-2" is not an identifier (want letters, digits and _, not starting with a digit)`},

		// Bad sizes.
		{"bad size unit", lines("defaults:", "  algorithm: a", "  slot_size: 4Q", "algorithms: {a: {module: a.star}}"),
			`ccl.yaml:3: defaults.slot_size: invalid size "4Q": unknown unit "Q" (want B, K, KB, KiB, M, MB, MiB, G, GB, GiB, T, TB, TiB)`},
		{"fractional size", with("system: {memory: {sram: {capacity: 1.0001K}}}"),
			`ccl.yaml:6: system.memory.sram.capacity: invalid size "1.0001K": not a whole number of bytes`},

		// Every mistake, in file order, each with its line; a mistake
		// does not hide the ones after it.
		{"several mistakes", lines("defaults:", "  algorithm: a", "  n_slot: 4", "  world_size: many", "algorithms:", "  a:", "    module: a.star", "    topolgy: ring_1d", "    collective: allgatherr", "system: {sip: 2}"),
			`ccl.yaml:3: defaults: unknown key "n_slot" (allowed: ` + defaultsKeys + `); did you mean "n_slots"?` + "\n" +
				"ccl.yaml:4: defaults.world_size: got \"many\", want int\n" +
				`ccl.yaml:8: algorithms.a: unknown key "topolgy" (allowed: ` + entryKeys + `); did you mean "topology"?` + "\n" +
				"ccl.yaml:9: algorithms.a.collective: got \"allgatherr\", want one of allreduce, reduce_scatter, allgather, broadcast, reduce, alltoall; did you mean \"allgather\"?\n" +
				`ccl.yaml:10: system: unknown key "sip" (allowed: cubes_per_sip, faults, links, math, memory, pes_per_cube, placement, sips); did you mean "sips"?`},
		{"duplicate keys and a bad default algorithm", lines("defaults:", "  algorithm: b", "  n_slots: 2", "  n_slots: 3", "algorithms:", "  a: {module: a.star, module: b.star}"),
			"ccl.yaml:2: defaults.algorithm: got \"b\", want one of the algorithms: a\n" +
				"ccl.yaml:4: defaults: duplicate key \"n_slots\" (first at ccl.yaml:3)\n" +
				"ccl.yaml:6: algorithms.a: duplicate key \"module\" (first at ccl.yaml:6)"},
		{"a mistake per entry", lines("defaults: {algorithm: a}", "algorithms:", "  a: {module: a.star, n_slots: 0}", "  b: {modul: b.star}", "  9c: {module: c.star}"),
			"ccl.yaml:3: algorithms.a.n_slots: got 0, want >= 1\n" +
				`ccl.yaml:4: algorithms.b: unknown key "modul" (allowed: ` + entryKeys + `); did you mean "module"?` + "\n" +
				"ccl.yaml:4: algorithms.b.module is required: b is no algorithm of the configuration yet, so its entry names its .star file (module: FILE.star, or --set algorithms.b.module=FILE.star)\n" +
				"ccl.yaml:5: algorithms: name \"9c\" is not an identifier (want letters, digits and _, not starting with a digit)"},

		// YAML syntax.
		{"syntax error", with("    params: {x: [1, 2}"),
			`ccl.yaml:6: did not find expected ',' or ']'`},
		{"tab indentation", lines("defaults:", "\talgorithm: a"),
			`ccl.yaml:2: found character that cannot start any token (the line is indented with a tab: YAML indents with spaces)`},
		{"two documents", with("---", "defaults: {}"),
			`ccl.yaml:6: want a single YAML document, found another`},
		{"unknown alias", with("    params: *p"),
			`ccl.yaml:6: unknown anchor 'p' referenced`},
		{"invalid UTF-8", with("    params: {x: \xff}"),
			`ccl.yaml:6: invalid leading UTF-8 octet`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load("ccl.yaml", []byte(tt.in), nil)
			if err == nil {
				t.Fatalf("Load succeeded, want error %q; got %+v", tt.want, c)
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Errorf("error is %T, want *Error", err)
			}
		})
	}
}

func TestSetErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		sets []string
		want string
	}{
		{"missing =", with(), []string{"defaults.n_slots"},
			`--set defaults.n_slots: missing "=", want key.path=value`},
		{"missing key", with(), []string{"=4"},
			`--set =4: missing key path before "="`},
		{"empty path element", with(), []string{"defaults..n_slots=4"},
			`--set defaults..n_slots=4: empty key in path "defaults..n_slots"`},
		{"unknown section", with(), []string{"default.n_slots=4"},
			`--set default.n_slots=4: top level: unknown key "default" (allowed: algorithms, defaults, select, system); did you mean "defaults"?`},
		{"defaults key without defaults.", with(), []string{"vc_weights.comm=4"},
			`--set vc_weights.comm=4: top level: unknown key "vc_weights" (allowed: algorithms, defaults, select, system); did you mean defaults.vc_weights.comm?`},
		{"unknown key", with(), []string{"defaults.n_slot=4"},
			`--set defaults.n_slot=4: defaults: unknown key "n_slot" (allowed: algorithm, backpressure, buffer_kind, channels, deadlock_timeout_ns, ipcq_credit_size_bytes, ipcq_overhead_ns, max_sim_time_ns, mesh_shape, n_slots, poll_interval_ns, slot_size, vc_chunk_size, vc_weights, world_size); did you mean "n_slots"?`},
		// Past 64 channels no topology installs: the error blamed the
		// algorithm file for the --set value.
		{"channels over the topologies' bound", with(), []string{"defaults.channels=1000000"},
			`--set defaults.channels=1000000: defaults.channels: got 1000000, want <= 64`},
		{"unknown nested key", with(), []string{"system.links.ucie.bw=4"},
			`--set system.links.ucie.bw=4: system.links.ucie: unknown key "bw" (allowed: bandwidth_gbps, latency_ns)`},
		{"below a leaf", with(), []string{"defaults.n_slots.x=4"},
			`--set defaults.n_slots.x=4: defaults.n_slots is not a mapping, cannot set "x" below it`},
		{"below a file value of the wrong type", with("    params: 3"), []string{"algorithms.a.params.x=4"},
			"--set algorithms.a.params.x=4: algorithms.a.params: got 3 at ccl.yaml:6, want mapping\nccl.yaml:6: algorithms.a.params: got 3, want mapping"},
		{"malformed value", with(), []string{"defaults.vc_weights={compute: 1"},
			`--set defaults.vc_weights={compute: 1: bad value: did not find expected ',' or '}'`},
		{"block value", with(), []string{"defaults.buffer_kind=a: b"},
			`--set defaults.buffer_kind=a: b: bad value: want a scalar, [a, sequence] or {a: mapping} (quote a string that contains ": " or starts with "- ")`},
		{"out of range", with(), []string{"defaults.n_slots=0"},
			`--set defaults.n_slots=0: defaults.n_slots: got 0, want >= 1`},
		{"wrong type", with(), []string{"system.links.ucie.bandwidth_gbps=fast"},
			`--set system.links.ucie.bandwidth_gbps=fast: system.links.ucie.bandwidth_gbps: got "fast", want number`},
		{"too precise", with(), []string{"system.links.ucie.bandwidth_gbps=1.0005"},
			`--set system.links.ucie.bandwidth_gbps=1.0005: system.links.ucie.bandwidth_gbps: got 1.0005, want at most 3 decimal places (bandwidth is kept in whole bytes per µs)`},
		{"bad enum", with(), []string{"defaults.buffer_kind=dram"},
			`--set defaults.buffer_kind=dram: defaults.buffer_kind: got "dram", want one of tcm, hbm, sram; did you mean "hbm"?`},
		{"empty value", with(), []string{"defaults.buffer_kind="},
			`--set defaults.buffer_kind=: defaults.buffer_kind: got null, want one of tcm, hbm, sram`},
		{"unknown key inside a mapping value", with(), []string{"defaults.vc_weights={compute: 1, com: 3}"},
			`--set defaults.vc_weights={compute: 1, com: 3}: defaults.vc_weights: unknown key "com" (allowed: comm, compute); did you mean "comm"?`},
		{"bad size", with(), []string{"defaults.slot_size=4Q"},
			`--set defaults.slot_size=4Q: defaults.slot_size: invalid size "4Q": unknown unit "Q" (want B, K, KB, KiB, M, MB, MiB, G, GB, GiB, T, TB, TiB)`},
		{"unknown default algorithm", with(), []string{"defaults.algorithm=b"},
			`--set defaults.algorithm=b: defaults.algorithm: got "b", want one of the algorithms: a`},
		{"new algorithm without module", with(), []string{"algorithms.b.topology=none"},
			`--set algorithms.b.topology=none: algorithms.b.module is required: b is no algorithm of the configuration yet, so its entry names its .star file (module: FILE.star, or --set algorithms.b.module=FILE.star)`},
		{"new algorithm with a bad name", with(), []string{"algorithms.2b.module=b.star"},
			`--set algorithms.2b.module=b.star: algorithms: name "2b" is not an identifier (want letters, digits and _, not starting with a digit)`},
		{"placement out of range", with(), []string{"system.placement=[0, 32]"},
			`--set system.placement=[0, 32]: system.placement[1]: got 32, want < 32 (sips × cubes_per_sip × pes_per_cube)`},
		// Issue 13 (1): every duration converts to ps without overflow.
		{"overhead overflows ps", with(), []string{"defaults.ipcq_overhead_ns=9223372036854776"},
			`--set defaults.ipcq_overhead_ns=9223372036854776: defaults.ipcq_overhead_ns: got 9223372036854776, want <= 1000000000000 (1000 s)`},
		{"poll interval overflows ps", with(), []string{"defaults.poll_interval_ns=9223372036854775807"},
			`--set defaults.poll_interval_ns=9223372036854775807: defaults.poll_interval_ns: got 9223372036854775807, want <= 1000000000000 (1000 s)`},
		{"deadlock timeout overflows ps", with(), []string{"defaults.deadlock_timeout_ns=1000000000000001"},
			`--set defaults.deadlock_timeout_ns=1000000000000001: defaults.deadlock_timeout_ns: got 1000000000000001, want <= 1000000000000000 (about 11.6 days)`},
		{"watchdog past the horizon", with(), []string{"defaults.max_sim_time_ns=9223372036854775807"},
			`--set defaults.max_sim_time_ns=9223372036854775807: defaults.max_sim_time_ns: got 9223372036854775807, want <= 1000000000000000 (about 11.6 days)`},
		{"vc weight overflows injection time", with(), []string{"defaults.vc_weights={compute: 1, comm: 1000001}"},
			`--set defaults.vc_weights={compute: 1, comm: 1000001}: defaults.vc_weights.comm: got 1000001, want <= 1000000`},
		// Issue 13 (1): n_slots × slot_size cannot overflow, and the
		// per-slot bookkeeping (host memory) stays small.
		{"n_slots too many", with(), []string{"defaults.n_slots=100000000"},
			`--set defaults.n_slots=100000000: defaults.n_slots: got 100000000, want <= 65536`},
		{"slot_size too large", with(), []string{"defaults.slot_size=2G"},
			`--set defaults.slot_size=2G: defaults.slot_size: got "2G", want <= 1073741824`},
		{"credit too large", with(), []string{"defaults.ipcq_credit_size_bytes=9223372036854775807"},
			`--set defaults.ipcq_credit_size_bytes=9223372036854775807: defaults.ipcq_credit_size_bytes: got 9223372036854775807, want <= 1048576`},
		{"later set wins, earlier error gone", with(), []string{"defaults.n_slots=0", "defaults.n_slots=x"},
			`--set defaults.n_slots=x: defaults.n_slots: got "x", want int`},
		{"file error still reported from the file", with("    topology: torus"), []string{"defaults.n_slots=2"},
			`ccl.yaml:6: algorithms.a.topology: got "torus", want one of ring_1d, ring_1d_unidir, mesh_2d, tree_binary, full_mesh, none, custom; did you mean "mesh_2d"?`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load("ccl.yaml", []byte(tt.in), tt.sets)
			if err == nil {
				t.Fatalf("Load succeeded, want error %q", tt.want)
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSettings(t *testing.T) {
	c, err := Load("ccl.yaml", []byte(lines(
		"defaults:",
		"  algorithm: plain",
		"  world_size: 4",
		"  vc_weights: {compute: 2, comm: 2}",
		"algorithms:",
		"  plain: {module: plain.star}",
		"  tuned:",
		"    module: tuned.star",
		"    buffer_kind: hbm",
		"    slot_size: 1K",
		"    vc_weights: {comm: 5}",
		"    mesh_shape: [2, 2]",
	)), []string{"algorithms.tuned.n_slots=3"})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := c.Settings("plain")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(c.Defaults, plain); diff != "" {
		t.Errorf("Settings(plain) (-want +got):\n%s", diff)
	}
	tuned, err := c.Settings("tuned")
	if err != nil {
		t.Fatal(err)
	}
	want := c.Defaults
	want.BufferKind = "hbm"
	want.SlotSize = 1024
	want.NSlots = 3
	want.VCWeights = VCWeights{Compute: 2, Comm: 5} // compute from defaults
	want.MeshShape = []int{2, 2}
	if diff := cmp.Diff(want, tuned); diff != "" {
		t.Errorf("Settings(tuned) (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"buffer_kind", "mesh_shape", "n_slots", "slot_size", "vc_weights"}, c.Algorithms["tuned"].OverrideKeys); diff != "" {
		t.Errorf("OverrideKeys (-want +got):\n%s", diff)
	}

	// Overrides follow later changes to Defaults for the keys they do not set.
	c.Defaults.WorldSize = 64
	if tuned, _ := c.Settings("tuned"); tuned.WorldSize != 64 || tuned.BufferKind != "hbm" {
		t.Errorf("after changing Defaults: Settings(tuned) = %+v", tuned)
	}
	// The result is a copy.
	tuned.MeshShape[0] = 9
	if again, _ := c.Settings("tuned"); again.MeshShape[0] != 2 {
		t.Error("Settings shares MeshShape with the config")
	}

	_, err = c.Settings("ring")
	if diff := cmp.Diff(`unknown algorithm "ring" (known: plain, tuned)`, errString(err)); diff != "" {
		t.Errorf("Settings(ring) error (-want +got):\n%s", diff)
	}
	_, err = c.Algorithm("ring")
	if diff := cmp.Diff(`unknown algorithm "ring" (known: plain, tuned)`, errString(err)); diff != "" {
		t.Errorf("Algorithm(ring) error (-want +got):\n%s", diff)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestLoadDoesNotAliasInputs(t *testing.T) {
	in := []byte(with("    params: {x: [1]}"))
	a, err := Load("ccl.yaml", in, []string{"defaults.mesh_shape=[2, 2]"})
	if err != nil {
		t.Fatal(err)
	}
	b := a.Clone()
	a.Algorithms["a"].Params["x"].([]any)[0] = "changed"
	a.Defaults.MeshShape[0] = 7
	c, err := Load("ccl.yaml", in, []string{"defaults.mesh_shape=[2, 2]"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(b, c, cmpConfig...); diff != "" {
		t.Errorf("Clone or Load shares state (-clone +second load):\n%s", diff)
	}
}

func TestEnumLists(t *testing.T) {
	got := [][]string{BufferKinds(), Backpressures(), Topologies(), Collectives()}
	want := [][]string{
		{"tcm", "hbm", "sram"},
		{"sleep", "poll"},
		{"ring_1d", "ring_1d_unidir", "mesh_2d", "tree_binary", "full_mesh", "none", "custom"},
		{"allreduce", "reduce_scatter", "allgather", "broadcast", "reduce", "alltoall"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("enums (-want +got):\n%s", diff)
	}
}

func TestAliasBomb(t *testing.T) {
	// Each level doubles the tree; 30 levels would be 2^30 nodes.
	var b strings.Builder
	b.WriteString(with("    params:", "      l0: &l0 [1, 1]"))
	for i := 1; i <= 30; i++ {
		b.WriteString("      l" + strconv.Itoa(i) + ": &l" + strconv.Itoa(i) + " [*l" + strconv.Itoa(i-1) + ", *l" + strconv.Itoa(i-1) + "]\n")
	}
	_, err := Load("ccl.yaml", []byte(b.String()), nil)
	if err == nil || !strings.Contains(err.Error(), "document too large") {
		t.Fatalf("Load = %v, want a document too large error", err)
	}
}

// An item given as "--vary key.path=value" (a comparison's variant) is
// named as the --vary it is in every position it gives: its own error,
// and where the key it set came from.
func TestVaryItemsAreNamedAsVary(t *testing.T) {
	_, err := LoadDefault("ccl.yaml", []string{"--vary defaults.bogus=1"})
	var e *Error
	if !errors.As(err, &e) || e.Pos != "--vary defaults.bogus=1" {
		t.Errorf("bad --vary item: %v, want an error at --vary defaults.bogus=1", err)
	}
	c, err := LoadDefault("ccl.yaml", []string{"--vary defaults.n_slots=4"})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.DefaultsGiven["n_slots"]; c.Defaults.NSlots != 4 || got != "--vary defaults.n_slots=4" {
		t.Errorf("n_slots %d given at %q, want 4 given at --vary defaults.n_slots=4", c.Defaults.NSlots, got)
	}
}
