// Package oplog is kernbench's two-pass verification (docs/architecture.md):
// phase 1 (the timed simulation) appends an OpRecord for every data
// operation; phase 2 (the DataExecutor) replays the records on a fresh copy
// of the initial memory image, in the order their effects became visible, and
// the result must equal phase 1's memory byte for byte.
//
// Tiles (PE registers) are tracked by id: a fetch produces a tile, math
// makes a tile from tiles, a store writes a tile into memory. The package
// depends only on engine/sim (time) and engine/dtype (math).
package oplog

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"unsafe"

	"kernbench/engine/dtype"
	"kernbench/engine/sim"
)

// Kind is what a record describes.
type Kind uint8

// Kinds of records.
const (
	KindIPCQ Kind = iota + 1
	KindMemory
	KindMath
	KindL3L2
	KindMarker
)

var kindNames = [...]string{KindIPCQ: "ipcq", KindMemory: "memory", KindMath: "math", KindL3L2: "l3l2", KindMarker: "marker"}

func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Space is the memory kind of an address (the JSON names tcm, sram, hbm).
type Space uint8

// The memory kinds, numbered as engine/machine numbers them.
const (
	SpaceTCM Space = iota + 1
	SpaceSRAM
	SpaceHBM
)

var spaceNames = [...]string{SpaceTCM: "tcm", SpaceSRAM: "sram", SpaceHBM: "hbm"}

func (s Space) String() string {
	if int(s) < len(spaceNames) {
		return spaceNames[s]
	}
	return fmt.Sprintf("space(%d)", uint8(s))
}

// RecvMode is how a receive handed its message to the kernel.
type RecvMode uint8

// The receive modes.
const (
	ReturnSlot RecvMode = iota + 1 // the kernel got a view of the rx slot
	CopyToDst                      // the slot was copied into the kernel's dst
)

func (m RecvMode) String() string {
	switch m {
	case ReturnSlot:
		return "return_slot"
	case CopyToDst:
		return "copy_to_dst"
	}
	return ""
}

// Record is one data operation. Addresses are physical; Src/Dst are 0 when
// unused. Effects are applied at TEnd (ties by Seq). Enumerations are
// small integers (a large run keeps millions of records); the JSON form
// spells them out.
type Record struct {
	Seq   uint64
	Rank  int
	Kind  Kind
	SrcSp Space
	DstSp Space
	// RecvMode, DType and OutType: 0 when they do not apply.
	RecvMode RecvMode
	DType    dtype.DType
	OutType  dtype.DType
	Left     bool // the scalar is the left operand
	Name     string
	TStart   sim.Time
	TEnd     sim.Time

	Src    uint64
	Dst    uint64
	NBytes int64
	Count  int64

	Dir       string
	SenderSeq uint64

	// Tile dataflow: a fetch or math result (TileOut), math operands
	// (TileA, TileB; 0 = scalar), a store's source tile (TileA).
	TileOut int64
	TileA   int64
	TileB   int64
	Op      string
	Scalar  float64
	ScalarI int64

	// Data carries bytes the replay cannot derive (host writes, constants).
	Data []byte

	// Args of a marker (tl.trace).
	Args map[string]string

	// Produced and Origin are read by Add only in a witnessed log (see
	// witness), and not kept in the record: what the effect produced in
	// phase 1 (the bytes written, or the tile made) and the call that
	// issued it.
	Produced []byte
	Origin   string
}

// recordJSON is Record's JSON form (--oplog), one object per line.
type recordJSON struct {
	Seq    uint64   `json:"seq"`
	Rank   int      `json:"rank"`
	Kind   string   `json:"kind"`
	Name   string   `json:"name"`
	TStart sim.Time `json:"t_start_ps"`
	TEnd   sim.Time `json:"t_end_ps"`

	Src    uint64 `json:"src,omitempty"`
	Dst    uint64 `json:"dst,omitempty"`
	SrcSp  string `json:"src_space,omitempty"`
	DstSp  string `json:"dst_space,omitempty"`
	NBytes int64  `json:"nbytes"`
	DType  string `json:"dtype,omitempty"`
	Count  int64  `json:"count,omitempty"`

	Dir       string `json:"dir,omitempty"`
	SenderSeq uint64 `json:"sender_seq,omitempty"`
	RecvMode  string `json:"recv_mode,omitempty"`

	TileOut int64   `json:"tile_out,omitempty"`
	TileA   int64   `json:"tile_a,omitempty"`
	TileB   int64   `json:"tile_b,omitempty"`
	Op      string  `json:"op,omitempty"`
	Scalar  float64 `json:"scalar,omitempty"`
	ScalarI int64   `json:"scalar_i,omitempty"`
	Left    bool    `json:"scalar_left,omitempty"`
	OutType string  `json:"out_dtype,omitempty"`

	Data []byte            `json:"data,omitempty"`
	Args map[string]string `json:"args,omitempty"`
}

