package ccl

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench"
	"kernbench/engine/trace"
)

// traceSummary is which processes and event kinds (by phase and category)
// a trace holds.
func traceSummary(t *testing.T, b []byte) (pids []int, cats []string) {
	t.Helper()
	var doc struct{ TraceEvents []trace.Event }
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	seenP, seenC := map[int]bool{}, map[string]bool{}
	for _, e := range doc.TraceEvents {
		if e.Ph == "M" {
			continue
		}
		seenP[e.Pid] = true
		seenC[e.Ph+" "+e.Cat] = true
	}
	for p := range seenP {
		pids = append(pids, p)
	}
	for c := range seenC {
		cats = append(cats, c)
	}
	sort.Ints(pids)
	sort.Strings(cats)
	return pids, cats
}

// Issue 13 (8): --trace-ranks and --trace-kinds limit what a trace holds,
// and a trace of over a million events is announced on stderr.
func TestTraceFilter(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ranks    []int
		kinds    []string
		wantPids []int
		wantCats []string
	}{
		{"ranks 1 and 2, kernel and flows", []int{1, 2}, []string{"kernel", "flows"}, []int{2, 3},
			[]string{"X kernel", "f ipcq", "s ipcq"}},
		{"links only", nil, []string{"links"}, []int{trace.LinksPid}, []string{"C "}},
		{"one rank, every kind", []int{0}, nil, []int{1, trace.LinksPid},
			[]string{"C ", "X kernel", "X vc_comm", "X vc_compute", "i "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tr, stderr bytes.Buffer
			_, err := Run("ring_allreduce", Options{Embedded: kernbench.Files, WorldSize: 4, Counts: []int64{4096},
				Trace: &tr, TraceRanks: tc.ranks, TraceKinds: tc.kinds, Stderr: &stderr, MaxSteps: 1e8})
			if err != nil {
				t.Fatal(err)
			}
			pids, cats := traceSummary(t, tr.Bytes())
			if diff := cmp.Diff(tc.wantPids, pids); diff != "" {
				t.Errorf("processes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantCats, cats); diff != "" {
				t.Errorf("event kinds (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("many events", func(t *testing.T) {
		defer func(n int) { manyTraceEvents = n }(manyTraceEvents)
		manyTraceEvents = 10
		var tr, stderr bytes.Buffer
		if _, err := Run("ring_allreduce", Options{Embedded: kernbench.Files, WorldSize: 2, Counts: []int64{64}, Trace: &tr, Stderr: &stderr, MaxSteps: 1e8}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(stderr.String(), "events (over a million; a viewer may be slow to open it): --trace-ranks LIST and --trace-kinds LIST keep fewer") {
			t.Errorf("stderr = %q, want the large-trace warning", stderr.String())
		}
	})
}
