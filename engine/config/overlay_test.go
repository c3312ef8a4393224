package config

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Issue 12 (2): a local ccl.yaml changes only what it names.
func TestLoadOverlay(t *testing.T) {
	shipped := Default()
	tests := []struct {
		name string
		in   string
		sets []string
		// edit turns a copy of the embedded default into the expected
		// config (File is set by the test).
		edit func(c *Config)
	}{
		{"empty file is the default", "", nil, func(*Config) {}},
		{"one algorithm entry, no defaults", lines(
			"algorithms:",
			"  mine:",
			"    module: mine.star",
			"    topology: ring_1d",
			"    collective: allreduce",
		), nil, func(c *Config) {
			c.Algorithms["mine"] = &Algorithm{Name: "mine", Module: "mine.star", Topology: "ring_1d", TopologyGiven: true, Collective: "allreduce", Line: 2}
		}},
		{"one default changed", lines("defaults:", "  world_size: 4", "  algorithm: rd_allreduce"), nil, func(c *Config) {
			c.Defaults.WorldSize = 4
			c.Defaults.Algorithm = "rd_allreduce"
		}},
		{"empty defaults", lines("defaults:"), nil, func(*Config) {}},
		{"shipped entry changed without module", lines(
			"algorithms:",
			"  rd_allreduce:",
			"    params: {tcm_limit: 1024}",
		), nil, func(c *Config) {
			c.Algorithms["rd_allreduce"].Params = map[string]any{"tcm_limit": int64(1024)}
			c.Algorithms["rd_allreduce"].Line = 2
		}},
		{"shipped entry replaced by one with module", lines(
			"algorithms:",
			"  rd_allreduce:",
			"    module: my_rd.star",
		), nil, func(c *Config) {
			c.Algorithms["rd_allreduce"] = &Algorithm{Name: "rd_allreduce", Module: "my_rd.star", Topology: "ring_1d", Line: 2}
		}},
		// A --set applied to the merged tree can make a mapping null: no
		// keys given, as in Load, not zero weights and bandwidths.
		{"null --set mappings keep the default's values", lines("defaults: {world_size: 4}"),
			[]string{"defaults.vc_weights=", "system.links.pe_noc=", "system.memory.tcm=null"}, func(c *Config) {
				c.Defaults.WorldSize = 4
			}},
		{"--set reaches shipped entries", "", []string{"algorithms.rd_allreduce.params.tcm_limit=8"}, func(c *Config) {
			c.Algorithms["rd_allreduce"].Params = map[string]any{"tcm_limit": int64(8)}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LoadOverlay("local.yaml", []byte(tt.in), tt.sets)
			if err != nil {
				t.Fatal(err)
			}
			want := Default()
			want.File = "local.yaml"
			for _, a := range want.Algorithms {
				a.Shipped = true
			}
			tt.edit(want)
			want.AlgorithmNames = nil
			for n := range want.Algorithms {
				want.AlgorithmNames = append(want.AlgorithmNames, n)
			}
			slices.Sort(want.AlgorithmNames)
			if diff := cmp.Diff(want, got, cmpConfig...); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
	if len(shipped.Algorithms) < 2 {
		t.Fatal("the embedded default has fewer than two algorithms")
	}
}

func TestLoadOverlayErrors(t *testing.T) {
	tests := []struct {
		name, in string
		sets     []string
		want     string
	}{
		{"unknown key", lines("defaults:", "  world_size: 4", "  bogus: 1"), nil,
			`local.yaml:3: defaults: unknown key "bogus" (allowed: `},
		{"bad value", lines("defaults:", "  buffer_kind: dram"), nil,
			`local.yaml:2: defaults.buffer_kind: got "dram", want one of tcm, hbm, sram`},
		{"new entry without module", lines("algorithms:", "  b:", "    topology: none"), nil,
			`local.yaml:2: algorithms.b.module is required: b is no algorithm of the configuration yet, so its entry names its .star file (module: FILE.star, or --set algorithms.b.module=FILE.star)`},
		{"unknown default algorithm", lines("defaults: {algorithm: nope}"), nil,
			`local.yaml:1: defaults.algorithm: got "nope", want one of the algorithms: `},
		{"duplicate key", lines("defaults:", "  n_slots: 4", "  n_slots: 8"), nil,
			`local.yaml:3: defaults: duplicate key "n_slots" (first at local.yaml:2)`},
		{"not a mapping", lines("- 1"), nil, `local.yaml:1: top level: got sequence, want mapping`},
		{"bad --set", "", []string{"defaults.n_slots=x"}, `--set defaults.n_slots=x: defaults.n_slots: got "x", want int`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadOverlay("local.yaml", []byte(tt.in), tt.sets)
			if err == nil {
				t.Fatalf("no error, want %q", tt.want)
			}
			if got := err.Error(); len(got) < len(tt.want) || got[:len(tt.want)] != tt.want {
				t.Errorf("error\n got %s\nwant %s...", got, tt.want)
			}
		})
	}
}

// DefaultsGiven lists the defaults keys the user gave, with where, and
// none that only the embedded default gives: kernbench may choose those by
// itself, never a given one.
func TestDefaultsGiven(t *testing.T) {
	tests := []struct {
		name string
		load func() (*Config, error)
		want map[string]string
	}{
		{"embedded default alone", func() (*Config, error) { return LoadDefault("embedded", nil) }, map[string]string{}},
		{"embedded default and --set", func() (*Config, error) {
			return LoadDefault("embedded", []string{"defaults.buffer_kind=tcm", "defaults.vc_weights.comm=2"})
		}, map[string]string{"buffer_kind": "--set defaults.buffer_kind=tcm", "vc_weights": "--set defaults.vc_weights.comm=2"}},
		{"local file over the default", func() (*Config, error) {
			return LoadOverlay("local.yaml", []byte(lines("defaults:", "  n_slots: 4", "  vc_weights: {comm: 3}")), []string{"defaults.slot_size=2K"})
		}, map[string]string{"n_slots": "local.yaml:2", "vc_weights": "local.yaml:3", "slot_size": "--set defaults.slot_size=2K"}},
		// The shipped ccl.yaml, as in a clone of the repository.
		{"local copy of the default", func() (*Config, error) {
			return LoadOverlay("ccl.yaml", DefaultYAML(), []string{"defaults.n_slots=4"})
		}, map[string]string{"n_slots": "--set defaults.n_slots=4"}},
		{"local file that leaves defaults out", func() (*Config, error) {
			return LoadOverlay("local.yaml", []byte(lines("system:", "  sips: 2")), nil)
		}, map[string]string{}},
		{"a whole file", func() (*Config, error) {
			return Load("full.yaml", []byte(lines("defaults:", "  algorithm: a", "  buffer_kind: hbm", "algorithms:", "  a: {module: a.star}")), nil)
		}, map[string]string{"algorithm": "full.yaml:2", "buffer_kind": "full.yaml:3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tt.load()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, c.DefaultsGiven); diff != "" {
				t.Errorf("DefaultsGiven (-want +got):\n%s", diff)
			}
		})
	}
}
