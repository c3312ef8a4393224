// Package trace writes a simulation's timeline as Chrome Trace Event JSON
// (opens in ui.perfetto.dev and chrome://tracing): one process per PE with a
// track per serial resource (the kernel, vc_compute, vc_comm, each rx
// ring), flow arrows from every send to its recv, credit counters per queue
// pair, and a "links" process with a busy counter per fabric link.
package trace

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"

	"kernbench/engine/sim"
)

// Track ids within a PE's process.
const (
	TidKernel    = 1
	TidVCCompute = 2
	TidVCComm    = 3
	tidRxBase    = 10
	// TidThreadStride separates the tracks of a kernel's tl.spawn
	// threads: thread i draws on TidKernel + i*TidThreadStride.
	TidThreadStride = 1000
)

// Event is one Chrome Trace Event.
type Event struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"`
	Dur  *float64       `json:"dur,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	ID   string         `json:"id,omitempty"`
	Bp   string         `json:"bp,omitempty"`
	S    string         `json:"s,omitempty"`
	Args map[string]any `json:"args,omitempty"`
}

// Recorder collects events during a run. The zero value is not usable;
// call New.
type Recorder struct {
	events  []Event
	names   map[[2]int]string // (pid, tid) -> thread name
	procs   map[int]string
	rxTids  map[string]int // "pid/dir" -> tid
	pending map[string]Event
	flows   int
}

// LinksPid is the process holding the link counters.
const LinksPid = 1_000_000

// New returns an empty recorder.
func New() *Recorder {
	return &Recorder{names: map[[2]int]string{}, procs: map[int]string{LinksPid: "links"}, rxTids: map[string]int{}, pending: map[string]Event{}}
}

func us(t sim.Time) float64 { return float64(t) / 1e6 }

// Process names a PE's process (pid = PE id + 1).
func (r *Recorder) Process(pid int, name string) { r.procs[pid] = name }

func (r *Recorder) thread(pid, tid int, name string) {
	if _, ok := r.names[[2]int{pid, tid}]; !ok {
		r.names[[2]int{pid, tid}] = name
	}
}

// Slice records a complete slice on a track (slices of one track must not
// overlap; callers trace serial resources only).
func (r *Recorder) Slice(pid, tid int, track, name string, start, end sim.Time, args map[string]any) {
	r.thread(pid, tid, track)
	d := us(end - start)
	r.events = append(r.events, Event{Name: name, Cat: track, Ph: "X", Ts: us(start), Dur: &d, Pid: pid, Tid: tid, Args: args})
}

// RxTid is the track of a PE's rx ring for a direction.
func (r *Recorder) RxTid(pid int, dir string) int {
	key := fmt.Sprintf("%d/%s", pid, dir)
	tid, ok := r.rxTids[key]
	if !ok {
		tid = tidRxBase + len(r.rxTids)
		r.rxTids[key] = tid
		r.thread(pid, tid, "rx "+dir)
	}
	return tid
}

// Instant records a point event on a track.
func (r *Recorder) Instant(pid, tid int, name string, at sim.Time, args map[string]any) {
	r.events = append(r.events, Event{Name: name, Ph: "i", S: "t", Ts: us(at), Pid: pid, Tid: tid, Args: args})
}

// Counter records a counter value of a process.
func (r *Recorder) Counter(pid int, name string, at sim.Time, value float64) {
	r.events = append(r.events, Event{Name: name, Ph: "C", Ts: us(at), Pid: pid, Args: map[string]any{"value": value}})
}

// FlowStart begins an arrow (a send) identified by key; only arrows whose
// end is recorded are written.
func (r *Recorder) FlowStart(key string, pid, tid int, at sim.Time) {
	r.pending[key] = Event{Name: "message", Cat: "ipcq", Ph: "s", Ts: us(at), Pid: pid, Tid: tid}
}

// FlowEnd ends the arrow started under key (a recv).
func (r *Recorder) FlowEnd(key string, pid, tid int, at sim.Time) {
	s, ok := r.pending[key]
	if !ok {
		return
	}
	delete(r.pending, key)
	r.flows++
	id := fmt.Sprint(r.flows)
	s.ID = id
	r.events = append(r.events, s, Event{Name: "message", Cat: "ipcq", Ph: "f", Bp: "e", Ts: us(at), Pid: pid, Tid: tid, ID: id})
}

// WriteJSON writes {"traceEvents": [...]} with metadata first and events in
// a deterministic order.
func (r *Recorder) WriteJSON(w io.Writer) error {
	var out []Event
	pids := make([]int, 0, len(r.procs))
	for pid := range r.procs {
		pids = append(pids, pid)
	}
	sort.Ints(pids)
	for _, pid := range pids {
		out = append(out, Event{Name: "process_name", Ph: "M", Pid: pid, Args: map[string]any{"name": r.procs[pid]}},
			Event{Name: "process_sort_index", Ph: "M", Pid: pid, Args: map[string]any{"sort_index": pid}})
	}
	keys := make([][2]int, 0, len(r.names))
	for k := range r.names {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	for _, k := range keys {
		out = append(out, Event{Name: "thread_name", Ph: "M", Pid: k[0], Tid: k[1], Args: map[string]any{"name": r.names[k]}})
	}
	out = append(out, r.events...)
	if _, err := io.WriteString(w, `{"displayTimeUnit": "ns", "traceEvents": [`+"\n"); err != nil {
		return err
	}
	for i, e := range out {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		sep := ",\n"
		if i == len(out)-1 {
			sep = "\n"
		}
		if _, err := w.Write(append(b, sep...)); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, "]}\n")
	return err
}

// Events returns the recorded events (for tests).
func (r *Recorder) Events() []Event { return r.events }