// MarshalJSON writes the record with its enumerations spelled out.
func (r *Record) MarshalJSON() ([]byte, error) {
	j := recordJSON{Seq: r.Seq, Rank: r.Rank, Kind: r.Kind.String(), Name: r.Name, TStart: r.TStart, TEnd: r.TEnd,
		Src: r.Src, Dst: r.Dst, NBytes: r.NBytes, Count: r.Count, Dir: r.Dir, SenderSeq: r.SenderSeq, RecvMode: r.RecvMode.String(),
		TileOut: r.TileOut, TileA: r.TileA, TileB: r.TileB, Op: r.Op, Scalar: r.Scalar, ScalarI: r.ScalarI, Left: r.Left,
		Data: r.Data, Args: r.Args}
	if r.SrcSp != 0 {
		j.SrcSp = r.SrcSp.String()
	}
	if r.DstSp != 0 {
		j.DstSp = r.DstSp.String()
	}
	if r.DType.Valid() {
		j.DType = r.DType.String()
	}
	if r.OutType.Valid() {
		j.OutType = r.OutType.String()
	}
	return json.Marshal(j)
}

// Log collects records in phase 1. A large run keeps millions of
// records, each read several times by phase 2, so the log keeps them
// compact and free of pointers (entry: about half a Record, and nothing
// for the collector to scan), in slabs of 1<<slabShift (one allocation per
// slab, not per record). Strings are kept once each (strs); the fields few
// records have (bytes, marker args, math scalars) in extras.
type Log struct {
	slabs  [][]entry
	n      int
	tiles  int64
	strs   []string // by id; 0 is ""
	strID  map[string]uint32
	recent [16]recentStr
	extras []extra
	// scan is phase 2's pass over the complete log (see phase2Scan).
	scan *phase2Scan
	// wit is set in a run that diagnoses a phase-2 mismatch (Witness).
	wit *witness
	// Guard, when set, is asked during the replay (every math record, the
	// records that allocate tiles, and every 64th): an error ends the
	// replay with it (the host-memory guard: phase 2 allocates tiles in
	// Go, where the simulation's event loop, which reads the guard in
	// phase 1, does not run).
	Guard func() error
	// pool, when set, gives and takes back the slabs (UseSlabs).
	pool *Slabs
	// Clock, when set, is the clock of the partition that writes the log
	// (a partitioned run keeps a log per SIP): each record keeps the time
	// it was written at (when), the key MergeLogs orders the logs by.
	Clock func() sim.Time
	when  []sim.Time
}

// phase2Scan is what phase 2 reads off the whole log: the records in
// effect order (the replay) and the messages (CheckCausality), gathered
// in one pass over tens of megabytes of records instead of one each.
// Whichever of the two runs first takes it; the replay drops it.
type phase2Scan struct {
	n     int // the log's length when scanned
	order []*entry
	sends []sentMsg
	recvs []causalMsg
}

// phase2Scan returns the log's scan, made now if the log has none of its
// current length.
func (l *Log) phase2Scan() *phase2Scan {
	if l.scan == nil || l.scan.n != l.n {
		order, sends, recvs := effectSorted(l)
		l.scan = &phase2Scan{n: l.n, order: order, sends: sends, recvs: recvs}
	}
	return l.scan
}

// entry is a Record as the Log keeps it: the same fields, with each
// string as its id in Log.strs and the rare ones in Log.extras.
type entry struct {
	Seq                   uint64
	TStart, TEnd          sim.Time
	Src, Dst              uint64
	NBytes, Count         int64
	SenderSeq             uint64
	TileOut, TileA, TileB int64
	Rank                  int32
	name, dir, op         uint32
	extra                 uint32 // 1 + index in Log.extras; 0: none
	Kind                  Kind
	SrcSp, DstSp          Space
	RecvMode              RecvMode
	DType, OutType        dtype.DType
	Left                  bool
}

// extra is the part of a Record few records have.
type extra struct {
	data    []byte
	args    map[string]string
	scalar  float64
	scalarI int64
}

// recentStr caches the id of a string recently kept: the names a run logs
// are a few short strings (a rank's direction names are its own strings,
// so the cache goes by their bytes, not their address).
type recentStr struct {
	s  string
	id uint32
}

const slabShift = 10

// The ids of the names the replay tells apart (Log.init keeps them first).
const (
	nameFetch uint32 = iota + 1
	nameStore
	nameAlloc
	nameSend
	nameRecv
)

func (l *Log) init() {
	l.strs = []string{"", "fetch", "store", "alloc", "send", "recv"}
	l.strID = make(map[string]uint32, len(l.strs))
	for i, s := range l.strs {
		l.strID[s] = uint32(i)
	}
}

// str is s's id in l.strs, keeping s if it is new.
func (l *Log) str(s string) uint32 {
	if s == "" {
		return 0
	}
	c := &l.recent[(len(s)*7+int(s[0])+int(s[len(s)-1]))&(len(l.recent)-1)]
	if c.s == s {
		return c.id
	}
	id, ok := l.strID[s]
	if !ok {
		id = uint32(len(l.strs))
		l.strs = append(l.strs, s)
		l.strID[s] = id
	}
	*c = recentStr{s: s, id: id}
	return id
}

