package ccl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"kernbench"
)

type traceDoc struct {
	TraceEvents []struct {
		Name string         `json:"name"`
		Ph   string         `json:"ph"`
		Ts   float64        `json:"ts"`
		Dur  float64        `json:"dur"`
		Pid  int            `json:"pid"`
		Tid  int            `json:"tid"`
		ID   string         `json:"id"`
		Args map[string]any `json:"args"`
	} `json:"traceEvents"`
}

// The trace (--trace) is well-formed JSON; slices on one track
// never overlap; every flow has both ends; tracks and processes are named.
func TestTraceIsValid(t *testing.T) {
	for _, tc := range []struct {
		algo  string
		world int
	}{{"ring_allreduce", 4}, {"tree_allreduce", 5}, {"rd_allreduce", 4}} {
		t.Run(tc.algo, func(t *testing.T) {
			var buf bytes.Buffer
			rep, err := Run(tc.algo, Options{Embedded: kernbench.Files, WorldSize: tc.world, Counts: []int64{3000}, Trace: &buf})
			if err != nil {
				t.Fatal(err)
			}
			var doc traceDoc
			if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
				t.Fatalf("trace is not valid JSON: %v", err)
			}
			type span struct{ start, end float64 }
			tracks := map[[2]int][]span{}
			names := map[[2]int]string{}
			procs := map[int]string{}
			starts, ends := map[string]int{}, map[string]int{}
			counts := map[string]int{}
			for _, e := range doc.TraceEvents {
				counts[e.Ph]++
				switch e.Ph {
				case "X":
					tracks[[2]int{e.Pid, e.Tid}] = append(tracks[[2]int{e.Pid, e.Tid}], span{e.Ts, e.Ts + e.Dur})
				case "M":
					if e.Name == "thread_name" {
						names[[2]int{e.Pid, e.Tid}] = e.Args["name"].(string)
					} else if e.Name == "process_name" {
						procs[e.Pid] = e.Args["name"].(string)
					}
				case "s":
					starts[e.ID]++
				case "f":
					ends[e.ID]++
				}
			}
			for k, spans := range tracks {
				if names[k] == "" {
					t.Errorf("track %v has no thread_name", k)
				}
				sort.Slice(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
				for i := 1; i < len(spans); i++ {
					if spans[i].start < spans[i-1].end-1e-9 {
						t.Errorf("track %v (%s): slices overlap: %v and %v", k, names[k], spans[i-1], spans[i])
						break
					}
				}
			}
			for id := range starts {
				if starts[id] != 1 || ends[id] != 1 {
					t.Errorf("flow %s has %d start(s) and %d end(s)", id, starts[id], ends[id])
				}
			}
			if len(starts) != len(ends) {
				t.Errorf("%d flow starts, %d flow ends", len(starts), len(ends))
			}
			if int64(len(starts)) != rep.Results[0].Ops.Recv {
				t.Errorf("%d flows for %d receives", len(starts), rep.Results[0].Ops.Recv)
			}
			for r := 0; r < tc.world; r++ {
				found := false
				for _, n := range procs {
					found = found || len(n) > 5 && n[:5+len(fmt.Sprint(r))] == fmt.Sprintf("rank %d", r)
				}
				if !found {
					t.Errorf("no process named for rank %d: %v", r, procs)
				}
			}
			if procs[1_000_000] != "links" || counts["C"] == 0 {
				t.Errorf("links process %q, %d counter events", procs[1_000_000], counts["C"])
			}
		})
	}
}

// L3 host and L2 orchestrator region and queue operations appear on their
// own tracks (issue: L3-L2 trace), without overlapping slices.
func TestTraceShowsL3L2Operations(t *testing.T) {
	for _, bench := range []string{"benches/l3l2_stream.star", "benches/l3l2_queue.star"} {
		var buf bytes.Buffer
		if _, err := Run(bench, Options{Embedded: kernbench.Files, Trace: &buf}); err != nil {
			t.Fatalf("%s: %v", bench, err)
		}
		var doc traceDoc
		if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
			t.Fatalf("%s: trace is not valid JSON: %v", bench, err)
		}
		tracks := map[string]int{}
		last := map[[2]int]float64{}
		for _, e := range doc.TraceEvents {
			if e.Ph == "M" && e.Name == "thread_name" {
				tracks[e.Args["name"].(string)]++
			}
			if e.Ph == "X" {
				k := [2]int{e.Pid, e.Tid}
				if e.Ts < last[k]-1e-9 {
					t.Errorf("%s: overlapping slices on track %v at %v", bench, k, e.Ts)
				}
				last[k] = e.Ts + e.Dur
			}
		}
		if tracks["l3 host"] == 0 || tracks["l2 orchestrator"] == 0 {
			t.Errorf("%s: tracks %v lack l3 host / l2 orchestrator", bench, tracks)
		}
	}
}

