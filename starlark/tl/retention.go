package tl

import (
	"runtime"
	"sync/atomic"
	"weak"

	"kernbench/engine/machine"
)

// Retention finds how many of the views (Ptr) and operation handles the
// kernels of one simulation were given they still hold, at its peak: what
// a kernel keeps alive in Starlark values (a table of piece views, a list
// of store handles) is most of what a timing-only run holds beyond its
// ranks' fixed state, and only the collector knows it. Every sampleEvery-th
// value made is followed with a weak pointer; whenever the values made
// have grown by an eighth since the last look (at least minGap), a full
// collection runs and the sampled values still reachable are counted
// (unless too few could be to pass the peak).
// Reachability after a full collection depends only on what the
// simulation holds, so the counts are the same run after run, and with
// other simulations in the process (-j). The host memory estimate's
// timing-only probe sets it (Stats.Retained); a collection per look makes
// it too slow for every run.
type Retention struct {
	made, next int64
	views      []weak.Pointer[Ptr]
	handles    []weak.Pointer[handle]
	// ViewCost and HandleCost weigh a view and a handle (bytes) to find
	// the peak: PeakViews and PeakHandles are the counts (sampled, times
	// sampleEvery) at the look where their weighted sum was largest.
	ViewCost, HandleCost int64
	PeakViews            int64
	PeakHandles          int64
	// PeakHandleBytes are the bytes the handles' operations move, at the
	// same look: a run that moves bytes keeps them with the handle (a
	// fetched tile, the tile a store writes).
	PeakHandleBytes int64
	// Looks counts the collections, Skipped the looks that needed none
	// (note).
	Looks, Skipped int
	// Every and Gap: every Every-th value is followed, and a look comes
	// once the values made have grown by an eighth, at least Gap
	// (sampleEvery and minGap; Fine makes them 1 and fineGap or more).
	Every, Gap int64
}

const (
	sampleEvery = 8
	minGap      = 1 << 13
	// fineGap: the gap of a fine Retention, for the small probes an
	// estimate extrapolates from, whose few thousand values the default
	// sampling would see at one look or none (ring_allreduce_manual at 16
	// ranks: 304 of the thousands of handles its kernels hold).
	fineGap = 1 << 8
)

// retentions counts the Retentions in use (the probes under way):
// noteView, called for every view a kernel makes, looks its kernel up only
// while there is one.
var retentions atomic.Int32

// NewRetention is a Retention weighing a view and a handle at viewCost
// and handleCost bytes; Close ends it.
func NewRetention(viewCost, handleCost int64) *Retention {
	retentions.Add(1)
	return &Retention{ViewCost: viewCost, HandleCost: handleCost, Every: sampleEvery, Gap: minGap}
}

// Fine follows every value and looks from every 256 made, or one per
// rank of the simulation's ranks when they are more: for the probes an
// estimate extrapolates from. A look is a full collection, whose cost
// grows with the probe's world: with a gap of 256 the quarter-world
// probe of a 65,536-rank tree (16,384 ranks, 11 values made a rank)
// looked 47 times, and the two probes' collections took 18 s of the
// run's 24; one per rank looks about once per value a rank makes, as
// the 256-rank probe of a 1024-rank run does with 256.
func (r *Retention) Fine(ranks int) { r.Every, r.Gap = 1, max(fineGap, int64(ranks)) }

// Close ends the following (noteView looks nothing up again once no
// Retention is in use).
func (r *Retention) Close() { retentions.Add(-1) }

// Made counts every view and handle made (sampled or not).
func (r *Retention) Made() int64 { return r.made }

func (r *Retention) noteView(p *Ptr) {
	if r.made%r.Every == 0 {
		r.views = append(r.views, weak.Make(p))
	}
	r.note()
}

func (r *Retention) noteHandle(h *handle) {
	if r.made%r.Every == 0 {
		r.handles = append(r.handles, weak.Make(h))
	}
	r.note()
}

func (r *Retention) note() {
	r.made++
	if r.made < r.next {
		return
	}
	r.next = r.made + max(r.Gap, r.made/8)
	// The sampled values live now are at most those the sample holds,
	// live at the last look or made since: when even they weigh no more
	// than the peak, the look could not raise it and needs no collection
	// (a kernel that dropped its table of views: a tree's probe of 4096
	// ranks skips the last of its twelve).
	if r.weigh(int64(len(r.views))*r.Every, int64(len(r.handles))*r.Every) <= r.weigh(r.PeakViews, r.PeakHandles) {
		r.Skipped++
		return
	}
	r.Look()
}

// weigh is what views and handles weigh (ViewCost, HandleCost).
func (r *Retention) weigh(views, handles int64) int64 {
	return views*r.ViewCost + handles*r.HandleCost
}

// Look collects and counts the sampled values still reachable, dropping
// the others from the sample.
func (r *Retention) Look() {
	runtime.GC()
	r.Looks++
	v, h := compact(r.views), compact(r.handles)
	r.views, r.handles = r.views[:v], r.handles[:h]
	nv, nh := int64(v)*r.Every, int64(h)*r.Every
	if r.weigh(nv, nh) > r.weigh(r.PeakViews, r.PeakHandles) {
		r.PeakViews, r.PeakHandles = nv, nh
		r.PeakHandleBytes = 0
		for _, w := range r.handles {
			if h := w.Value(); h != nil && h.Op != nil {
				switch h.Op.Kind {
				case machine.OpFetch:
					r.PeakHandleBytes += h.Op.Src.N * r.Every
				case machine.OpStore:
					r.PeakHandleBytes += h.Op.Dst.N * r.Every
				}
			}
		}
	}
}

// compact moves the live weak pointers of s to its front and returns how
// many there are.
func compact[T any](s []weak.Pointer[T]) int {
	n := 0
	for _, w := range s {
		if w.Value() != nil {
			s[n] = w
			n++
		}
	}
	clear(s[n:])
	return n
}

// noteView follows view p of the kernel th runs, when its simulation is
// probed (Stats.Retained).
func noteView(th interface{ Local(string) any }, p *Ptr) {
	if retentions.Load() == 0 {
		return // no probe under way: no lookup per view made
	}
	k, ok := th.Local(threadKernelKey).(*Kernel)
	if !ok {
		k, ok = th.Local(ViewsKey).(*Kernel)
	}
	if ok && k != nil && k.Stats != nil && k.Stats.Retained != nil {
		k.Stats.Retained.noteView(p)
	}
}

// ViewsKey is the thread-local naming the kernel whose Retention follows
// the views a thread makes before its first tl call (a kernel that cuts
// its buffers into a table of pieces first); the bench sets it.
const ViewsKey = "kernbench.tl.views"
