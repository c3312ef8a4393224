package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// selectFile is minimal with a second allreduce algorithm b, a broadcast
// one c, then extra lines (from line 12).
func selectFile(extra ...string) string {
	return with(append([]string{
		"    collective: allreduce", // 6
		"  b:",                      // 7
		"    module: b.star",        // 8
		"  c:",                      // 9
		"    module: c.star",        // 10
		"    collective: broadcast", // 11
	}, extra...)...)
}

// select: decodes to ranges per collective, with sizes in units, the set
// items of each and where each entry was given; --set may give a whole
// list.
func TestSelect(t *testing.T) {
	for _, tc := range []struct {
		name string
		file string
		sets []string
		want map[string][]SelectRange
	}{
		{"file", selectFile(
			"select:",
			"  allreduce:",
			"    - {min_bytes: 0, max_bytes: 32K, algorithm: b}",
			"    - {min_bytes: 32K, algorithm: a, set: [defaults.n_slots=4]}",
			"  broadcast:",
			"    - {min_bytes: 1K, max_bytes: 1M, algorithm: c}",
		), nil, map[string][]SelectRange{
			"allreduce": {
				{MaxBytes: 32768, Algorithm: "b", Pos: "ccl.yaml:14"},
				{MinBytes: 32768, Algorithm: "a", Set: []string{"defaults.n_slots=4"}, Pos: "ccl.yaml:15"},
			},
			"broadcast": {{MinBytes: 1024, MaxBytes: 1 << 20, Algorithm: "c", Pos: "ccl.yaml:17"}},
		}},
		{"--set", selectFile(), []string{"select.allreduce=[{max_bytes: 4K, algorithm: a}, {min_bytes: 8K, algorithm: b}]"},
			map[string][]SelectRange{"allreduce": {
				{MaxBytes: 4096, Algorithm: "a", Pos: "--set select.allreduce=[{max_bytes: 4K, algorithm: a}, {min_bytes: 8K, algorithm: b}]"},
				{MinBytes: 8192, Algorithm: "b", Pos: "--set select.allreduce=[{max_bytes: 4K, algorithm: a}, {min_bytes: 8K, algorithm: b}]"},
			}}},
		{"none", selectFile(), nil, nil},
		{"any order", selectFile(
			"select:",
			"  allreduce:",
			"    - {min_bytes: 32K, algorithm: a}",
			"    - {max_bytes: 32K, algorithm: b}",
		), nil, map[string][]SelectRange{"allreduce": {
			{MaxBytes: 32768, Algorithm: "b", Pos: "ccl.yaml:15"},
			{MinBytes: 32768, Algorithm: "a", Pos: "ccl.yaml:14"},
		}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load("ccl.yaml", []byte(tc.file), tc.sets)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, c.Select); diff != "" {
				t.Errorf("select (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(c.Select, c.Clone().Select); diff != "" {
				t.Errorf("Clone changes select (-orig +clone):\n%s", diff)
			}
		})
	}
}

func TestSelectErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lines []string
		sets  []string
		want  string
	}{
		{"unknown collective", []string{"select:", "  allreduce_x:", "    - {algorithm: a}"}, nil,
			`ccl.yaml:13: select: unknown key "allreduce_x" (allowed: `},
		{"not a list", []string{"select:", "  allreduce: {algorithm: a}"}, nil,
			"ccl.yaml:13: select.allreduce: got mapping, want a list of ranges"},
		{"empty list", []string{"select:", "  allreduce: []"}, nil, "ccl.yaml:13: select.allreduce: got an empty list, want at least one range like {min_bytes: 0, algorithm: NAME} (or leave allreduce out)"},
		{"no algorithm", []string{"select:", "  allreduce:", "    - {max_bytes: 1K}"}, nil, "ccl.yaml:14: select.allreduce[0].algorithm is required"},
		{"unknown algorithm", []string{"select:", "  allreduce:", "    - {algorithm: zz}"}, nil,
			`ccl.yaml:14: select.allreduce[0].algorithm: got "zz", want one of the algorithms: a, b, c`},
		{"unknown algorithm, reordered", []string{"select:", "  allreduce:", "    - {min_bytes: 8K, algorithm: zz}", "    - {max_bytes: 8K, algorithm: a}"}, nil,
			`ccl.yaml:14: select.allreduce[0].algorithm: got "zz"`},
		{"other collective", []string{"select:", "  allreduce:", "    - {algorithm: c}"}, nil,
			"ccl.yaml:14: select.allreduce[0].algorithm: c is an algorithm of broadcast, not allreduce"},
		{"auto", []string{"select:", "  allreduce:", "    - {algorithm: auto}"}, nil, "select.allreduce[0].algorithm: got auto"},
		{"empty range", []string{"select:", "  allreduce:", "    - {min_bytes: 4K, max_bytes: 4K, algorithm: a}"}, nil,
			"ccl.yaml:14: select.allreduce[0]: max_bytes 4096 is not above min_bytes 4096"},
		{"zero max", []string{"select:", "  allreduce:", "    - {max_bytes: 0, algorithm: a}"}, nil,
			"select.allreduce[0].max_bytes: got 0, want > 0 (leave max_bytes out for no upper bound)"},
		{"overlap", []string{"select:", "  allreduce:", "    - {max_bytes: 8K, algorithm: a}", "    - {min_bytes: 4K, algorithm: b}"}, nil,
			"ccl.yaml:15: select.allreduce[1]: [4096, ∞) overlaps [0, 8192) (ccl.yaml:14); ranges may not overlap"},
		{"overlap at one world size", []string{"select:", "  allreduce:", "    - {world_size: 4, algorithm: a}", "    - {world_size: 8, algorithm: b}", "    - {min_bytes: 4K, world_size: 4, algorithm: b}"}, nil,
			"ccl.yaml:16: select.allreduce[2]: [4096, ∞) overlaps [0, ∞) (ccl.yaml:14), which has no max_bytes"},
		{"world size 0", []string{"select:", "  allreduce:", "    - {world_size: 0, algorithm: a}"}, nil, "select.allreduce[0].world_size: got 0"},
		{"unbounded not last", []string{"select:", "  allreduce:", "    - {algorithm: a}", "    - {min_bytes: 4K, algorithm: b}"}, nil,
			"ccl.yaml:15: select.allreduce[1]: [4096, ∞) overlaps [0, ∞) (ccl.yaml:14), which has no max_bytes"},
		{"negative", []string{"select:", "  allreduce:", "    - {min_bytes: -1, algorithm: a}"}, nil, "select.allreduce[0].min_bytes: got -1"},
		{"bad set item", []string{"select:", "  allreduce:", "    - {algorithm: a, set: [n_slots]}"}, nil,
			`ccl.yaml:14: select.allreduce[0].set[0]: got "n_slots", want key.path=value`},
		{"set of select", []string{"select:", "  allreduce:", "    - {algorithm: a, set: [select.allreduce=x]}"}, nil,
			"select.allreduce[0].set[0]: select.allreduce: an entry of select: cannot set select:"},
		{"set of an unknown key", []string{"select:", "  allreduce:", "    - {algorithm: a, set: [defaults.n_slot=8]}"}, nil,
			`ccl.yaml:14: select.allreduce[0].set[0]: defaults: unknown key "n_slot" (allowed: `},
		{"set of a bad value", []string{"select:", "  allreduce:", "    - {algorithm: a, set: [defaults.n_slots=0]}"}, nil,
			`ccl.yaml:14: select.allreduce[0].set[0]: defaults.n_slots: got 0, want >= 1`},
		{"set of a bad value of an entry", []string{"select:", "  allreduce:", "    - {algorithm: a, set: [algorithms.a.slot_size=lots]}"}, nil,
			`ccl.yaml:14: select.allreduce[0].set[0]: algorithms.a.slot_size: invalid size "lots"`},
		{"set below a value", []string{"select:", "  allreduce:", "    - {algorithm: a, set: [defaults.n_slots.x=8]}"}, nil,
			`ccl.yaml:14: select.allreduce[0].set[0]: defaults.n_slots is not a mapping`},
		{"set of the algorithm", []string{"select:", "  allreduce:", "    - {algorithm: a, set: [defaults.algorithm=b]}"}, nil,
			"the entry's algorithm: names what it runs"},
		{"--set unknown collective", nil, []string{"select.allreduc=[{algorithm: a}]"}, `--set select.allreduc=[{algorithm: a}]: select: unknown key "allreduc"`},
		{"--set bad entry", nil, []string{"select.allreduce=[{algorithm: zz}]"}, `--set select.allreduce=[{algorithm: zz}]: select.allreduce[0].algorithm: got "zz"`},
		{"auto without select", []string{}, []string{"defaults.algorithm=auto"}, "defaults.algorithm: auto picks from select:, which this configuration does not have"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load("ccl.yaml", []byte(selectFile(tc.lines...)), tc.sets)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// defaults.algorithm may be auto when select: is given; no entry may be
// named auto.
func TestAutoAlgorithm(t *testing.T) {
	c, err := Load("ccl.yaml", []byte(selectFile("select:", "  allreduce:", "    - {algorithm: a}")), []string{"defaults.algorithm=auto"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Defaults.Algorithm != AutoAlgorithm {
		t.Errorf("defaults.algorithm = %q, want auto", c.Defaults.Algorithm)
	}
	_, err = Load("ccl.yaml", []byte(with("  auto:", "    module: x.star")), nil)
	if want := "ccl.yaml:6: algorithms: the name auto is reserved"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want an error containing %q", err, want)
	}
}

func TestPick(t *testing.T) {
	c := &Config{Select: map[string][]SelectRange{"allreduce": {
		{MaxBytes: 4096, Algorithm: "a"},
		{MinBytes: 8192, Algorithm: "b", Set: []string{"defaults.n_slots=2"}},
	}}}
	for _, tc := range []struct {
		collective string
		n          int64
		want       string // algorithm, or the error
	}{
		{"allreduce", 0, "a"},
		{"allreduce", 4095, "a"},
		{"allreduce", 8192, "b"},
		{"allreduce", 1 << 40, "b"},
		{"allreduce", 4096, "select.allreduce: no range holds 4096 bytes (ranges: [0, 4096) a, [8192, ∞) b)"},
		{"broadcast", 1, "select: has no entry for broadcast (it has: allreduce); kernbench tune broadcast writes one"},
	} {
		r, err := c.Pick(tc.collective, tc.n, 8)
		got := r.Algorithm
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("Pick(%s, %d) = %q, want %q", tc.collective, tc.n, got, tc.want)
		}
	}
}

// Ranges tuned at a world size serve that world size only; ranges that
// name none serve the others; with neither, Pick says where the ranges
// were tuned.
func TestPickByWorldSize(t *testing.T) {
	tuned := &Config{Select: map[string][]SelectRange{"allreduce": {
		{Algorithm: "four", WorldSize: 4, Pos: "sel.yaml:6"},
		{Algorithm: "eight", WorldSize: 8, Pos: "sel.yaml:7"},
	}}}
	withAny := &Config{Select: map[string][]SelectRange{"allreduce": {
		{Algorithm: "four", WorldSize: 4},
		{Algorithm: "any"},
	}}}
	for _, tc := range []struct {
		c     *Config
		world int
		want  string
	}{
		{tuned, 4, "four"},
		{tuned, 8, "eight"},
		{tuned, 16, "select.allreduce was tuned at world_size 4, 8, not 16 (sel.yaml:6): kernbench tune allreduce --world-size 16 writes ranges for it (or leave world_size out of a range to use it at any)"},
		{withAny, 4, "four"},
		{withAny, 16, "any"},
	} {
		r, err := tc.c.Pick("allreduce", 1024, tc.world)
		got := r.Algorithm
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("Pick at world %d = %q, want %q", tc.world, got, tc.want)
		}
	}
}
