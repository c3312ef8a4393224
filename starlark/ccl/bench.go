package ccl

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"kernbench/starlark/hostmem"
	"kernbench/starlark/report"
	"math"
	"slices"
	"strings"

	"kernbench/engine/dtype"
	"kernbench/engine/machine"
	"kernbench/starlark/errkind"
	"kernbench/starlark/tl"
)

// buffers are the builtin collective bench's: per-rank send and recv
// buffers in the data space, deterministic inputs, a sentinel in
// out-of-place recv buffers, and the reference check after the run.
type buffers struct {
	p      *plan
	count  int64
	send   []*tl.Ptr
	recv   []*tl.Ptr
	inputs [][]byte // copies of the send buffers before the run
	before [][]byte // recv buffers before the run
	// sums adds up the send buffers as they are filled, for a reference
	// that reduces them (nil: it reads them; see Collective.Expected).
	sums *dtype.FillSum
}

func dataMemory(pe *machine.PE, s machine.Space) *machine.Memory {
	switch s {
	case machine.TCM:
		return pe.TCM
	case machine.SRAM:
		return pe.SRAM
	}
	return pe.HBM
}

// fitHint says what makes a bench's buffers fit: HBM, the largest memory,
// unless they are there already (then only a smaller size helps).
func fitHint(s machine.Space) string {
	if s == machine.HBM {
		return "use a smaller --count or --bytes (or a larger system.memory.hbm.capacity)"
	}
	return "try --data-space hbm or a smaller --count or --bytes"
}

// checkFits refuses a count whose buffers cannot fit the simulated memory
// at all (before the host-memory estimate: the simulated machine's limit
// is the one to name).
func checkFits(p *plan, m *machine.Machine, count int64) error {
	sz := int64(p.dt.Size())
	if mem := dataMemory(m.Ranks[0], p.dataSpace); count > mem.Capacity/sz {
		// (count × size may pass 2^63: --count 2^63-1 of f32 said "-4 bytes".)
		bytes := fmt.Sprintf("%d bytes", count*sz)
		if count > math.MaxInt64/sz {
			bytes = "more than 2^63 bytes"
		}
		return report.WithKind(errkind.MemoryLimit, &report.Failure{Rank: 0,
			Msg: fmt.Sprintf("bench: rank 0's buffer of %d × %s (%s) does not fit: %v holds %d bytes; %s", count, p.dt, bytes, mem, mem.Capacity, fitHint(p.dataSpace))})
	}
	return nil
}

// checkSpace makes every rank's buffer allocations of count elements
// (sc and rc, or one buffer in place) in the simulated memories' address
// space only, as newBuffers makes them, and gives the space back: buffers
// that do not all fit are refused with the allocation's own error, before
// the host-memory estimate (which would name the wrong limit) and before
// any of them is backed or filled (two ranks of 1 GiB where only the
// first buffer fits took 17 s of clearing reused heap first, in a process
// that had run the size before).
func checkSpace(p *plan, m *machine.Machine, count int64) error {
	sz := int64(p.dt.Size())
	sc, rc := p.coll.sendCount(count, p.world), p.coll.recvCount(count, p.world)
	var check machine.SpaceCheck
	defer check.Undo()
	for r := 0; r < p.world; r++ {
		mem := dataMemory(m.Ranks[r], p.dataSpace)
		if p.opts.InPlace {
			if err := check.Alloc(mem, max(sc, rc)*sz); err != nil {
				return noFit(p, r, "buffer", max(sc, rc), err)
			}
			continue
		}
		if err := check.Alloc(mem, sc*sz); err != nil {
			return noFit(p, r, "sendbuf", sc, err)
		}
		if err := check.Alloc(mem, rc*sz); err != nil {
			return noFit(p, r, "recvbuf", rc, err)
		}
	}
	return nil
}

