// Package report holds what a run reports, and only that: the report and
// its rows (the shape of --json), failures with their kind and exit
// status, wrong-element ranges and their merging, resource use, where
// the time went, the faults a run met, a phase-2 diagnosis and the memory
// guard's refusals.
// starlark/ccl fills these types; cmd/kernbench renders them.
package report

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"kernbench/starlark/deadlock"
	"kernbench/starlark/hostmem"
	"maps"
	"slices"
	"sort"
	"strconv"

	"kernbench/engine/machine"
	"kernbench/engine/oplog"
	"kernbench/engine/sim"
	"kernbench/starlark/errkind"
)

// Report is the result of a run, shaped like `--json` output.
type Report struct {
	Algorithm  string `json:"algorithm"`
	File       string `json:"file"`
	Collective string `json:"collective"`
	Topology   string `json:"topology"`
	MeshShape  []int  `json:"mesh_shape,omitempty"` // mesh_2d: [rows, cols] in force
	Root       *int   `json:"root,omitempty"`       // broadcast and reduce: the root rank
	TimingOnly bool   `json:"timing_only,omitempty"`
	WorldSize  int    `json:"world_size"`
	BufferKind string `json:"buffer_kind"`
	// BufferKindWhy says why kernbench chose BufferKind: the configuration
	// leaves buffer_kind to it and the rx rings of an MSCCL schedule do not
	// fit where it says ("" when the configured value is in force).
	BufferKindWhy string `json:"buffer_kind_why,omitempty"`
	// Staging is the memory of the fused primitives' staging rings and
	// landing slots when kernbench moved them out of TCM (an MSCCL
	// schedule whose thread blocks need more than TCM holds), StagingWhy
	// why; both empty when they are in TCM.
	// NSlots is the rings' depth when kernbench chose it (an MSCCL
	// schedule that needs deeper rings than the default n_slots, which the
	// user left to it), NSlotsWhy why; both empty otherwise.
	NSlots     int    `json:"n_slots,omitempty"`
	NSlotsWhy  string `json:"n_slots_why,omitempty"`
	Staging    string `json:"staging,omitempty"`
	StagingWhy string `json:"staging_why,omitempty"`
	// ScheduleWrong lists, for an MSCCL schedule, the gpus whose output
	// chunks the schedule itself leaves wrong (worked out without running,
	// as kernbench check does): why the rows' data is wrong.
	ScheduleWrong []string `json:"schedule_wrong,omitempty"`
	// ScheduleRaces lists, for an MSCCL schedule, kernbench check's
	// races: steps of two thread blocks that touch a chunk with nothing
	// ordering them, or a step whose source and destination overlap
	// shifted. The run's rows hold for the order its timing gave, which a
	// GPU need not keep.
	ScheduleRaces []string `json:"schedule_races,omitempty"`
	Backpressure  string   `json:"backpressure"`
	DataSpace     string   `json:"data_space"`
	Results       []Result `json:"results"`
	// AvgBusBW is the mean busbw of the rows that ran, as the table's
	// "# avg busbw" line and nccl-tests' "Avg bus bandwidth": set by
	// NoteAvgBusBW when at least two rows ran.
	AvgBusBW float64   `json:"avg_busbw_gbps,omitempty"`
	WallS    float64   `json:"wall_s"`
	Error    *ErrorOut `json:"error,omitempty"`
	// Shard is set only in the report of one shard of a sweep (--shard
	// I/N): kernbench merge needs it to find a missing shard and a shard
	// of another run; the merged report, like one run's, has none.
	Shard *Shard `json:"shard,omitempty"`
}

// Shard places a shard's report in its sweep.
type Shard struct {
	Index int `json:"index"`
	Count int `json:"count"`
	// Sweep is the whole sweep the shards split: sizes in bytes, or
	// element counts with --count.
	Sweep []int64 `json:"sweep"`
	// Settings are the flags set that decide the rows and that the
	// report records nowhere else (--seed, --jitter-seed, --bench, ...),
	// as --name=value; Config is a digest of the configuration in force
	// (ccl.yaml, --config and --set laid over the default).
	Settings []string `json:"settings"`
	Config   string   `json:"config"`
	// Rows is a digest of the report's rows as the shard wrote them
	// (RowsDigest): merge refuses rows edited since.
	Rows string `json:"rows,omitempty"`
}