// Add appends a copy of r, assigning its sequence number.
func (l *Log) Add(r *Record) {
	r.Seq = uint64(l.n)
	l.add(r)
}

// add appends a copy of r with its own sequence number.
func (l *Log) add(r *Record) {
	if l.strs == nil {
		l.init()
	}
	if l.n&(1<<slabShift-1) == 0 {
		l.slabs = append(l.slabs, l.pool.slab())
	}
	e := &l.slabs[l.n>>slabShift][l.n&(1<<slabShift-1)]
	l.n++
	*e = entry{Seq: r.Seq, TStart: r.TStart, TEnd: r.TEnd, Src: r.Src, Dst: r.Dst, NBytes: r.NBytes, Count: r.Count, SenderSeq: r.SenderSeq,
		TileOut: r.TileOut, TileA: r.TileA, TileB: r.TileB, Rank: int32(r.Rank), name: l.str(r.Name), dir: l.str(r.Dir), op: l.str(r.Op),
		Kind: r.Kind, SrcSp: r.SrcSp, DstSp: r.DstSp, RecvMode: r.RecvMode, DType: r.DType, OutType: r.OutType, Left: r.Left}
	if r.Data != nil || r.Args != nil || r.Scalar != 0 || r.ScalarI != 0 {
		l.extras = append(l.extras, extra{data: r.Data, args: r.Args, scalar: r.Scalar, scalarI: r.ScalarI})
		e.extra = uint32(len(l.extras))
	}
	if l.wit != nil {
		l.wit.note(r)
	}
	if l.Clock != nil {
		l.when = append(l.when, l.Clock())
	}
}

// logOf is a log of records, each keeping its sequence number.
func logOf(records []*Record) *Log {
	l := &Log{}
	for _, r := range records {
		l.add(r)
	}
	return l
}

// Len is the number of records.
func (l *Log) Len() int { return l.n }

// at is record i's entry.
func (l *Log) at(i int) *entry { return &l.slabs[i>>slabShift][i&(1<<slabShift-1)] }

// Record returns a copy of record i.
func (l *Log) Record(i int) *Record { return l.record(l.at(i)) }

// Records returns a copy of every record, in sequence order.
func (l *Log) Records() []*Record {
	out := make([]*Record, l.n)
	for i := range out {
		out[i] = l.Record(i)
	}
	return out
}

// record is the Record an entry keeps.
func (l *Log) record(e *entry) *Record {
	r := new(Record)
	l.recordInto(e, r)
	return r
}

// recordInto writes e as a Record into r (MergeLogs: one Record for
// every record merged).
func (l *Log) recordInto(e *entry, r *Record) {
	*r = Record{Seq: e.Seq, Rank: int(e.Rank), Kind: e.Kind, SrcSp: e.SrcSp, DstSp: e.DstSp, RecvMode: e.RecvMode, DType: e.DType, OutType: e.OutType,
		Left: e.Left, Name: l.strs[e.name], TStart: e.TStart, TEnd: e.TEnd, Src: e.Src, Dst: e.Dst, NBytes: e.NBytes, Count: e.Count,
		Dir: l.strs[e.dir], SenderSeq: e.SenderSeq, TileOut: e.TileOut, TileA: e.TileA, TileB: e.TileB, Op: l.strs[e.op]}
	if x := l.extraOf(e); x != nil {
		r.Data, r.Args, r.Scalar, r.ScalarI = x.data, x.args, x.scalar, x.scalarI
	}
}

// extraOf is e's extra, or nil.
func (l *Log) extraOf(e *entry) *extra {
	if e.extra == 0 {
		return nil
	}
	return &l.extras[e.extra-1]
}

// data is e's Data.
func (l *Log) data(e *entry) []byte {
	if x := l.extraOf(e); x != nil {
		return x.data
	}
	return nil
}

// HostBytes is what the records take in host memory: the entries, their
// extras and the bytes and args these carry.
func (l *Log) HostBytes() int64 {
	total := int64(l.n)*int64(unsafe.Sizeof(entry{})) + int64(len(l.extras))*int64(unsafe.Sizeof(extra{}))
	for _, x := range l.extras {
		total += int64(cap(x.data))
		for k, v := range x.args {
			total += int64(len(k) + len(v) + 32)
		}
	}
	return total
}

// NewTile returns a fresh tile id.
func (l *Log) NewTile() int64 {
	l.tiles++
	return l.tiles
}

// WriteJSONLines writes one JSON object per record, in sequence order.
func (l *Log) WriteJSONLines(w io.Writer) error {
	enc := json.NewEncoder(w)
	for i := range l.n {
		if err := enc.Encode(l.Record(i)); err != nil {
			return err
		}
	}
	return nil
}

// Image is a memory image: the bytes of every memory, indexed by memory id.
// Address a belongs to memory (a >> AddrShift) - 1 at offset a & mask.
type Image [][]byte

// AddrShift must match engine/machine's physical address layout.
const AddrShift = 40

