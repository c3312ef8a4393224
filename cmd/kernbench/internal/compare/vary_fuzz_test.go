package compare

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzParseVary: --vary flags (one a line) with --set items (one a line)
// give either an error naming a --vary or --set the user gave, or one
// axis per flag: its key the flag's key, its values non-empty, distinct
// and split so that joined back with commas they split the same; no two
// axes and no axis and --set on the same setting. Expand runs every
// combination of the values once per target.
func FuzzParseVary(f *testing.F) {
	for _, s := range [][2]string{
		{"defaults.buffer_kind=tcm,sram,hbm", ""},
		{"defaults.algorithm=ring_allreduce,tree_allreduce\ndefaults.n_slots=1,8", "defaults.world_size=4"},
		{"defaults.mesh_shape=[2,4],[4,2]", ""},
		{"defaults.vc_weights={compute: 1, comm: 2},{compute: 2, comm: 1}", ""},
		{"defaults.n_slots=1,1", ""},
		{"defaults.n_slots=1,,2", ""},
		{"defaults=1,2\ndefaults.n_slots=3,4", ""},
		{"defaults.n_slots=1,8", "defaults.n_slots=4"},
		{"defaults.n_slots=1,8", "defaults=x"},
		{"defaults.n_slots=1,8\ndefaults.n_slots=2,4", ""},
		{"=1,2", ""},
		{"defaults.mesh_shape=],[2,4", ""},
		{" defaults.n_slots =1,2", " defaults.n_slots = 3"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, flagsIn, setsIn string) {
		flags := strings.Split(flagsIn, "\n")
		var sets []string
		if setsIn != "" {
			sets = strings.Split(setsIn, "\n")
		}
		axes, err := ParseVary(flags, sets)
		if err != nil {
			msg := err.Error()
			named := false
			for _, fl := range flags {
				key, _, _ := strings.Cut(fl, "=")
				named = named || strings.Contains(msg, "--vary "+strconv.Quote(fl)) || strings.Contains(msg, "--vary "+strings.TrimSpace(key))
			}
			for _, s := range sets {
				named = named || strings.Contains(msg, "--set "+s)
			}
			if !named {
				t.Fatalf("--vary %q --set %q: error names none of them: %v", flags, sets, err)
			}
			return
		}
		if len(axes) != len(flags) {
			t.Fatalf("--vary %q: %d axes", flags, len(axes))
		}
		combos := 1
		for i, a := range axes {
			key, vals, _ := strings.Cut(flags[i], "=")
			if a.Key != strings.TrimSpace(key) || a.Key == "" {
				t.Fatalf("--vary %q: key %q", flags[i], a.Key)
			}
			if len(a.Values) == 0 || slices.Contains(a.Values, "") {
				t.Fatalf("--vary %q: values %q", flags[i], a.Values)
			}
			if strings.Join(a.Values, ",") != vals {
				t.Fatalf("--vary %q: values %q do not join back", flags[i], a.Values)
			}
			if diff := cmp.Diff(a.Values, SplitValues(strings.Join(a.Values, ","))); diff != "" {
				t.Fatalf("--vary %q: values split again (-first +again):\n%s", flags[i], diff)
			}
			seen := map[string]bool{}
			for _, v := range a.Values {
				if seen[v] {
					t.Fatalf("--vary %q: value %q twice", flags[i], v)
				}
				seen[v] = true
			}
			for _, b := range axes[:i] {
				if Within(a.Key, b.Key) || Within(b.Key, a.Key) {
					t.Fatalf("--vary %q: axes %q and %q on one setting", flags, b.Key, a.Key)
				}
			}
			for _, s := range sets {
				sk, _, _ := strings.Cut(s, "=")
				if Within(strings.TrimSpace(sk), a.Key) {
					t.Fatalf("--vary %q --set %q: the set cannot take effect", flags[i], s)
				}
			}
			combos *= len(a.Values)
			if combos > 1<<12 {
				return // Expand would only be slow
			}
		}
		targets := []string{"", "ring_allreduce", "x/y.star"}
		vs := Expand(targets, axes, "tree_allreduce")
		if len(vs) != combos*len(targets) {
			t.Fatalf("--vary %q: %d variants, want %d", flags, len(vs), combos*len(targets))
		}
		for _, v := range vs {
			if len(v.Sets) != len(axes) || v.Target == "" {
				t.Fatalf("--vary %q: variant %+v", flags, v)
			}
			for j, s := range v.Sets {
				if k, val, _ := strings.Cut(s, "="); k != axes[j].Key || !slices.Contains(axes[j].Values, val) {
					t.Fatalf("--vary %q: variant %+v sets %q", flags, v, s)
				}
			}
		}
	})
}