// RowsDigest identifies a report's rows (their JSON, which reads back
// into the same rows).
func RowsDigest(rows []Result) string {
	data, err := json.Marshal(rows)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// Result is one size's row.
type Result struct {
	Bytes       int64      `json:"bytes"`
	Count       int64      `json:"count"`
	DType       string     `json:"dtype"`
	RedOp       string     `json:"redop"`
	InPlace     bool       `json:"in_place"`
	SimTimeNs   float64    `json:"sim_time_ns"`
	AlgBW       float64    `json:"algbw_gbps"`
	BusBW       float64    `json:"busbw_gbps"`
	LinkBW      float64    `json:"link_bw_gbps"`
	Eff         float64    `json:"eff"`
	Wrong       int64      `json:"wrong"`
	Verified    bool       `json:"verified"`
	Phase2Match *bool      `json:"phase2_match"`
	FirstWrong  *WrongElem `json:"first_wrong,omitempty"`
	// WrongRanges are the wrong elements of each rank that has some.
	WrongRanges []RankWrong `json:"wrong_ranges,omitempty"`
	// SendWritten are the ranks whose kernel wrote into its sendbuf in
	// a wrong out-of-place run (the sendbuf is input only there): what
	// such a rank sent afterwards was not its input.
	SendWritten []int `json:"sendbuf_written,omitempty"`
	// Disconnected, in a wrong run or one whose data nothing checked
	// (--timing-only, --verify-data=false), says that its messages
	// joined the ranks only in groups, between which no data could move
	// (a ring kernel's E/W on a mesh go round each row): such a
	// collective cannot be right.
	Disconnected *Disconnected `json:"disconnected,omitempty"`
	Phase2       string        `json:"phase2_mismatch,omitempty"`
	// Phase2Diagnosis explains a mismatch of the builtin bench (runOnce).
	Phase2Diagnosis *Phase2Diagnosis `json:"phase2_diagnosis,omitempty"`
	// Mismatch is the phase-2 mismatch found, for its diagnosis (not
	// reported as such: Phase2 and Phase2Diagnosis are).
	Mismatch *oplog.Mismatch `json:"-"`
	Ops      OpCounts        `json:"ops"`
	Busiest  []Usage         `json:"busiest,omitempty"`
	// Faults are system.faults as the run met them (every run that has
	// faults: the report says which were active).
	Faults []FaultUse `json:"faults,omitempty"`
	// Unfinished is what an L3 orchestration left behind when main
	// returned (queued messages, regions never freed); an error under
	// Options.Strict.
	Unfinished []string `json:"unfinished,omitempty"`
	// Time is where the ranks' time went (per rank with -v).
	Time *TimeSummary `json:"time,omitempty"`
	// Classes sums the resources by kind (with -v): links (pe_noc,
	// ucie, pcie), memory ports (tcm, sram, hbm) and math units.
	Classes []ClassUsage `json:"resource_classes,omitempty"`
	// Interp is the interpreter work of the kernels (-v only).
	Interp *InterpCounts `json:"starlark,omitempty"`
	// HostMemory is the run's host memory estimate (-v only).
	HostMemory *hostmem.Estimate `json:"host_memory_estimate,omitempty"`
	// Counts are what the run's host memory grows with (a probe's; not
	// reported).
	Counts *hostmem.Counts `json:"-"`
	// OpLog is what the op_log cost in host memory (-v only).
	OpLog *OpLogCost `json:"oplog,omitempty"`
	// Outputs are the recv buffers after the run (Options.KeepOutputs).
	Outputs [][]byte `json:"-"`
	Events  uint64   `json:"events"`
	// Refused, when set, says the size did not run: the memory guard
	// refused it (Options.RefusedAsRows). Such a row has the size's
	// bytes, count, dtype, redop and in_place and no figures; its JSON
	// has only those and "refused".
	Refused *Refusal `json:"refused,omitempty"`
}

// Verdict is the row's failure, the one rule the CLI and the mock apply:
// a phase-2 mismatch (Phase2Mismatch, a kernbench bug or an unreported
// race) before wrong elements (WrongResult); nil when the row passed (or
// was not checked).
func (r *Result) Verdict() *Failure {
	switch {
	case r.Phase2Match != nil && !*r.Phase2Match:
		return WithKind(errkind.Phase2Mismatch, &Failure{Rank: -1, Msg: "phase 2 mismatch at " + strconv.FormatInt(r.Bytes, 10) + " bytes: " + r.Phase2})
	case r.Wrong > 0:
		return WithKind(errkind.WrongResult, &Failure{Rank: -1, Msg: "verification failed: " + strconv.FormatInt(r.Wrong, 10) + " wrong element(s) at " + strconv.FormatInt(r.Bytes, 10) + " bytes"})
	}
	return nil
}

// MarshalJSON writes a refused row without the figures it does not have
// (a busbw of 0 would read as measured), any other row as it is.
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result // without this method
	if r.Refused == nil {
		return MarshalUnescaped(plain(r))
	}
	return MarshalUnescaped(struct {
		Bytes   int64    `json:"bytes"`
		Count   int64    `json:"count"`
		DType   string   `json:"dtype"`
		RedOp   string   `json:"redop"`
		InPlace bool     `json:"in_place"`
		Refused *Refusal `json:"refused"`
	}{r.Bytes, r.Count, r.DType, r.RedOp, r.InPlace, r.Refused})
}

