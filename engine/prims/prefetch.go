package prims

import "kernbench/engine/machine"

// PrefetchQueue holds the operand loads issued ahead of their primitive
// (tl.prefetch), each with the handle of its load (H, the caller's, nil
// for none), in issue order. A
// primitive takes its operand's loads in order, so a take is almost
// always at the head, which then just moves on (removing the first entry
// of a slice shifted every other one, per piece).
type PrefetchQueue struct {
	loads []Prefetched
	head  int
}

// Prefetched is a load issued ahead of its primitive: the range loaded
// and the load's handle.
type Prefetched struct {
	Reg machine.Region
	H   any
}

// Live are the loads not taken yet.
func (pq *PrefetchQueue) Live() []Prefetched { return pq.loads[pq.head:] }

// Len is the number of loads held, taken or not (0: the queue is empty).
func (pq *PrefetchQueue) Len() int { return len(pq.loads) }

// Push appends a load, reusing the room of taken ones when full.
func (pq *PrefetchQueue) Push(reg machine.Region, h any) {
	if len(pq.loads) == cap(pq.loads) && pq.head > 0 {
		n := copy(pq.loads, pq.loads[pq.head:])
		clear(pq.loads[n:])
		pq.loads, pq.head = pq.loads[:n], 0
	}
	pq.loads = append(pq.loads, Prefetched{reg, h})
}

// Take returns and forgets the handle of the load of exactly reg (nil:
// none).
func (pq *PrefetchQueue) Take(reg machine.Region) any {
	for i := pq.head; i < len(pq.loads); i++ {
		p := pq.loads[i]
		if p.Reg != reg {
			continue
		}
		if i == pq.head {
			pq.loads[i] = Prefetched{}
			pq.head++
			if pq.head == len(pq.loads) {
				pq.loads, pq.head = pq.loads[:0], 0
			}
		} else {
			copy(pq.loads[i:], pq.loads[i+1:])
			pq.loads[len(pq.loads)-1] = Prefetched{}
			pq.loads = pq.loads[:len(pq.loads)-1]
		}
		return p.H
	}
	return nil
}

// Overlaps reports whether a load not taken yet overlaps reg.
func (pq *PrefetchQueue) Overlaps(reg machine.Region) bool {
	for _, p := range pq.Live() {
		if p.Reg.Overlaps(reg) {
			return true
		}
	}
	return false
}

// Drop forgets the loads that a write to reg makes stale.
func (pq *PrefetchQueue) Drop(reg machine.Region) {
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