// refusedInSweep is err, the failure of buffers that do not fit the
// simulated memory, as a sweep of several sizes takes it
// (Options.RefusedAsRows): a refused size whose row says why, while the
// sizes that fit run, as a size over --max-memory is. A sweep whose
// largest size did not fit failed there, after the smaller ones, with no
// word of the sizes after it, and a tune or comparison lost the winners
// of the sizes that fit.
func refusedInSweep(p *plan, err error) error {
	var f *report.Failure
	if !p.opts.RefusedAsRows || !errors.As(err, &f) {
		return err
	}
	// The row says what does not fit; what to do is said once for the
	// sweep (compare.RefusedSizes).
	reason := strings.TrimSuffix(strings.TrimPrefix(f.Msg, "bench: "), "; "+fitHint(p.dataSpace))
	return &report.Refusal{Kind: f.ErrorKind().Name, Simulated: true, Reason: reason, Message: f.Msg}
}

// noFit is the error of rank r's bench buffer what, of n elements, that
// its data memory refused with err.
func noFit(p *plan, r int, what string, n int64, err error) error {
	return report.WithKind(errkind.MemoryLimit, &report.Failure{Rank: r,
		Msg: fmt.Sprintf("bench: rank %d %s (%d × %s) does not fit: %v; %s", r, what, n, p.dt, err, fitHint(p.dataSpace)), Err: err})
}

func newBuffers(p *plan, m *machine.Machine, count int64) (*buffers, error) {
	b := &buffers{p: p, count: count}
	sz := int64(p.dt.Size())
	// (setUp made sure the buffers fit: checkFits, checkSpace.)
	sc, rc := p.coll.sendCount(count, p.world), p.coll.recvCount(count, p.world)
	if p.opts.Verify && !m.TimingOnly && p.coll.Reduces {
		b.sums = dtype.NewFillSum(p.dt, sc, p.world)
	}
	ahead := p.roomAhead(count)
	for r := 0; r < p.world; r++ {
		mem := dataMemory(m.Ranks[r], p.dataSpace)
		mem.ReserveAhead((sc+rc)*sz, ahead)
		alloc := func(n int64, what string) (machine.Region, error) {
			off, err := mem.Alloc(n * sz)
			if err != nil {
				return machine.Region{}, noFit(p, r, what, n, err)
			}
			return machine.Region{Mem: mem, Off: off, N: n * sz}, nil
		}
		var sendReg, recvReg machine.Region
		var err error
		if p.opts.InPlace {
			// NCCL in-place conventions: one buffer; for reduce_scatter the
			// recv view is the rank's chunk, for allgather the send view is.
			big := max(sc, rc)
			whole, err := alloc(big, "buffer")
			if err != nil {
				return nil, err
			}
			sendReg, recvReg = whole.Sub(0, sc*sz), whole.Sub(0, rc*sz)
			// (the count-sized buffer of a collective whose other buffer
			// holds count × world_size elements).
			switch {
			case p.coll.SendMul && !p.coll.RecvMul:
				recvReg = whole.Sub(int64(r)*count*sz, count*sz)
			case p.coll.RecvMul && !p.coll.SendMul:
				sendReg = whole.Sub(int64(r)*count*sz, count*sz)
			}
		} else {
			if sendReg, err = alloc(sc, "sendbuf"); err != nil {
				return nil, err
			}
			if recvReg, err = alloc(rc, "recvbuf"); err != nil {
				return nil, err
			}
			if !m.TimingOnly {
				hostmem.Populate(recvReg.Bytes())
				fillSentinel(p.dt, recvReg)
			}
		}
		if !m.TimingOnly {
			hostmem.Populate(sendReg.Bytes())
			if b.sums != nil {
				b.sums.Fill(sendReg.Bytes(), p.opts.Seed, r)
			} else {
				dtype.Fill(p.dt, sendReg.Bytes(), p.opts.Seed, r)
			}
		}
		b.send = append(b.send, tl.NewPtr(sendReg, p.dt, sc, r))
		b.recv = append(b.recv, tl.NewPtr(recvReg, p.dt, rc, r))
	}
	return b, nil
}

// fillSentinel makes recv read as the sentinel without writing it
// (Region.FillPattern): the run's stores overwrite most of it, and the
// blocks they do not are written with it when read.
func fillSentinel(dt dtype.DType, recv machine.Region) {
	var pat [8]byte
	if 8%dt.Size() != 0 {
		sentinel(dt, recv.Bytes())
		return
	}
	sentinel(dt, pat[:])
	recv.FillPattern(binary.LittleEndian.Uint64(pat[:]))
}