// MarshalUnescaped is json.Marshal without its HTML escaping, for the
// MarshalJSON methods of rows: json.Marshal would write a resource name
// such as "ucie c0->c1" as "ucie c0-\u003ec1", which the encoder of the
// whole document (SetEscapeHTML(false)) then keeps.
func MarshalUnescaped(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Usage is one resource's load over a run.
type Usage struct {
	Resource    string  `json:"resource"`
	Bytes       int64   `json:"bytes"`
	Utilisation float64 `json:"utilisation"`
}

// InterpCounts are the Starlark steps and tl builtin calls of all ranks'
// kernels and threads: what an interpreted kernel costs per message.
type InterpCounts struct {
	Steps        int64 `json:"steps"`
	BuiltinCalls int64 `json:"builtin_calls"`
}

// OpCounts are operation totals over ranks.
type OpCounts struct {
	Send  int64 `json:"send"`
	Recv  int64 `json:"recv"`
	Load  int64 `json:"load"`
	Store int64 `json:"store"`
	Math  int64 `json:"math"`
}

// WrongElem is the first element that differs from the reference.
type WrongElem struct {
	Rank  int    `json:"rank"`
	Index int    `json:"index"`
	Got   string `json:"got"`
	Want  string `json:"want"`
}

// Disconnected are the groups of ranks a run's messages joined, when
// there are several: a message joins its sender and receiver, and no
// message went from one group to another.
type Disconnected struct {
	// Groups are the ranks of each group, each sorted, by lowest rank.
	Groups [][]int `json:"groups"`
	// Used are the directions a message was sent or received on, Unused
	// the others installed on some rank (each sorted).
	Used   []string `json:"used"`
	Unused []string `json:"unused"`
}

// RankWrong are one rank's wrong elements as merged index ranges: at most
// MaxWrongRanges, More counts the ranges left out.
type RankWrong struct {
	Rank   int          `json:"rank"`
	Wrong  int          `json:"wrong"`
	Ranges []WrongRange `json:"ranges"`
	More   int          `json:"more_ranges,omitempty"`
}

// WrongRange is the element indices [Start, End) of a recv buffer that
// differ from the reference. Sentinel: every one of them still holds the
// value the out-of-place recvbuf was filled with (NaN for floats, 0xA5
// bytes for integers), i.e. the kernel never wrote them.
type WrongRange struct {
	Start    int  `json:"start"`
	End      int  `json:"end"`
	Sentinel bool `json:"sentinel,omitempty"`
}

// MaxWrongRanges bounds the ranges kept per rank (RankWrong.More counts the rest).
const MaxWrongRanges = 16

// WrongRanges merges the increasing wrong indices of one rank, given to
// Add, into its RankWrong: ranges of consecutive indices with the same
// sentinel state.
type WrongRanges struct {
	RankWrong
	IsSentinel func(i int) bool // nil: the buffer had no sentinel (in place)
	open       bool             // a run is under way (kept or only counted)
	end        int
	sentinel   bool
}

// Add counts wrong element i (indices come in increasing order).
func (b *WrongRanges) Add(i int) {
	b.RankWrong.Wrong++
	s := b.IsSentinel != nil && b.IsSentinel(i)
	if b.open && b.end == i && b.sentinel == s {
		b.end++
		if b.RankWrong.More == 0 {
			b.RankWrong.Ranges[len(b.RankWrong.Ranges)-1].End++
		}
		return
	}
	b.open, b.end, b.sentinel = true, i+1, s
	if len(b.RankWrong.Ranges) < MaxWrongRanges {
		b.RankWrong.Ranges = append(b.RankWrong.Ranges, WrongRange{Start: i, End: i + 1, Sentinel: s})
	} else {
		b.RankWrong.More++
	}
}

// ErrorOut is the error object of the JSON report.
type ErrorOut struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
	// At is where in a sweep the run failed ("at size 2 of 3 of the
	// sweep (4096 bytes per rank buffer)"), which the text output puts
	// before the message; "" for a run of one size.
	At        string   `json:"at,omitempty"`
	Rank      *int     `json:"rank,omitempty"`
	Backtrace []string `json:"backtrace,omitempty"`
	// SpawnedAt is where a failing tl.spawn thread was spawned.
	SpawnedAt []string `json:"spawned_at,omitempty"`
	// Blocked are a deadlock's blocked processes, each with its wait and
	// the pointers of the queue pairs it waits on; Cycle is a cycle of
	// the wait-for graph (its first rank repeated at the end), Hint what
	// to change when the cycle is one kernbench recognises.
	Blocked []deadlock.BlockedProc `json:"blocked,omitempty"`
	Cycle   []int                  `json:"cycle,omitempty"`
	Hint    string                 `json:"hint,omitempty"`
	// Unreceived are the queue pairs a run left messages in, sent and
	// never received (UnreceivedMessages), every one, by sender rank.
	Unreceived []machine.Unreceived `json:"unreceived,omitempty"`
}

