// Package trace writes a simulation's timeline as Chrome Trace Event JSON
// (opens in ui.perfetto.dev and chrome://tracing): one process per PE with a
// track per serial resource (the kernel, vc_compute, vc_comm, each rx
// ring), flow arrows from every send to its recv, credit counters per queue
// pair, and a "links" process with a busy counter per fabric link.
package trace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
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
	rxNames map[[2]int]string
	pending map[string]Event
	flows   int

	// Filter (Only): nil keeps everything.
	pids    map[int]bool    // PE processes kept (the links process is a kind)
	kinds   map[string]bool // kinds kept
	dropped int             // events not recorded because of the filter
	// A partition's recorder (Split): clock is its partition's time,
	// when the time each event was recorded at, and ends the arrows'
	// ends, each at the index of its event (a placeholder) in events:
	// their starts may be another partition's (Merge pairs them).
	clock func() sim.Time
	when  []sim.Time
	ends  map[int]flowEnd
}

// Kinds are the event kinds --trace-kinds selects: kernel (kernel and
// thread slices), dma (vc_compute and vc_comm slices), rx (deliveries into
// rx rings), flows (send → recv arrows), credits (queue-pair credit
// counters), links (link busy counters), l3l2 (L3 and L2 region
// operations).
func Kinds() []string { return slices.Clone(kinds) }

var kinds = []string{"kernel", "dma", "rx", "flows", "credits", "links", "l3l2"}

// Only limits the recording to the PE processes pids (nil: all; pid = PE
// id + 1) and the kinds named (nil: all; see Kinds). Filtering while
// recording keeps a large run's trace, and its memory, small.
func (r *Recorder) Only(pids []int, kinds []string) {
	if pids != nil {
		r.pids = make(map[int]bool, len(pids))
		for _, p := range pids {
			r.pids[p] = true
		}
	}
	if kinds != nil {
		r.kinds = make(map[string]bool, len(kinds))
		for _, k := range kinds {
			r.kinds[k] = true
		}
	}
}

// keep reports whether an event of kind on process pid is recorded.
func (r *Recorder) keep(pid int, kind string) bool {
	ok := (r.kinds == nil || r.kinds[kind]) && (r.pids == nil || pid == LinksPid || r.pids[pid])
	if !ok {
		r.dropped++
	}
	return ok
}

// Len is the number of events recorded (metadata not included).
func (r *Recorder) Len() int { return len(r.events) }

// Dropped is the number of events the filter (Only) left out.
func (r *Recorder) Dropped() int { return r.dropped }

// LinksPid is the process holding the link counters.
const LinksPid = 1_000_000

// New returns an empty recorder.
func New() *Recorder {
	return &Recorder{names: map[[2]int]string{}, procs: map[int]string{LinksPid: "links"}, rxTids: map[string]int{}, rxNames: map[[2]int]string{}, pending: map[string]Event{}}
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
	if !r.keep(pid, sliceKind(track)) {
		return
	}
	r.thread(pid, tid, track)
	d := us(end - start)
	r.events = append(r.events, Event{Name: name, Cat: track, Ph: "X", Ts: us(start), Dur: &d, Pid: pid, Tid: tid, Args: args})
	r.stamp()
}

// sliceKind is the kind of a slice on track.
func sliceKind(track string) string {
	switch track {
	case "vc_compute", "vc_comm":
		return "dma"
	case "l3 host", "l2 orchestrator":
		return "l3l2"
	}
	return "kernel"
}

// RxTid is the track of a PE's rx ring for a direction.
func (r *Recorder) RxTid(pid int, dir string) int {
	key := fmt.Sprintf("%d/%s", pid, dir)
	tid, ok := r.rxTids[key]
	if !ok {
		tid = tidRxBase + len(r.rxTids)
		r.rxTids[key] = tid
		r.rxNames[[2]int{pid, tid}] = "rx " + dir // named when an event is kept
	}
	return tid
}

// Instant records a point event on a track.
func (r *Recorder) Instant(pid, tid int, name string, at sim.Time, args map[string]any) {
	if !r.keep(pid, "rx") {
		return
	}
	if name, ok := r.rxNames[[2]int{pid, tid}]; ok {
		r.thread(pid, tid, name)
	}
	r.events = append(r.events, Event{Name: name, Ph: "i", S: "t", Ts: us(at), Pid: pid, Tid: tid, Args: args})
	r.stamp()
}

