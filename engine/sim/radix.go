package sim

import "math/bits"

// radixTimes orders the pending buckets by time (Sim.times): a radix
// heap, a priority queue for keys never earlier than the last one taken,
// as simulated time never goes back. A bucket is kept in the bin of the
// highest base-64 digit in which its time differs from last and of its
// time's value of that digit, so placing one is a push on a list, and
// the bins in index order hold ever later times: the earliest pending
// time is in the lowest non-empty bin (two bitmaps find it). Taking it
// leaves every other bin as it is (their times differ from the new last
// where they differed from the old one); only the buckets that shared
// its bin fall into lower bins, each moving at most once per digit.
type radixTimes struct {
	// last is the time taken last (0 before any; the watchdog's limit
	// after it stopped the run, see Sim.Run): every pending time is at
	// least last, and last is at most Sim.now, so that every time At
	// takes can be placed.
	last Time
	n    int    // pending buckets
	used uint16 // bit k: some bin of digit k is not empty
	// usedBins[k] bit v: bins[64k+v] is not empty.
	usedBins [16]uint64
	// bins are lists linked through bucket.link.
	bins [16 * 64]*bucket
}

// radixDigitOf maps a bit length (1 to 64) to its base-64 digit (0 to
// 10: a non-negative Time has 63 bits).
var radixDigitOf = func() (d [65]uint8) {
	for n := 1; n <= 64; n++ {
		d[n] = uint8((n - 1) / 6)
	}
	return
}()

// push adds b (its time not pending, and at least r.last). The bin of
// time t is 64k+v for digit k, the highest in which t differs from last,
// and t's value v of it: times in a higher bin are later (they agree
// with last above their digit, where a higher digit or a higher value of
// it means a later time). t == last takes bin last&63 (digit 0 with
// last's own value, which no other time has).
func (r *radixTimes) push(b *bucket) {
	t := b.at
	k := uint(radixDigitOf[bits.Len64(uint64(t^r.last)|1)]) & 15
	v := uint(uint64(t)>>(6*k&63)) & 63
	i := k<<6 | v
	b.link = r.bins[i]
	r.bins[i] = b
	r.usedBins[k] |= 1 << v
	r.used |= 1 << k
	r.n++
}

// lowest returns the lowest non-empty bin's digit and value (there is
// one).
func (r *radixTimes) lowest() (k, v uint) {
	k = uint(bits.TrailingZeros16(r.used)) & 15
	return k, uint(bits.TrailingZeros64(r.usedBins[k])) & 63
}

// min returns the earliest pending time, Never when there is none.
func (r *radixTimes) min() Time {
	if r.n == 0 {
		return Never
	}
	k, v := r.lowest()
	return earliestOf(r.bins[k<<6|v]).at
}

// earliestOf returns the bucket of the earliest time in the list from b.
func earliestOf(b *bucket) *bucket {
	m := b
	for b = b.link; b != nil; b = b.link {
		if b.at < m.at {
			m = b
		}
	}
	return m
}

// pop removes the bucket of the earliest pending time (there is one) and
// returns it.
func (r *radixTimes) pop() *bucket { return r.popUntil(Never) }

// popUntil is pop when the earliest pending time is at most stop, and
// nil (nothing taken) when none is pending or the earliest is later: the
// run loop's three tests of an instant's end (no time left, the window's
// end, the limit) in one, finding the lowest bin once instead of twice
// (min, then pop), and searching the bin only when its first time is
// past stop (the end of a window, the limit).
func (r *radixTimes) popUntil(stop Time) *bucket {
	if r.used == 0 {
		return nil
	}
	k, v := r.lowest()
	i := k<<6 | v
	m := r.bins[i]
	// Any time of the bin at most stop means the earliest is; only a bin
	// of several times whose first is later needs a search.
	if m.at > stop && (m.link == nil || earliestOf(m).at > stop) {
		return nil
	}
	r.bins[i] = nil
	if r.usedBins[k] &^= 1 << v; r.usedBins[k] == 0 {
		r.used &^= 1 << k
	}
	r.n--
	if m.link != nil {
		m = r.spread(m, k)
	}
	r.last = m.at
	return m
}

// spread takes the earliest bucket of the list from b, the bin of digit
// k just emptied (it was the lowest non-empty bin, so every bin of a
// lower digit is empty), and places the others again relative to its
// time without looking for it first. The list's times agree with each
// other above digit k-1 (and k > 0: a bin of digit 0 holds one time), so
// binning them by their value of digit k-1 puts the earliest in the
// lowest of those bins, and every time in another bin is where it
// belongs relative to the earliest (it differs from it first at digit
// k-1). Only the times sharing the earliest one's bin spread again, a
// digit lower. The placements are those of finding the earliest and
// pushing the others again, with a cheaper step per time (a shift and a
// mask) and no pass to find the earliest: in the ring benchmarks most
// bins that fall apart are of digit 2, with 2 to 8 times (64-rank
// timing-only ring: 529 M instructions before, 524 M after).
func (r *radixTimes) spread(b *bucket, k uint) *bucket {
	for {
		k = (k - 1) & 15
		base := k << 6
		shift := 6 * k & 63
		var used uint64
		for b != nil {
			next := b.link
			v := uint(uint64(b.at)>>shift) & 63
			b.link = r.bins[base|v]
			r.bins[base|v] = b
			used |= 1 << v
			b = next
		}
		v := uint(bits.TrailingZeros64(used)) & 63
		b = r.bins[base|v]
		r.bins[base|v] = nil
		if used &^= 1 << v; used != 0 {
			r.usedBins[k] = used
			r.used |= 1 << k
		}
		if b.link == nil {
			return b
		}
	}
}

// rebaseAll places every pending bucket again relative to t, at most
// the earliest pending time: last becomes t.
func (r *radixTimes) rebaseAll(t Time) {
	var all *bucket
	for i, b := range r.bins {
		for b != nil {
			next := b.link
			b.link = all
			all = b
			b = next
		}
		r.bins[i] = nil
	}
	r.used, r.usedBins, r.n = 0, [16]uint64{}, 0
	r.last = t
	for all != nil {
		next := all.link
		r.push(all)
		all = next
	}
}