// Exit statuses, as errkind declares them.
const (
	ExitOK       = errkind.ExitOK
	ExitWrong    = errkind.ExitWrong
	ExitUsage    = errkind.ExitUsage
	ExitDeadlock = errkind.ExitDeadlock
	ExitRuntime  = errkind.ExitRuntime
)

// Failure is an error with its kind, rank and the full text the user sees
// on stderr. The kind is stored once, in the failure, set by WithKind (and
// set again by WithKind when a cause is found to be another kind): its name
// (error.kind in --json) and exit status are read from it when the failure
// is reported, never copied beside it.
type Failure struct {
	kind      *errkind.Kind
	Rank      int // -1 when no rank is involved
	Msg       string
	Detail    string // multi-line report (backtrace, blocked processes)
	Backtrace []string
	SpawnedAt []string // a failing thread's spawn stack
	Err       error
	// WaitFor is the wait-for graph of a deadlock, Cycle its cycle,
	// Blocked its blocked processes and Hint the advice for its cycle
	// (ErrorOut says more).
	WaitFor []deadlock.Edge
	Cycle   []int
	Blocked []deadlock.BlockedProc
	Hint    string
	// Unreceived are the queue pairs holding messages sent and never
	// received (ErrorOut says more).
	Unreceived []machine.Unreceived
}