// roomAhead is the bytes of a rank's bench buffers at the largest size
// of the sweep above count, which its memory keeps room for (pages not
// touched until used, machine.Memory.ReserveAhead): the sizes after it
// take its slices and back only what they add, instead of new slices
// (the collector would clear reused heap pages, faulting them one by
// one). It is at most --max-memory over the ranks, which a size must fit
// to run, and 0 without that bound, under an address-space limit (where
// untouched room counts too), or with no larger size.
func (p *plan) roomAhead(count int64) int64 {
	largest := slices.Max(p.counts)
	if largest <= count || p.bufs == nil || p.opts.MaxMemory <= 0 || hostmem.AddressSpaceLimited() {
		return 0
	}
	need := (p.coll.sendCount(largest, p.world) + p.coll.recvCount(largest, p.world)) * int64(p.dt.Size())
	return min(need, p.opts.MaxMemory/int64(p.world))
}

// keepSentinels tells the pre-run image that every recv buffer holds its
// sentinel (newBuffers wrote it, a value repeated from the buffer's start):
// the run's first write to each of their blocks then saves it without
// checking its bytes for a pattern (128 MiB read in the verified 64-rank
// ring). An in-place buffer holds the send data instead.
func (b *buffers) keepSentinels(w *world) {
	if !w.keptImage || b.p.opts.InPlace {
		return
	}
	for _, r := range b.recv {
		r.Reg.KeepPreRunPattern()
	}
}

// keepInputs records what the reference check compares against: every
// rank's send and recv buffer before the run, as views of the pre-run
// image (which phase 2 needs anyway) or, for a buffer the run never
// wrote, of the live memory, so the bench copies nothing. It runs after
// phase 1 (the image is complete then) and before phase 2 (which replays
// onto the image). Without verification there is nothing to keep.
func (b *buffers) keepInputs(w *world) {
	if !b.p.opts.Verify || !w.keptImage {
		return
	}
	for r := range b.send {
		b.inputs = append(b.inputs, b.send[r].Reg.PreRun())
		if b.p.coll.KeepsRecv() {
			// Only then: a view of a recv buffer's pre-run bytes writes
			// out the blocks kept as a pattern (its sentinel).
			b.before = append(b.before, b.recv[r].Reg.PreRun())
		}
	}
}

// verify compares every rank's recv buffer with the reference and fills
// Wrong, FirstWrong and Verified.
func (b *buffers) verify(res *report.Result) {
	p := b.p
	want := p.coll.Expected(p.dt, p.red, p.root, b.count, b.inputs, b.before, b.sums)
	ranks := 1
	if p.coll.Reduces {
		ranks = p.world
	}
	for r := 0; r < p.world; r++ {
		got := b.recv[r].Reg.View()
		rb := report.WrongRanges{RankWrong: report.RankWrong{Rank: r}}
		if !p.opts.InPlace {
			rb.IsSentinel = func(i int) bool { return isSentinel(p.dt, got, i) }
		}
		wrong, first := dtype.EachWrong(p.dt, p.red, ranks, got, want[r], rb.Add)
		if wrong > 0 && res.FirstWrong == nil {
			res.FirstWrong = &report.WrongElem{Rank: r, Index: first, Got: dtype.Format(p.dt, got, first), Want: dtype.Format(p.dt, want[r], first)}
		}
		if wrong > 0 {
			res.WrongRanges = append(res.WrongRanges, rb.RankWrong)
		}
		res.Wrong += int64(wrong)
	}
	res.Verified = res.Wrong == 0
	if res.Wrong > 0 && !p.opts.InPlace && len(b.inputs) == len(b.send) {
		// A kernel that writes its sendbuf out of place (tl.copy(sendbuf,
		// x) for tl.copy(x, sendbuf)) sends what it wrote, and its wrong
		// elements look unrelated to the mistake: NaN copied from a
		// recvbuf even reads as "never written".
		for r := range b.send {
			if !bytes.Equal(b.send[r].Reg.View(), b.inputs[r]) {
				res.SendWritten = append(res.SendWritten, r)
			}
		}
	}
}