// Counter records a counter value of a process.
func (r *Recorder) Counter(pid int, name string, at sim.Time, value float64) {
	kind := "credits"
	if pid == LinksPid {
		kind = "links"
	}
	if !r.keep(pid, kind) {
		return
	}
	r.events = append(r.events, Event{Name: name, Ph: "C", Ts: us(at), Pid: pid, Args: map[string]any{"value": value}})
	r.stamp()
}

// FlowStart begins an arrow (a send) identified by key; only arrows whose
// end is recorded are written.
func (r *Recorder) FlowStart(key string, pid, tid int, at sim.Time) {
	if !r.keep(pid, "flows") {
		return
	}
	r.pending[key] = Event{Name: "message", Cat: "ipcq", Ph: "s", Ts: us(at), Pid: pid, Tid: tid}
}

// FlowEnd ends the arrow started under key (a recv).
func (r *Recorder) FlowEnd(key string, pid, tid int, at sim.Time) {
	if r.clock != nil {
		r.splitFlowEnd(key, pid, tid, at)
		return
	}
	s, ok := r.pending[key]
	if !ok {
		return
	}
	if !r.keep(pid, "flows") {
		delete(r.pending, key)
		return
	}
	delete(r.pending, key)
	r.flows++
	id := fmt.Sprint(r.flows)
	s.ID = id
	r.events = append(r.events, s, Event{Name: "message", Cat: "ipcq", Ph: "f", Bp: "e", Ts: flowEndTs(s.Ts, us(at)), Pid: pid, Tid: tid, ID: id})
}

// flowEndTs is where an arrow's end goes: at the start of the receive's
// slice (end), or at the send's start (start) when the receive was
// waiting before the message was sent. Its slice encloses both, and a
// viewer that reads events in time order (Perfetto) drops an arrow whose
// end comes before its start.
func flowEndTs(start, end float64) float64 { return max(start, end) }

// WriteJSON writes {"traceEvents": [...]} with metadata first and events in
// a deterministic order.
func (r *Recorder) WriteJSON(w io.Writer) error {
	var out []Event
	pids := make([]int, 0, len(r.procs))
	for pid := range r.procs {
		if pid == LinksPid && r.kinds != nil && !r.kinds["links"] || pid != LinksPid && r.pids != nil && !r.pids[pid] {
			continue // filtered out (Only)
		}
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
	linksInTimeOrder(out)
	if _, err := io.WriteString(w, `{"displayTimeUnit": "ns", "traceEvents": [`+"\n"); err != nil {
		return err
	}
	// Names as written: "ucie c0->c1", not json.Marshal's "ucie c0-\u003ec1"
	// (the same JSON, but not what grep or a reader looks for).
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for i, e := range out {
		b.Reset()
		if err := enc.Encode(e); err != nil {
			return err
		}
		b.Truncate(b.Len() - 1) // Encode's newline
		sep := ",\n"
		if i == len(out)-1 {
			sep = "\n"
		}
		b.WriteString(sep)
		if _, err := w.Write(b.Bytes()); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, "]}\n")
	return err
}

// linksInTimeOrder puts each link's busy counter in time order, within
// the places its events hold in events. A link books its transfers in the
// order they are asked for, not the order they happen (a later transfer
// may fill a gap before an earlier one), so one transfer can end (0) at
// the instant the next starts (1) with the start recorded first; a viewer
// reading the two in that order shows the link idle while it is busy.
// At one instant the end comes first.
func linksInTimeOrder(events []Event) {
	at := map[string][]int{}
	var names []string
	for i, e := range events {
		if e.Ph == "C" && e.Pid == LinksPid {
			if _, ok := at[e.Name]; !ok {
				names = append(names, e.Name)
			}
			at[e.Name] = append(at[e.Name], i)
		}
	}
	value := func(e Event) float64 { v, _ := e.Args["value"].(float64); return v }
	for _, name := range names {
		idx := at[name]
		link := make([]Event, len(idx))
		for j, i := range idx {
			link[j] = events[i]
		}
		sort.SliceStable(link, func(a, b int) bool {
			if link[a].Ts != link[b].Ts {
				return link[a].Ts < link[b].Ts
			}
			return value(link[a]) < value(link[b])
		})
		for j, i := range idx {
			events[i] = link[j]
		}
	}
}

// Events returns the recorded events (for tests).
func (r *Recorder) Events() []Event { return r.events }