// The kernel track of the rank that ends last ends at the run's time: the
// wait for what a kernel leaves under way when its function returns (the
// last stores landing in memory) is a "return" slice, so the timeline
// accounts for the time the report prints.
func TestTraceKernelTracksEndAtRunTime(t *testing.T) {
	for _, tc := range []struct {
		algo  string
		world int
		count int64
	}{{"ring_allreduce", 8, 65536}, {"ring_allreduce", 4, 3000}, {"tree_allreduce", 5, 3000}, {"ring_allreduce_bidir", 4, 3000}} {
		t.Run(fmt.Sprintf("%s/%d/%d", tc.algo, tc.world, tc.count), func(t *testing.T) {
			var buf bytes.Buffer
			rep, err := Run(tc.algo, Options{Embedded: kernbench.Files, WorldSize: tc.world, Counts: []int64{tc.count}, Trace: &buf})
			if err != nil {
				t.Fatal(err)
			}
			var doc traceDoc
			if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
				t.Fatal(err)
			}
			end, returns := 0.0, 0
			for _, e := range doc.TraceEvents {
				if e.Ph == "X" && e.Tid == 1 && e.Pid >= 1 && e.Pid <= tc.world {
					end = max(end, e.Ts+e.Dur)
					if e.Name == "return" {
						returns++
					}
				}
			}
			want := rep.Results[0].SimTimeNs / 1000
			if d := end - want; d > 1e-9 || d < -1e-9 {
				t.Errorf("the kernel tracks end at %.6f us, the run took %.6f us (%d return slices)", end, want, returns)
			}
		})
	}
}

// A viewer reads the trace in time order (Perfetto sorts its events by
// ts before binding arrows and reading counters), so the trace must make
// sense read that way: an arrow's end is never before its start (Perfetto
// drops such an arrow: its end comes with no start), and a link's busy
// counter, read in time order with its events at one instant in file
// order, goes 1, 0, 1, 0: a transfer booked later but running earlier,
// ending at the instant the next starts, does not leave the link idle
// while it is busy. Both showed at a tree's and a bidirectional ring's
// 64 KiB, on one SIP and on two (a merged trace).
func TestTraceReadsInTimeOrder(t *testing.T) {
	for _, tc := range []struct {
		algo  string
		world int
		sets  []string
	}{
		{"tree_allreduce", 16, nil},
		{"ring_allreduce_bidir", 24, nil},
		{"ring_allreduce", 16, nil},
		{"ring_allreduce_bidir", 40, []string{"system.sips=2"}},
	} {
		t.Run(fmt.Sprintf("%s/%d/%v", tc.algo, tc.world, tc.sets), func(t *testing.T) {
			var buf bytes.Buffer
			if _, err := Run(tc.algo, Options{Embedded: kernbench.Files, WorldSize: tc.world, Sets: tc.sets, Counts: []int64{16384}, Trace: &buf}); err != nil {
				t.Fatal(err)
			}
			var doc traceDoc
			if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
				t.Fatal(err)
			}
			type sample struct {
				ts    float64
				value float64
			}
			starts := map[string]float64{}
			links := map[string][]sample{}
			backward := 0
			for _, e := range doc.TraceEvents {
				switch {
				case e.Ph == "s":
					starts[e.ID] = e.Ts
				case e.Ph == "f":
					if s, ok := starts[e.ID]; !ok || e.Ts < s {
						if backward == 0 {
							t.Errorf("flow %s ends at %v us, before its start at %v us", e.ID, e.Ts, s)
						}
						backward++
					}
				case e.Ph == "C" && e.Pid == 1_000_000:
					links[e.Name] = append(links[e.Name], sample{e.Ts, e.Args["value"].(float64)})
				}
			}
			if backward > 0 {
				t.Errorf("%d flows end before they start", backward)
			}
			names := make([]string, 0, len(links))
			for n := range links {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				l := links[n]
				sort.SliceStable(l, func(i, j int) bool { return l[i].ts < l[j].ts })
				for i, s := range l {
					if want := float64(1 - i%2); s.value != want {
						t.Errorf("link %s: busy counter %v at %v us, want %v (read in time order)", n, s.value, s.ts, want)
						break
					}
				}
			}
		})
	}
}

// Every link that carried data has its busy counter in the trace: a link
// made after the trace was enabled (the UCIe links, made at their first
// route) had none, so a 16-rank ring's bottleneck was missing from it.
func TestTraceCountsEveryLinkUsed(t *testing.T) {
	for _, tc := range []struct {
		algo  string
		world int
	}{{"ring_allreduce", 16}, {"tree_allreduce", 16}, {"ring_allreduce", 4}} {
		t.Run(fmt.Sprintf("%s/%d", tc.algo, tc.world), func(t *testing.T) {
			var buf bytes.Buffer
			rep, err := Run(tc.algo, Options{Embedded: kernbench.Files, WorldSize: tc.world, Counts: []int64{4096}, Trace: &buf, Detail: true})
			if err != nil {
				t.Fatal(err)
			}
			var doc traceDoc
			if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
				t.Fatal(err)
			}
			counted := map[string]bool{}
			for _, e := range doc.TraceEvents {
				if e.Ph == "C" && e.Pid == 1_000_000 {
					counted[e.Name] = true
				}
			}
			for _, u := range rep.Results[0].Busiest {
				if link := !strings.HasPrefix(u.Resource, "math ") && !strings.HasPrefix(u.Resource, "tcm ") &&
					!strings.HasPrefix(u.Resource, "hbm ") && !strings.HasPrefix(u.Resource, "sram "); link && !counted[u.Resource] {
					t.Errorf("link %s carried %d bytes and has no busy counter in the trace", u.Resource, u.Bytes)
				}
			}
		})
	}
}