func (img *Image) locate(addr uint64, n int64) ([]byte, error) {
	id := int(addr>>AddrShift) - 1
	off := int64(addr & (1<<AddrShift - 1))
	if id < 0 || id >= maxMemories {
		return nil, fmt.Errorf("address %#x is in no memory", addr)
	}
	// A memory materialised after the image was taken starts as zeros.
	for id >= len(*img) {
		*img = append(*img, nil)
	}
	im := *img
	if need := off + n; need > int64(len(im[id])) {
		grown := make([]byte, need)
		copy(grown, im[id])
		im[id] = grown
	}
	return im[id][off : off+n], nil
}

// maxMemories bounds the memory IDs an address may name (a machine
// materialises only the memories it uses, far fewer).
const maxMemories = 1 << 26

// Clone deep-copies an image.
func (im Image) Clone() Image {
	out := make(Image, len(im))
	for i, b := range im {
		out[i] = append([]byte(nil), b...)
	}
	return out
}

// Replay applies records to *im in effect order (growing it for memories
// materialised after the image was taken) (TEnd, then Seq) — the
// DataExecutor. It fails on records it cannot apply (unknown tile, bad
// address), which is itself a verification failure.
func Replay(im *Image, records []*Record) error {
	return replay(im, logOf(records))
}

// ReplayOverlay is Replay on an overlay image: the replay reads blocks
// nobody wrote from phase 1's memory and writes only the overlay's own
// copies (see Overlay).
func ReplayOverlay(ov *Overlay, records []*Record) error { return replay(ov, logOf(records)) }

// ReplayOverlay is ReplayOverlay of the log's records.
func (l *Log) ReplayOverlay(ov *Overlay) error { return replay(ov, l) }

// replaySpace is the memory a replay runs on: read is a view it only
// reads, valid as long as its viewKind says; write replaces a range: its
// first bytes by src (as copy does), or all of it by zeros when zero is
// set.
type replaySpace interface {
	read(addr uint64, n int64) ([]byte, viewKind, error)
	write(addr uint64, n int64, src []byte, zero bool) error
}

// viewKind is how long a read's view keeps showing the bytes it showed.
type viewKind uint8

const (
	// viewTransient: until the next read or write.
	viewTransient viewKind = iota
	// viewBlock: until the next write to the block it lies in (one
	// block's own buffer in the replay).
	viewBlock
	// viewFixed: to the end of the replay (memory the replay only reads).
	viewFixed
)

// replayTracker is a replaySpace that wants to know the records ahead:
// prepare starts, note sees each record in effect order (i its index),
// then at says which of them is applied next. writtenSince reports, while
// note has seen the records up to some index, whether one of those after
// index i wrote a block of [addr, addr+n): a view of the range read at i
// (viewBlock) would no longer show what was read.
type replayTracker interface {
	prepare()
	note(l *Log, i int, r *entry)
	at(i int)
	writtenSince(addr uint64, n int64, i int32) bool
}

func (img *Image) read(addr uint64, n int64) ([]byte, viewKind, error) {
	b, err := img.locate(addr, n)
	return b, viewTransient, err // a later write may grow the memory elsewhere
}
func (img *Image) write(addr uint64, n int64, src []byte, zero bool) error {
	dst, err := img.locate(addr, n)
	if err != nil {
		return err
	}
	if zero {
		clear(dst)
	} else {
		copy(dst, src)
	}
	return nil
}

