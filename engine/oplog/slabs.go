package oplog

import (
	"sync"
	"unsafe"
)

// Slabs keeps the record slabs of finished logs for the next log: a
// sweep's sizes, one after another or side by side (-j), write their
// records into pages the previous size already backed instead of fresh
// ones (a 64-rank ring of 2 MiB logs about 40 MB of records). Its methods
// are safe for concurrent use. A nil *Slabs makes every slab anew.
type Slabs struct {
	// Populate, when set, backs a new slab's pages at once (one system
	// call instead of a fault per page as the log first writes each).
	Populate func([]byte)

	mu   sync.Mutex
	free [][]entry
}

// slab returns a slab for the log to fill: a kept one or a new one. Its
// entries need no clearing: add assigns every field of an entry.
func (s *Slabs) slab() []entry {
	if s != nil {
		s.mu.Lock()
		if k := len(s.free); k > 0 {
			sl := s.free[k-1]
			s.free[k-1] = nil
			s.free = s.free[:k-1]
			s.mu.Unlock()
			return sl
		}
		s.mu.Unlock()
	}
	sl := make([]entry, 1<<slabShift)
	if s != nil && s.Populate != nil {
		s.Populate(unsafe.Slice((*byte)(unsafe.Pointer(&sl[0])), len(sl)*int(unsafe.Sizeof(sl[0]))))
	}
	return sl
}

// UseSlabs makes the log take its slabs from s (before its first record).
func (l *Log) UseSlabs(s *Slabs) { l.pool = s }

// ReleaseSlabs gives the log's slabs to its Slabs (UseSlabs) for the next
// log. The log is empty afterwards: call it once nothing reads it.
func (l *Log) ReleaseSlabs() {
	if l.pool == nil {
		return
	}
	l.pool.mu.Lock()
	l.pool.free = append(l.pool.free, l.slabs...)
	l.pool.mu.Unlock()
	clear(l.slabs)
	l.slabs, l.n, l.scan, l.when = nil, 0, nil, nil
}