// WriteDOT writes the failure's wait-for graph as Graphviz DOT (--dot).
func (f *Failure) WriteDOT(w io.Writer) error { return deadlock.WriteDOT(w, f.WaitFor) }

func (f *Failure) Error() string { return f.Msg }
func (f *Failure) Unwrap() error { return f.Err }

// ErrorKind is the failure's kind (errkind.Kinded). A failure built
// without WithKind is a kernbench bug, and says so: InternalError.
func (f *Failure) ErrorKind() *errkind.Kind {
	if f.kind == nil {
		return errkind.Internal
	}
	return f.kind
}

// WithKind gives f the kind k and returns f.
func WithKind(k *errkind.Kind, f *Failure) *Failure {
	f.kind = k
	return f
}

// Out converts the failure into the JSON error object.
func (f *Failure) Out() *ErrorOut {
	o := &ErrorOut{Kind: f.ErrorKind().Name, Message: f.Msg, Backtrace: f.Backtrace, SpawnedAt: f.SpawnedAt, Blocked: f.Blocked, Cycle: f.Cycle, Hint: f.Hint, Unreceived: f.Unreceived}
	if f.Rank >= 0 {
		r := f.Rank
		o.Rank = &r
	}
	return o
}

// Busiest lists the n most utilised resources (busy time / run time), ties
// broken by creation order so the list is deterministic.
func Busiest(m *machine.Machine, end sim.Time, n int) []Usage {
	rs := append([]*machine.Resource(nil), m.Resources()...)
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].BusyTime > rs[j].BusyTime })
	var out []Usage
	for _, r := range rs {
		if len(out) == n || r.BusyTime == 0 {
			break
		}
		out = append(out, Usage{Resource: r.Name, Bytes: r.Bytes, Utilisation: float64(r.BusyTime) / float64(end)})
	}
	return out
}

// ClassUsage is the use of one kind of resource over a run.
type ClassUsage struct {
	Kind  string `json:"kind"`
	Count int    `json:"count"` // resources of the kind that carried data
	Bytes int64  `json:"bytes"`
	// Busiest and Mean utilisation among those resources.
	Busiest float64 `json:"busiest"`
	Mean    float64 `json:"mean"`
}

// ResourceClasses groups the used resources by kind, in kind order.
func ResourceClasses(m *machine.Machine, end sim.Time) []ClassUsage {
	byKind := map[string]*ClassUsage{}
	for _, r := range m.Resources() {
		if r.BusyTime == 0 {
			continue
		}
		c := byKind[r.Kind]
		if c == nil {
			c = &ClassUsage{Kind: r.Kind}
			byKind[r.Kind] = c
		}
		u := float64(r.BusyTime) / float64(end)
		c.Count++
		c.Bytes += r.Bytes
		c.Busiest = max(c.Busiest, u)
		c.Mean += u
	}
	var out []ClassUsage
	for _, k := range slices.Sorted(maps.Keys(byKind)) {
		c := byKind[k]
		c.Mean /= float64(c.Count)
		out = append(out, *c)
	}
	return out
}

// MeanBusBW is the mean busbw of the rows that ran (refused ones have
// none) and how many there are.
func MeanBusBW(rows []Result) (avg float64, n int) {
	for _, r := range rows {
		if r.Refused == nil {
			avg += r.BusBW
			n++
		}
	}
	if n == 0 {
		return 0, 0
	}
	return avg / float64(n), n
}

// SweepAvgBusBW is the "# avg busbw" of a sweep's rows: their mean busbw
// when at least two ran; ok is false otherwise.
func SweepAvgBusBW(rows []Result) (avg float64, ok bool) {
	if avg, n := MeanBusBW(rows); n >= 2 {
		return avg, true
	}
	return 0, false
}

// NoteAvgBusBW sets AvgBusBW from the rows (SweepAvgBusBW; 0: none).
func (r *Report) NoteAvgBusBW() {
	r.AvgBusBW, _ = SweepAvgBusBW(r.Results)
}
