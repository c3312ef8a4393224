package spelling

import "testing"

func TestClosest(t *testing.T) {
	names := []string{"n_slots", "slot_size", "hbm", "tcm", "allgather", "allreduce", "avg", "a", "sip", "sips"}
	for _, tc := range []struct{ in, want string }{
		{"n_slot", "n_slots"},
		{"HBM", "hbm"}, // case only, whatever the distance
		{"allgathr", "allgather"},
		{"n_slots", "n_slots"}, // itself
		{"nonesuch", ""},
		{"dram", "hbm"}, // a synonym, before sram one edit away (not in names here)
		{"DDR", "hbm"},
		{"scratchpad", "tcm"},
		{"hbm2", "hbm"},       // one edit: no synonym needed
		{"add", ""},           // two edits from "avg", but three letters
		{"b", ""},             // one letter is any other
		{"sip", "sip"},        // itself again, with a close name about
		{"slot", "slot_size"}, // the one name it begins
		{"all", ""},           // begins two names
		{"n_", ""},            // too short to begin one
	} {
		if got := Closest(tc.in, names); got != tc.want {
			t.Errorf("Closest(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	// A synonym whose name is not among names gives nothing of its own:
	// the nearest spelling stands.
	if got := Closest("dram", []string{"sram", "tcm"}); got != "sram" {
		t.Errorf("Closest(dram) without hbm = %q, want sram", got)
	}
	if got := Closest("dram", []string{"sram", "tcm", "hbm"}); got != "hbm" {
		t.Errorf("Closest(dram) among memory kinds = %q, want hbm", got)
	}
	// The topologies by their engineers' names: ring is a prefix of two
	// and far from both; the others are the one topology they begin, or a
	// synonym.
	topologies := []string{"ring_1d", "ring_1d_unidir", "mesh_2d", "tree_binary", "full_mesh", "none", "custom"}
	for _, tc := range []struct{ in, want string }{
		{"ring", "ring_1d"}, {"torus", "mesh_2d"}, {"mesh", "mesh_2d"}, {"tree", "tree_binary"},
		{"ring_1d_uni", "ring_1d_unidir"}, {"full", "full_mesh"}, {"Mesh", "mesh_2d"}, {"ring_1", "ring_1d"},
	} {
		if got := Closest(tc.in, topologies); got != tc.want {
			t.Errorf("Closest(%q) among topologies = %q, want %q", tc.in, got, tc.want)
		}
	}
	// Reductions and collectives by their names in other libraries: "mean"
	// is avg, not "max" (two edits away); "bcast" is broadcast, which no
	// spelling reaches.
	redops := []string{"sum", "prod", "max", "min", "avg"}
	collectives := []string{"allreduce", "reduce_scatter", "allgather", "broadcast", "reduce", "alltoall"}
	for _, tc := range []struct {
		in    string
		names []string
		want  string
	}{
		{"mean", redops, "avg"}, {"Average", redops, "avg"}, {"add", redops, "sum"},
		{"maximum", redops, "max"}, {"minimum", redops, "min"}, {"product", redops, "prod"}, {"mul", redops, "prod"},
		{"bcast", collectives, "broadcast"}, {"Bcast", collectives, "broadcast"},
		{"a2a", collectives, "alltoall"}, {"all2all", collectives, "alltoall"},
		{"mean", []string{"max", "min"}, "max"}, // no avg among the names: the nearest spelling
	} {
		if got := Closest(tc.in, tc.names); got != tc.want {
			t.Errorf("Closest(%q) among %v = %q, want %q", tc.in, tc.names, got, tc.want)
		}
	}
	if got, want := Hint("colective", []string{"collective", "module"}), `; did you mean "collective"?`; got != want {
		t.Errorf("Hint = %q, want %q", got, want)
	}
	if got := Hint("zzz", []string{"collective"}); got != "" {
		t.Errorf("Hint of no near name = %q, want none", got)
	}
}