func replay(im replaySpace, l *Log) error {
	order := l.phase2Scan().order
	l.scan = nil // the replay is the scan's last reader
	// Tile ids are dense (Log.NewTile), so tiles live in slices by id. A
	// tile's bytes are released after the last record that reads it and
	// reused for a later tile, so the replay holds only the tiles still to
	// be consumed, not every tile of the run.
	// One pass over the records (tens of megabytes for a large run) finds
	// each tile's last reader and tells the space what each record writes.
	tracker, _ := im.(replayTracker)
	if tracker != nil {
		tracker.prepare()
	}
	rp := &replayer{im: im, log: l, free: map[int64][][]byte{}}
	// A fetched tile is the view the fetch read, not a copy, where that
	// view still shows the same bytes at every record reading the tile:
	// always for phase 1's memory (viewFixed), and for a block's buffer
	// (viewBlock) unless a record between the fetch and a reader wrote the
	// block (the pass below marks such a tile copied). A fetch copied
	// every tile before: the replay's largest cost after the stores.
	// fetchedAt is 1 + the index of the fetch that made a tile (0: none).
	var fetchedAt []int32
	checkFetched := func(id int64) {
		if id <= 0 || id >= int64(len(fetchedAt)) || fetchedAt[id] == 0 || rp.copied[id] {
			return
		}
		f := order[fetchedAt[id]-1]
		rp.copied[id] = tracker.writtenSince(f.Src, f.NBytes, fetchedAt[id]-1)
	}
	for i, r := range order {
		// Tile 0 too: the indexes below clamp a missing tile to it.
		if top := max(r.TileOut, r.TileA, r.TileB, 0); top >= int64(len(rp.lastUse)) {
			rp.lastUse = growTo(rp.lastUse, top)
			if tracker != nil {
				fetchedAt, rp.copied = growTo(fetchedAt, top), growTo(rp.copied, top)
			}
		}
		switch {
		case r.Kind == KindMath:
			rp.lastUse[max(r.TileA, 0)], rp.lastUse[max(r.TileB, 0)] = int32(i), int32(i)
		case r.name == nameStore:
			rp.lastUse[max(r.TileA, 0)] = int32(i)
		}
		if tracker != nil {
			// The tiles r reads (as apply reads them), before r's own
			// write (a store into the block it fetched from reads first).
			switch {
			case r.Kind == KindMath:
				checkFetched(r.TileA)
				checkFetched(r.TileB)
			case r.Kind == KindMarker:
			case r.name == nameStore:
				checkFetched(r.TileA)
			}
			tracker.note(l, i, r)
			switch {
			case r.Kind == KindMath:
				setFetched(fetchedAt, r.TileOut, 0)
			case r.Kind == KindMarker:
			case r.name == nameFetch:
				setFetched(fetchedAt, r.TileOut, int32(i)+1)
			}
		}
	}
	rp.tiles = make([]replayTile, len(rp.lastUse))
	for i, r := range order {
		if l.Guard != nil && (i&63 == 0 || r.Kind == KindMath) {
			if err := l.Guard(); err != nil {
				return err
			}
		}
		if tracker != nil {
			tracker.at(i)
		}
		if err := rp.apply(r); err != nil {
			return fmt.Errorf("replay of record %d (%s %s, rank %d): %w", r.Seq, r.Kind, l.strs[r.name], r.Rank, err)
		}
		if l.wit != nil {
			l.wit.check(l, r, rp.produced(r))
		}
		if r.Kind == KindMath || r.name == nameStore {
			rp.release(r.TileA, i)
			rp.release(r.TileB, i)
		}
		if r.Kind == KindMath || r.name == nameFetch {
			rp.release(r.TileOut, i)
		}
	}
	return nil
}

// effectSorted returns records in effect order, equal keys in log order
// (a stable sort by effectOrder). Records are appended as effects happen,
// except math (logged when issued, effective when its result is ready): the
// others are in order already, and sorting only the math records (a tenth
// of a ring's log) and merging costs far less than a stable sort of the
// whole log (n log² n). A tie between the parts (whose log order the merge
// does not know) takes the stable sort of the whole. The same pass
// collects, in log order, the sends and receives CheckCausality matches (a
// ring's log is about a fifth each).
func effectSorted(l *Log) (order []*entry, sends []sentMsg, recvs []causalMsg) {
	order = make([]*entry, l.n)
	// The math records (sized for a ring's log: a tenth are math) and the
	// others, at the start of order (the merge below fills order from its
	// end, never overtaking them: no second slice of the whole log).
	// The same pass notes whether each part is in order already (a second
	// pass would read every record again, tens of megabytes).
	late, rest := make([]*entry, 0, l.n/8+1), order[:0]
	sends, recvs = make([]sentMsg, 0, l.n/5), make([]causalMsg, 0, l.n/5)
	lateSorted, restSorted := true, true
	for i := range l.n {
		if r := l.at(i); r.Kind == KindMath {
			lateSorted = lateSorted && (len(late) == 0 || effectOrder(late[len(late)-1], r) <= 0)
			late = append(late, r)
		} else {
			restSorted = restSorted && (len(rest) == 0 || effectOrder(rest[len(rest)-1], r) <= 0)
			rest = append(rest, r)
			if r.Kind == KindIPCQ {
				switch r.name {
				case nameSend:
					sends = append(sends, sentMsg{causalKey{r.Dst, r.SenderSeq}, r.TEnd, r})
				case nameRecv:
					recvs = append(recvs, causalMsg{causalKey{r.Src, r.SenderSeq}, r})
				}
			}
		}
	}
	// Stable sorts of the parts merged without a tie between the parts are
	// the stable sort of the whole.
	if !lateSorted {
		slices.SortStableFunc(late, effectOrder)
	}
	if !restSorted {
		slices.SortStableFunc(rest, effectOrder)
	}
	if mergeEffectsBack(order, len(rest), late) {
		return order, sends, recvs
	}
	for i := range order {
		order[i] = l.at(i)
	}
	slices.SortStableFunc(order, effectOrder)
	return order, sends, recvs
}

// setFetched notes that tile id was made by the fetch at index at-1 (0:
// not by a fetch).
func setFetched(fetchedAt []int32, id int64, at int32) {
	if id > 0 && id < int64(len(fetchedAt)) {
		fetchedAt[id] = at
	}
}

// growTo is a copy of s long enough to index i, its new elements zero:
// max(i+1, 2·len(s)) of them, so that growing one index at a time costs
// amortised constant time.
func growTo[T any](s []T, i int64) []T {
	grown := make([]T, max(i+1, 2*int64(len(s))))
	copy(grown, s)
	return grown
}

