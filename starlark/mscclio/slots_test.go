package mscclio_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench"
	"kernbench/starlark/ccl"
	"kernbench/starlark/errkind"
)

// exchangeXML is a two-GPU in-place allgather in which each gpu's one
// thread block sends its cnt chunks to the other in one step, then
// receives the other's cnt chunks: the shape of msccl-tools'
// allreduce_1step and allreduce_a100_allpairs at 16 GPUs (a step of 16
// chunks to every peer before any receive).
func exchangeXML(cnt int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<algo name=\"exchange\" proto=\"Simple\" nchannels=\"1\" nchunksperloop=\"%d\" ngpus=\"2\" coll=\"allgather\" inplace=\"1\">\n", 2*cnt)
	for g := range 2 {
		p := 1 - g
		fmt.Fprintf(&b, "  <gpu id=\"%d\" i_chunks=\"0\" o_chunks=\"%d\" s_chunks=\"0\">\n", g, 2*cnt)
		fmt.Fprintf(&b, "    <tb id=\"0\" send=\"%d\" recv=\"%d\" chan=\"0\">\n", p, p)
		fmt.Fprintf(&b, "      <step s=\"0\" type=\"s\" srcbuf=\"o\" srcoff=\"%d\" dstbuf=\"o\" dstoff=\"%d\" cnt=\"%d\" depid=\"-1\" deps=\"-1\" hasdep=\"0\" />\n", g*cnt, g*cnt, cnt)
		fmt.Fprintf(&b, "      <step s=\"1\" type=\"r\" srcbuf=\"o\" srcoff=\"%d\" dstbuf=\"o\" dstoff=\"%d\" cnt=\"%d\" depid=\"-1\" deps=\"-1\" hasdep=\"0\" />\n", p*cnt, p*cnt, cnt)
		b.WriteString("    </tb>\n  </gpu>\n")
	}
	b.WriteString("</algo>\n")
	return b.String()
}

// A schedule whose steps move more chunks than a ring of the default
// n_slots holds runs with rings as deep as it needs, and the report says
// why; an n_slots the user gave is kept, and a run that stalls on it says
// what the schedule needs.
func TestMSCCLSlotsChosen(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		cnt    int
		sets   []string
		nSlots int // the report's (0: not chosen)
		why    string
		err    string // a deadlock message's tail
	}{
		{cnt: 16, nSlots: 16, why: "chosen: gpu 0 tb 0 step 0 (s, FILE:4) moves 16 chunks, a slot each per loop iteration, more than a ring of the default 8 slots holds"},
		{cnt: 8},
		{cnt: 12, sets: []string{"defaults.n_slots=12"}},
		{cnt: 16, sets: []string{"defaults.n_slots=8"},
			err: "; the schedule needs n_slots >= 16 (gpu 0 tb 0 step 0 (s, FILE:4) moves 16 chunks, a slot each per loop iteration, and n_slots is 8): --set defaults.n_slots=16"},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("cnt%d%v", c.cnt, c.sets), func(t *testing.T) {
			file := filepath.Join(dir, fmt.Sprintf("exchange%d.xml", c.cnt))
			if err := os.WriteFile(file, []byte(exchangeXML(c.cnt)), 0o644); err != nil {
				t.Fatal(err)
			}
			// Chunks of 128 KiB: several loop iterations.
			o := ccl.Options{Counts: []int64{int64(c.cnt) << 15}, Sets: c.sets}
			if c.err != "" {
				o.Verify, o.Embedded = true, kernbench.Files
				_, err := ccl.Run(file, o)
				if errkind.Of(err) != errkind.Deadlock || !strings.Contains(err.Error(), strings.ReplaceAll(c.err, "FILE", file)) {
					t.Fatalf("run: %v (kind %v); want a deadlock ending %q", err, errkind.Of(err), c.err)
				}
				return
			}
			rep := runVerified(t, file, o)
			checkCorrect(t, rep)
			got := [2]any{rep.NSlots, rep.NSlotsWhy}
			want := [2]any{c.nSlots, strings.ReplaceAll(c.why, "FILE", file)}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("n_slots, n_slots_why (-want +got):\n%s", diff)
			}
		})
	}
}
