package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/starlark/script"
)

// suggestedSet matches one setting an out-of-memory error names: the
// --set item, and the user's item it replaces.
var suggestedSet = regexp.MustCompile(`--set (\S+=[^\s,;]+)(?: \(in place of --set ([^)]+)\))?`)

// Rule (docs/ccl-author-guide.md, "When the rx rings or staging slots do not fit"):
// every setting the error of a run short of rx-ring or staging memory
// names is one with which the same run completes. Each case's error is
// read, and every setting it names is run in place of the user's own.
func TestSuggestedMemoryFixesRun(t *testing.T) {
	dir := t.TempDir()
	// A fused primitive on a rank whose kernel holds most of TCM: its
	// staging slots do not fit (exit 4).
	full := `def kernel(sendbuf, recvbuf, rank, world_size, tl):
    if rank == 0:
        tl.send("E", sendbuf)
        tl.recv_copy("W", recvbuf)
        return
    hog = tl.alloc(236 * 1024, "f32")  # 944 KiB of the 1 MiB TCM
    tl.recv_reduce_copy_send("W", sendbuf, recvbuf, "E")
`
	// The same kernel forwarding with tl.send: the code change the message
	// names besides the settings.
	forward := strings.Replace(full, `tl.recv_reduce_copy_send("W", sendbuf, recvbuf, "E")`,
		`tl.recv_reduce_copy("W", sendbuf, recvbuf)
    tl.send("E", recvbuf)`, 1)
	// An entry that sets n_slots itself: the hint names the entry's key,
	// which wins over defaults.
	yaml := `algorithms:
  deep_ring:
    module: ring.star
    n_slots: 64
    slot_size: 32K
`
	ring, err := os.ReadFile("../../algorithms/ring_allreduce.star")
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"full.star": full, "forward.star": forward, "ccl.yaml": yaml, "ring.star": string(ring)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	big := []string{"--set", "defaults.n_slots=64", "--set", "defaults.slot_size=32K"}
	for _, tc := range []struct {
		name string
		args []string
		exit int
		keys []string // the settings the error must name, in order
	}{
		{"ring rings", append([]string{"run", "ring_allreduce", "--bytes", "64K"}, big...), 2, []string{"defaults.n_slots", "defaults.slot_size"}},
		{"mesh rings", append([]string{"run", "mesh_allreduce", "--bytes", "64K"}, big...), 2, []string{"defaults.buffer_kind", "defaults.n_slots", "defaults.slot_size"}},
		{"alltoall rings", append([]string{"run", "alltoall", "--bytes", "64K"}, big...), 2, []string{"defaults.buffer_kind", "defaults.n_slots", "defaults.slot_size"}},
		{"channels", []string{"run", "ring_allreduce", "--bytes", "64K", "--set", "defaults.channels=4", "--set", "defaults.n_slots=64"}, 2,
			[]string{"defaults.buffer_kind", "defaults.n_slots", "defaults.slot_size", "defaults.channels"}},
		{"staging", []string{"run", "full.star", "--world-size", "2", "--count", "1024"}, 4, []string{"defaults.buffer_kind", "defaults.n_slots", "defaults.slot_size"}},
		{"staging rings in hbm", []string{"run", "full.star", "--world-size", "2", "--count", "1024", "--set", "defaults.buffer_kind=hbm", "--set", "system.memory.tcm.capacity=960K"}, 4,
			[]string{"defaults.slot_size"}},
		{"entry sets n_slots", []string{"run", "deep_ring", "--config", "ccl.yaml", "--bytes", "64K"}, 2, []string{"algorithms.deep_ring.n_slots", "algorithms.deep_ring.slot_size"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := script.Env{Dir: dir, Getenv: func(string) string { return "" }}
			var stdout, stderr bytes.Buffer
			if got := mainTest(env, append(tc.args, "-q"), &stdout, &stderr); got != tc.exit {
				t.Fatalf("kernbench %s: exit %d, want %d\n%s", strings.Join(tc.args, " "), got, tc.exit, stderr.String())
			}
			fixes := suggestedSet.FindAllStringSubmatch(stderr.String(), -1)
			var keys []string
			for _, m := range fixes {
				key, _, _ := strings.Cut(m[1], "=")
				keys = append(keys, key)
			}
			if diff := cmp.Diff(tc.keys, keys); diff != "" {
				t.Fatalf("settings named (-want +got):\n%s\nstderr:\n%s", diff, stderr.String())
			}
			for _, m := range fixes {
				args := slices.Clone(tc.args)
				if replaced := m[2]; replaced != "" {
					i := slices.Index(args, replaced)
					if i < 1 || args[i-1] != "--set" {
						t.Fatalf("%q replaces --set %s, which the command does not give", m[0], replaced)
					}
					args = slices.Delete(args, i-1, i+1)
				}
				args = append(args, "--set", m[1], "-q")
				var out, errOut bytes.Buffer
				if got := mainTest(env, args, &out, &errOut); got != 0 {
					t.Errorf("suggested %s: kernbench %s: exit %d\n%s", m[1], strings.Join(args, " "), got, errOut.String())
				}
			}
		})
	}
	// The code change: forwarding with tl.send needs no staging slots.
	env := script.Env{Dir: dir, Getenv: func(string) string { return "" }}
	var stdout, stderr bytes.Buffer
	if got := mainTest(env, []string{"run", "forward.star", "--world-size", "2", "--count", "1024", "-q"}, &stdout, &stderr); got != 0 {
		t.Errorf("forward.star: exit %d\n%s", got, stderr.String())
	}
}
