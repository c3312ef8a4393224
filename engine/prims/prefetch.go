package prims

import "kernbench/engine/machine"

// PrefetchQueue holds the operand loads issued ahead of their primitive
// (tl.prefetch), each with the handle H of its load, in issue order. A
// primitive takes its operand's loads in order, so a take is almost
// always at the head, which then just moves on (removing the first entry
// of a slice shifted every other one, per piece).
type PrefetchQueue[H comparable] struct {
	loads []Prefetched[H]
	head  int
}

// Prefetched is a load issued ahead of its primitive: the range loaded
// and the load's handle.
type Prefetched[H comparable] struct {
	Reg machine.Region
	H   H
}

// Live are the loads not taken yet.
func (pq *PrefetchQueue[H]) Live() []Prefetched[H] { return pq.loads[pq.head:] }

// Empty reports whether the queue holds no load (taken or not).
func (pq *PrefetchQueue[H]) Empty() bool { return len(pq.loads) == 0 }

// Push appends a load, reusing the room of taken ones when full.
func (pq *PrefetchQueue[H]) Push(reg machine.Region, h H) {
	if len(pq.loads) == cap(pq.loads) && pq.head > 0 {
		n := copy(pq.loads, pq.loads[pq.head:])
		clear(pq.loads[n:])
		pq.loads, pq.head = pq.loads[:n], 0
	}
	pq.loads = append(pq.loads, Prefetched[H]{reg, h})
}

// Take returns and forgets the load of exactly reg (the zero H: none).
func (pq *PrefetchQueue[H]) Take(reg machine.Region) H {
	for i := pq.head; i < len(pq.loads); i++ {
		p := pq.loads[i]
		if p.Reg != reg {
			continue
		}
		if i == pq.head {
			pq.loads[i] = Prefetched[H]{}
			pq.head++
			if pq.head == len(pq.loads) {
				pq.loads, pq.head = pq.loads[:0], 0
			}
		} else {
			copy(pq.loads[i:], pq.loads[i+1:])
			pq.loads[len(pq.loads)-1] = Prefetched[H]{}
			pq.loads = pq.loads[:len(pq.loads)-1]
		}
		return p.H
	}
	var none H
	return none
}

// Overlaps reports whether a load not taken yet overlaps reg.
func (pq *PrefetchQueue[H]) Overlaps(reg machine.Region) bool {
	for _, p := range pq.Live() {
		if p.Reg.Overlaps(reg) {
			return true
		}
	}
	return false
}

// Drop forgets the loads that a write to reg makes stale.
func (pq *PrefetchQueue[H]) Drop(reg machine.Region) {
	if !pq.Overlaps(reg) {
		return // the common case: the write is not to a prefetched operand
	}
	live := pq.loads[:pq.head]
	for _, p := range pq.Live() {
		if !p.Reg.Overlaps(reg) {
			live = append(live, p)
		}
	}
	clear(pq.loads[len(live):])
	pq.loads = live
	if pq.head == len(pq.loads) {
		pq.loads, pq.head = pq.loads[:0], 0
	}
}