// mergeEffectsBack merges the sorted order[:k] and b into order (room
// for both), from the end, and reports whether no record of order[:k]
// ties with one of b (a merge compares every such pair whichever end it
// starts from, so without one the result is the stable sort of both).
func mergeEffectsBack(order []*entry, k int, b []*entry) bool {
	i, j := k-1, len(b)-1
	for w := len(order) - 1; j >= 0; w-- {
		if i >= 0 {
			switch effectOrder(order[i], b[j]) {
			case 0:
				return false
			case 1:
				order[w] = order[i]
				i--
				continue
			}
		}
		order[w] = b[j]
		j--
	}
	return true
}

// effectOrder orders records by when their effect happened (TEnd, then Seq).
func effectOrder(a, b *entry) int {
	if a.TEnd != b.TEnd {
		return cmp.Compare(a.TEnd, b.TEnd)
	}
	return cmp.Compare(a.Seq, b.Seq)
}

// replayer is the DataExecutor's state: the image and the live tiles.
type replayer struct {
	im      replaySpace
	log     *Log
	tiles   []replayTile
	lastUse []int32 // index in effect order of the last record reading a tile
	// copied marks the fetched tiles that must be copies: a record wrote
	// their block between the fetch and a reader (see replay).
	copied []bool
	// free holds released tile buffers by length, for later tiles.
	free map[int64][][]byte
}

type replayTile struct {
	data []byte
	dt   dtype.DType
	live bool
	// view: data is a view of the memory, not a buffer of the replayer's
	// (released, it is not reused).
	view bool
}

// tile returns a live tile's bytes.
func (rp *replayer) tile(id int64) ([]byte, error) {
	if id <= 0 || id >= int64(len(rp.tiles)) || !rp.tiles[id].live {
		return nil, fmt.Errorf("unknown tile %d", id)
	}
	return rp.tiles[id].data, nil
}

// buffer returns n bytes for a new tile (contents undefined).
func (rp *replayer) buffer(n int64) []byte {
	if l := rp.free[n]; len(l) > 0 {
		b := l[len(l)-1]
		rp.free[n] = l[:len(l)-1]
		return b
	}
	return make([]byte, n)
}

func (rp *replayer) put(id int64, data []byte, dt dtype.DType) error {
	return rp.putTile(id, replayTile{data: data, dt: dt, live: true})
}

func (rp *replayer) putTile(id int64, t replayTile) error {
	if id <= 0 || id >= int64(len(rp.tiles)) {
		return fmt.Errorf("tile id %d out of range", id)
	}
	rp.recycle(rp.tiles[id])
	rp.tiles[id] = t
	return nil
}

// recycle keeps a dropped tile's buffer for later tiles (a view of the
// memory is not the replayer's to reuse).
func (rp *replayer) recycle(t replayTile) {
	if t.live && !t.view {
		rp.free[int64(len(t.data))] = append(rp.free[int64(len(t.data))], t.data)
	}
}

// release drops tile id after record i if no later record reads it.
func (rp *replayer) release(id int64, i int) {
	if id <= 0 || id >= int64(len(rp.tiles)) || !rp.tiles[id].live {
		return
	}
	if last := rp.lastUse[id]; last <= int32(i) {
		rp.recycle(rp.tiles[id])
		rp.tiles[id] = replayTile{}
	}
}

// writeRange is the range of memory apply writes for r, if it writes
// any (its cases in apply's order).
func writeRange(l *Log, r *entry) (addr uint64, n int64, ok bool) {
	switch {
	case r.Kind == KindMarker, r.Kind == KindMath, r.name == nameFetch:
		return 0, 0, false
	case r.name == nameStore, l.data(r) != nil || r.name == nameAlloc, r.Src != 0 && r.Dst != 0:
		return r.Dst, r.NBytes, true
	}
	return 0, 0, false
}

