package msccl

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// resultXML writes a two-gpu schedule of coll whose steps are gpu 0's
// and gpu 1's lines (each gpu one thread block sending to and receiving
// from the other).
func resultXML(coll string, chunks, ins, outs int, gpu0, gpu1 []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<algo name=\"t\" nchannels=\"1\" nchunksperloop=\"%d\" ngpus=\"2\" coll=\"%s\" inplace=\"0\">\n", chunks, coll)
	for g, steps := range [][]string{gpu0, gpu1} {
		fmt.Fprintf(&b, "  <gpu id=\"%d\" i_chunks=\"%d\" o_chunks=\"%d\" s_chunks=\"0\">\n", g, ins, outs)
		fmt.Fprintf(&b, "    <tb id=\"0\" send=\"%d\" recv=\"%d\" chan=\"0\">\n", 1-g, 1-g)
		for s, st := range steps {
			f := strings.Fields(st) // type src srcoff dst dstoff
			fmt.Fprintf(&b, "      <step s=\"%d\" type=\"%s\" srcbuf=\"%s\" srcoff=\"%s\" dstbuf=\"%s\" dstoff=\"%s\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\" />\n", s, f[0], f[1], f[2], f[3], f[4])
		}
		b.WriteString("    </tb>\n  </gpu>\n")
	}
	b.WriteString("</algo>\n")
	return b.String()
}

// Rule (docs/msccl.md, Checking a schedule): check works out what every
// output chunk ends holding and names each gpu whose result is wrong, at
// its <gpu> line, with its first wrong chunk.
func TestCheckResult(t *testing.T) {
	gather := []string{"s i 0 o 0", "r o 0 o 1", "cpy i 0 o 0"}
	gather1 := []string{"s i 0 o 0", "r o 0 o 0", "cpy i 0 o 1"}
	reduce := []string{"s i 0 o 0", "rrc i 0 o 0"}
	tests := []struct {
		name       string
		coll       string
		chunks     int
		ins, outs  int
		gpu0, gpu1 []string
		want       string
	}{
		{name: "allgather", coll: "allgather", chunks: 2, ins: 1, outs: 2, gpu0: gather, gpu1: gather1},
		{name: "own chunk never copied", coll: "allgather", chunks: 2, ins: 1, outs: 2,
			gpu0: []string{"s i 0 o 0", "r o 0 o 1", "nop i 0 o 0"}, gpu1: gather1,
			want: "t.xml:2: gpu 0's output chunk 0 is never written; allgather wants rank 0's input chunk 0 there"},
		{name: "received into the wrong chunk", coll: "allgather", chunks: 2, ins: 1, outs: 2,
			gpu0: gather, gpu1: []string{"s i 0 o 0", "r o 0 o 1", "cpy i 0 o 0"},
			want: "t.xml:9: gpu 1's output chunk 0 ends holding rank 1's input chunk 0; allgather wants rank 0's input chunk 0 (and 1 more of its output chunks are wrong)"},
		{name: "allreduce", coll: "allreduce", chunks: 1, ins: 1, outs: 1, gpu0: reduce, gpu1: reduce},
		{name: "a rank left out", coll: "allreduce", chunks: 1, ins: 1, outs: 1,
			gpu0: reduce, gpu1: []string{"s i 0 o 0", "r i 0 o 0"},
			want: "t.xml:8: gpu 1's output chunk 0 ends holding rank 0's input chunk 0; allreduce wants the reduction of input chunk 0 over all 2 ranks"},
		{name: "a rank counted twice", coll: "allreduce", chunks: 1, ins: 1, outs: 1,
			gpu0: reduce, gpu1: []string{"s i 0 o 0", "rrc i 0 o 0", "re i 0 o 0"},
			want: "t.xml:8: gpu 1's output chunk 0 ends holding the reduction of input chunk 0 over all 2 ranks, rank 1's counted more than once; allreduce wants the reduction of input chunk 0 over all 2 ranks"},
		{name: "sent before written", coll: "allreduce", chunks: 1, ins: 1, outs: 1,
			gpu0: []string{"s o 0 o 0", "rrc i 0 o 0"}, gpu1: reduce,
			want: "t.xml:8: gpu 1's output chunk 0 ends holding data no step wrote; allreduce wants the reduction of input chunk 0 over all 2 ranks"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := Parse("t.xml", []byte(resultXML(tc.coll, tc.chunks, tc.ins, tc.outs, tc.gpu0, tc.gpu1)))
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if err := a.CheckResult(nil, 0); err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("CheckResult (-want +got):\n%s", diff)
			}
		})
	}
}

// Combining different input chunks is named as such, with the chunks and
// ranks combined; a rank counted more than once is named (as MSCCLang's
// check lists a reduction's chunks, a rank twice); and rank lists fold
// runs into ranges.
func TestContentDescribe(t *testing.T) {
	one := func(r int) ranks { return ranks{1 << r} }
	in := func(idx, r int) content { return content{idx: idx, from: one(r)} }
	mixed := combine(in(0, 0), in(1, 1))
	mixed3 := combine(combine(in(3, 2), in(2, 0)), combine(in(3, 1), in(5, 1)))
	partial := combine(combine(in(2, 0), in(2, 1)), in(2, 3))
	all01 := combine(in(0, 0), in(0, 1))
	twice := combine(all01, in(0, 1))
	twice2 := combine(combine(twice, in(0, 0)), in(0, 2))
	thrice := combine(twice, in(0, 1))
	got := []string{mixed.describe(4), mixed3.describe(4), partial.describe(4), twice.describe(2), twice2.describe(3), thrice.describe(2)}
	want := []string{
		"a combination of different input chunks (0-1) of ranks 0-1",
		"a combination of different input chunks (2-3, 5) of ranks 0-2",
		"the reduction of input chunk 2 over ranks 0-1, 3 only",
		"the reduction of input chunk 0 over all 2 ranks, rank 1's counted more than once",
		"the reduction of input chunk 0 over all 3 ranks, ranks 0-1 counted more than once",
		"the reduction of input chunk 0 over all 2 ranks, rank 1's counted more than once",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
