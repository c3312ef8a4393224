package sim

// timeIndex finds a pending bucket (Sim.overflow) by its time: an
// open-addressing hash table with linear probing and backward-shift
// deletion. It does what a map[Time]*bucket does at a fraction of the
// cost on the event path (a multiply and a probe or two instead of the
// runtime's hashing); nothing iterates it, so its layout never shows in
// a result.
type timeIndex struct {
	slots []*bucket // nil: empty
	n     int       // buckets held
	shift uint      // 64 − log2(len(slots))
}

const timeIndexMinSize = 64

func (x *timeIndex) home(t Time) int {
	return int(uint64(t) * 0x9e3779b97f4a7c15 >> x.shift)
}

// get returns the bucket of time t, or nil.
func (x *timeIndex) get(t Time) *bucket {
	if x.n == 0 {
		return nil
	}
	mask := len(x.slots) - 1
	for i := x.home(t); ; i = (i + 1) & mask {
		b := x.slots[i]
		if b == nil || b.at == t {
			return b
		}
	}
}

// put adds b (whose time is not in the index).
func (x *timeIndex) put(b *bucket) {
	if 4*(x.n+1) > 3*len(x.slots) {
		x.grow()
	}
	mask := len(x.slots) - 1
	i := x.home(b.at)
	for x.slots[i] != nil {
		i = (i + 1) & mask
	}
	x.slots[i] = b
	x.n++
}

// remove deletes the bucket of time t, which is in the index.
func (x *timeIndex) remove(t Time) {
	mask := len(x.slots) - 1
	i := x.home(t)
	for x.slots[i].at != t {
		i = (i + 1) & mask
	}
	// Backward shift: move later entries of the probe run into the hole
	// when their home is not between the hole and them.
	for j := (i + 1) & mask; x.slots[j] != nil; j = (j + 1) & mask {
		h := x.home(x.slots[j].at)
		if (j-h)&mask >= (j-i)&mask {
			x.slots[i] = x.slots[j]
			i = j
		}
	}
	x.slots[i] = nil
	x.n--
}

func (x *timeIndex) grow() {
	old := x.slots
	size := max(timeIndexMinSize, 2*len(old))
	x.slots = make([]*bucket, size)
	x.shift = 64
	for s := size; s > 1; s >>= 1 {
		x.shift--
	}
	x.n = 0
	for _, b := range old {
		if b != nil {
			x.put(b)
		}
	}
}