func (rp *replayer) apply(r *entry) error {
	im, l := rp.im, rp.log
	switch {
	case r.Kind == KindMarker:
		return nil
	case r.Kind == KindMath:
		dt := r.DType
		if !dt.Valid() {
			return fmt.Errorf("math record without a valid dtype (%d)", dt)
		}
		if r.NBytes < 0 {
			return fmt.Errorf("negative size %d", r.NBytes)
		}
		out := rp.buffer(r.NBytes)
		switch opName := l.strs[r.op]; opName {
		case "const":
			clear(out)
			copy(out, l.data(r))
		case "convert":
			a, err := rp.tile(r.TileA)
			if err != nil {
				return err
			}
			odt := r.OutType
			if !odt.Valid() {
				return fmt.Errorf("convert record without a valid out dtype (%d)", odt)
			}
			dtype.Convert(out, odt, a, dt)
			dt = odt
		default:
			op, err := dtype.ParseOp(opName)
			if err != nil {
				return err
			}
			a, err := rp.tile(r.TileA)
			if err != nil {
				return err
			}
			if r.TileB == 0 {
				var scalar float64
				var scalarI int64
				if x := l.extraOf(r); x != nil {
					scalar, scalarI = x.scalar, x.scalarI
				}
				dtype.BinaryScalar(op, dt, out, a, scalar, scalarI, r.Left)
			} else {
				b, err := rp.tile(r.TileB)
				if err != nil {
					return err
				}
				dtype.Binary(op, dt, out, a, b)
			}
		}
		return rp.put(r.TileOut, out, dt)
	case r.name == nameFetch:
		src, kind, err := im.read(r.Src, r.NBytes)
		if err != nil {
			return err
		}
		if id := r.TileOut; kind == viewFixed || kind == viewBlock && id > 0 && id < int64(len(rp.copied)) && !rp.copied[id] {
			return rp.putTile(id, replayTile{data: src, live: true, view: true})
		}
		out := rp.buffer(r.NBytes)
		copy(out, src)
		return rp.put(r.TileOut, out, 0)
	case r.name == nameStore:
		t, err := rp.tile(r.TileA)
		if err != nil {
			return err
		}
		return im.write(r.Dst, r.NBytes, t, false)
	case l.data(r) != nil || r.name == nameAlloc:
		data := l.data(r)
		return im.write(r.Dst, r.NBytes, data, data == nil)
	case r.Src != 0 && r.Dst != 0:
		// ipcq send, copy, recv copy_to_dst: bytes move src -> dst.
		src, _, err := im.read(r.Src, r.NBytes)
		if err != nil {
			return err
		}
		// The destination may grow the image after src was taken: src
		// then still holds the bytes to copy (nothing wrote them since).
		return im.write(r.Dst, r.NBytes, src, false)
	}
	// return_slot recv and other pointer-only records have no data effect.
	return nil
}

// Mismatch describes the first byte where two images differ.
type Mismatch struct {
	Addr      uint64
	Got, Want byte // phase 2, phase 1
	// LastWriter is the record whose effect wrote Addr last in phase 2's
	// order (t_end, then seq); LogWriter the one that wrote it last in
	// phase 1, whose records are logged as their effects happen (seq
	// order). They differ when the op_log's times put the writes in
	// another order than phase 1 made them.
	LastWriter, LogWriter *Record
	// Origins of the two (a witnessed log only; "" when unknown).
	LastOrigin, LogOrigin string
	// Divergence is the first record whose effect differs between the
	// phases (a witnessed log only).
	Divergence *Divergence
}

// Where says where the phases differ, without the records.
func (m *Mismatch) Where() string {
	return fmt.Sprintf("phase 2 differs from phase 1 at address %#x (phase 2 %#02x, phase 1 %#02x)", m.Addr, m.Got, m.Want)
}

func (m *Mismatch) String() string {
	s := m.Where()
	if r := m.LastWriter; r != nil {
		s += fmt.Sprintf("; last written by record %d (%s %s, rank %d, t_end %v)", r.Seq, r.Kind, r.Name, r.Rank, r.TEnd)
	}
	return s
}

// mismatchAt is the Mismatch at addr, its last writers looked up in l.
func mismatchAt(l *Log, addr uint64, got, want byte) *Mismatch {
	m := &Mismatch{Addr: addr, Got: got, Want: want}
	m.LastWriter, m.LogWriter = lastWriters(l, addr)
	if m.LastWriter != nil {
		m.LastOrigin = l.Origin(m.LastWriter.Seq)
	}
	if m.LogWriter != nil {
		m.LogOrigin = l.Origin(m.LogWriter.Seq)
	}
	m.Divergence = l.Divergence()
	return m
}

// Compare returns the first difference between phase-2 and phase-1 images
// (missing bytes read as zero), or nil.
func Compare(phase2, phase1 Image, records []*Record) *Mismatch {
	for id := 0; id < max(len(phase1), len(phase2)); id++ {
		var a, b []byte
		if id < len(phase2) {
			a = phase2[id]
		}
		if id < len(phase1) {
			b = phase1[id]
		}
		// Equal memories (nearly always) are compared at memory speed;
		// the byte loop only locates a difference (missing bytes are 0).
		if n := min(len(a), len(b)); bytes.Equal(a[:n], b[:n]) && allZero(a[n:]) && allZero(b[n:]) {
			continue
		}
		for i := 0; i < max(len(a), len(b)); i++ {
			var x, y byte
			if i < len(a) {
				x = a[i]
			}
			if i < len(b) {
				y = b[i]
			}
			if x != y {
				addr := uint64(id+1)<<AddrShift | uint64(i)
				return mismatchAt(logOf(records), addr, x, y)
			}
		}
	}
	return nil
}

