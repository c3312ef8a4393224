package oplog

import (
	"fmt"
	"hash/maphash"
)

// A witnessed log also keeps, for every record, a digest of what its
// effect produced in phase 1 (the bytes it wrote, or the tile it made) and
// a description of the call that issued it. The replay then compares each
// record's phase-2 effect with its phase-1 digest, in effect order, and
// names the first record whose effect differs: where phase 1 did something
// its op_log does not describe. A phase-2 mismatch is diagnosed by running
// the same size again with a witnessed log (the run is deterministic), so a
// passing run pays nothing for it.
type witness struct {
	seed    maphash.Seed
	digests []uint64 // by sequence number; see digest
	origins []string // by sequence number; "" when unknown
	// divergence is the first record, in effect order, whose phase-2
	// effect differs from its phase-1 digest (nil: none, or no replay yet).
	divergence *Divergence
}

// Divergence is the first record whose effect differs between the phases.
type Divergence struct {
	Record *Record
	Origin string // the call that issued it ("" when unknown)
}

func (d *Divergence) String() string {
	return fmt.Sprintf("record %d (%s)%s", d.Record.Seq, describe(d.Record), originText(d.Origin))
}

// Witness makes the log witnessed (see witness); call it before the first
// record is added.
func (l *Log) Witness() { l.wit = &witness{seed: maphash.MakeSeed()} }

// WitnessAll makes logs witnessed with one seed, so that MergeLogs can
// merge them (the parts of a partitioned run); call it before the first
// record is added to any.
func WitnessAll(logs []*Log) {
	seed := maphash.MakeSeed()
	for _, l := range logs {
		l.wit = &witness{seed: seed}
	}
}

// Witnessed reports whether records should carry Produced and Origin.
func (l *Log) Witnessed() bool { return l.wit != nil }

// Origin is the description of the call that issued record seq in a
// witnessed log ("" when unknown or not witnessed).
func (l *Log) Origin(seq uint64) string {
	if l.wit == nil || seq >= uint64(len(l.wit.origins)) {
		return ""
	}
	return l.wit.origins[seq]
}

// Divergence is the first record whose effect in the replay differed from
// phase 1's (nil when every record's matched, or the log is not witnessed).
func (l *Log) Divergence() *Divergence {
	if l.wit == nil {
		return nil
	}
	return l.wit.divergence
}

// digest summarises produced bytes; a record that produced nothing (nil)
// and one that produced zero bytes are told apart from every other by
// their length.
func (w *witness) digest(b []byte) uint64 {
	if b == nil {
		return 0
	}
	return maphash.Bytes(w.seed, b) ^ uint64(len(b))<<1 | 1
}

// witness keeps r's digest and origin (Add, in a witnessed log).
func (w *witness) note(r *Record) {
	w.digests = append(w.digests, w.digest(r.Produced))
	w.origins = append(w.origins, r.Origin)
}

// check compares what record r produced in the replay with its phase-1
// digest; the first difference in effect order is kept.
func (w *witness) check(l *Log, r *entry, produced []byte) {
	// A record whose phase-1 effect was not seen (nil Produced: a write
	// into memory phase 1 keeps no bytes for) is not compared.
	if w.divergence != nil || r.Seq >= uint64(len(w.digests)) || w.digests[r.Seq] == 0 {
		return
	}
	if w.digest(produced) != w.digests[r.Seq] {
		w.divergence = &Divergence{Record: l.record(r), Origin: w.origins[r.Seq]}
	}
}

// produced is what the replay's record r produced, read right after it
// was applied: the bytes it wrote, or the tile it made.
func (rp *replayer) produced(r *entry) []byte {
	if addr, n, ok := writeRange(rp.log, r); ok {
		b, _, err := rp.im.read(addr, n)
		if err != nil {
			return nil
		}
		return b
	}
	if r.Kind == KindMath || r.name == nameFetch {
		if id := r.TileOut; id > 0 && id < int64(len(rp.tiles)) && rp.tiles[id].live {
			return rp.tiles[id].data
		}
	}
	return nil
}

// describe names a record as reports do: kind, name, direction, rank and
// the end of its effect.
func describe(r *Record) string {
	s := fmt.Sprintf("%s %s", r.Kind, r.Name)
	if r.Dir != "" {
		s += " " + r.Dir
	}
	return s + fmt.Sprintf(", rank %d, t_end %v", r.Rank, r.TEnd)
}

func originText(o string) string {
	if o == "" {
		return ""
	}
	return ", issued by " + o
}
