package ccl

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	kernbench "kernbench"
)

// Rule (diagnostics: KERNBENCH_CCL_TRACE=1 prints every send and recv as
// t=… rank=… op=… dir=… nbytes=… seq=…): the lines of a run on several
// SIPs are one per send and one per recv, in time order: the partitions
// take turns by window, and without the merge a window's lines of SIP 0
// came before earlier ones of SIP 1 (239 of 64,512 lines of a 64-rank
// ring on 2 SIPs at 256 KiB).
func TestCCLTraceLinesInTimeOrder(t *testing.T) {
	var trace bytes.Buffer
	rep, err := Run("algorithms/ring_allreduce.star", Options{Embedded: kernbench.Files, WorldSize: 64,
		Sizes: []int64{64 << 10}, Sets: []string{"system.sips=2"}, Verify: true, CCLTrace: &trace})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(trace.String(), "\n"), "\n")
	if sends := rep.Results[0].Ops.Send; int64(len(lines)) != 2*sends || sends == 0 {
		t.Fatalf("%d trace lines for %d sends, want a line per send and one per recv", len(lines), sends)
	}
	prev := -1.0
	for i, l := range lines {
		at, _, ok := strings.Cut(strings.TrimPrefix(l, "t="), "ns ")
		ns, err := strconv.ParseFloat(at, 64)
		if !ok || err != nil || !strings.HasPrefix(l, "t=") {
			t.Fatalf("line %d %q: want t=<time>ns ...", i+1, l)
		}
		if ns < prev {
			t.Fatalf("line %d %q comes after a line at %gns", i+1, l, prev)
		}
		prev = ns
	}
}