// allZero reports whether b holds only zero bytes.
func allZero(b []byte) bool {
	for len(b) > 0 {
		n := min(len(b), len(zeroPage))
		if !bytes.Equal(b[:n], zeroPage[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}

var zeroPage [4096]byte

// lastWriters are the records that wrote addr last in effect order
// (t_end, then seq: phase 2) and in log order (phase 1).
func lastWriters(l *Log, addr uint64) (effect, logged *Record) {
	var best, last *entry
	for i := range l.n {
		r := l.at(i)
		writes := r.Dst != 0 && r.name != nameFetch && r.Kind != KindMath
		if !writes || addr < r.Dst || addr >= r.Dst+uint64(r.NBytes) {
			continue
		}
		if best == nil || r.TEnd > best.TEnd || (r.TEnd == best.TEnd && r.Seq > best.Seq) {
			best = r
		}
		last = r
	}
	if best == nil {
		return nil, nil
	}
	return l.record(best), l.record(last)
}

// CheckCausality checks invariant I5: every receive has a send of the same
// message (same slot, same sender_seq) whose DMA completed no later than
// the receive began. It returns a description of the first violation.
func CheckCausality(records []*Record) string { return logOf(records).CheckCausality() }

// CheckCausality is CheckCausality of the log's records.
func (l *Log) CheckCausality() string {
	// The pass over the log that sorts it for the replay (tens of
	// megabytes of records for a large ring) collects the messages; an
	// index of the sends then finds each receive's.
	scan := l.phase2Scan()
	sends, recvs := scan.sends, scan.recvs
	sent := newSentIndex(sends)
	for _, m := range recvs {
		// (The receives are in log order: reading their records walks the
		// log in order, unlike the sends' records.)
		r := m.rec
		sm, ok := sent.find(m.key)
		if ok && sm.t <= r.TStart {
			continue
		}
		s := sm.rec
		if !ok {
			return fmt.Sprintf("I5: record %d (rank %d recv %s seq %d at %v) has no matching send", r.Seq, r.Rank, l.strs[r.dir], r.SenderSeq, r.TStart)
		}
		return fmt.Sprintf("I5: record %d (rank %d recv %s seq %d) began at %v before its send (record %d, rank %d) completed at %v",
			r.Seq, r.Rank, l.strs[r.dir], r.SenderSeq, r.TStart, s.Seq, s.Rank, s.TEnd)
	}
	return ""
}

// sentIndex finds a message's send (of several, the last logged). A
// queue pair's messages take its slots in turn, so each slot's sends come
// in sequence order: the index keeps the sends grouped by slot (a few
// thousand slots, in a small table) and finds one by halving its slot's
// group, reading only the index (the times compared are in it). A table
// keyed by message had an entry per message (tens of thousands, out of
// cache) and each match read the send's record, a cache miss in the log.
// When some slot's sends are out of sequence order it is that table.
type sentIndex struct {
	slots  map[uint64]int32 // slot -> its group
	start  []int32          // group i is bySlot[start[i]:start[i+1]]
	bySlot []slotSend
	byMsg  map[causalKey]sentMsg
}

// slotSend is a send in its slot's group.
type slotSend struct {
	seq uint64
	t   sim.Time
	rec *entry
}

// newSentIndex indexes sends, in log order.
func newSentIndex(sends []sentMsg) *sentIndex {
	x := &sentIndex{slots: map[uint64]int32{}}
	group := make([]int32, len(sends))
	var count []int32
	for i, m := range sends {
		g, seen := x.slots[m.key.slot]
		if !seen {
			g = int32(len(count))
			x.slots[m.key.slot] = g
			count = append(count, 0)
		}
		group[i] = g
		count[g]++
	}
	x.start = make([]int32, len(count)+1)
	for g, c := range count {
		x.start[g+1] = x.start[g] + c
	}
	next := append([]int32(nil), x.start[:len(count)]...)
	x.bySlot = make([]slotSend, len(sends))
	for i, m := range sends {
		g := group[i]
		if k := next[g]; k > x.start[g] && x.bySlot[k-1].seq > m.key.seq {
			x.byMsg = make(map[causalKey]sentMsg, len(sends))
			for _, m := range sends {
				x.byMsg[m.key] = m
			}
			x.slots, x.start, x.bySlot = nil, nil, nil
			return x
		}
		x.bySlot[next[g]] = slotSend{m.key.seq, m.t, m.rec}
		next[g]++
	}
	return x
}

// find returns the last logged send of message k.
func (x *sentIndex) find(k causalKey) (sentMsg, bool) {
	if x.byMsg != nil {
		m, ok := x.byMsg[k]
		return m, ok
	}
	g, ok := x.slots[k.slot]
	if !ok {
		return sentMsg{}, false
	}
	// The first of the group's sends with a later sequence number: the
	// one before it is the message's last send, if it is one.
	group := x.bySlot[x.start[g]:x.start[g+1]]
	lo, hi := 0, len(group)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if group[mid].seq <= k.seq {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == 0 || group[lo-1].seq != k.seq {
		return sentMsg{}, false
	}
	s := group[lo-1]
	return sentMsg{k, s.t, s.rec}, true
}

// causalKey names a message: the slot it went through and the sender's
// sequence number.
type causalKey struct{ slot, seq uint64 }

// causalMsg is a receive of CheckCausality: its message and its record.
type causalMsg struct {
	key causalKey
	rec *entry
}

// sentMsg is a send of CheckCausality: its message, its TEnd (the time
// compared) and its record.
type sentMsg struct {
	key causalKey
	t   sim.Time
	rec *entry
}
