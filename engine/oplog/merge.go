package oplog

import (
	"fmt"

	"kernbench/engine/sim"
)

// A partitioned run (engine/sim's Partitioned) keeps a log per partition
// (per SIP), each written by its own partition only, with the time each
// record was written at (Log.Clock). MergeLogs makes the run's one log of
// them, the log phase 2 replays and --op-log writes:
//
//   - order: (time written, partition, order of writing), as
//     sim.MergeByTime: the partitions are the machine's SIPs whatever the
//     number of threads, and each writes its records in the same order
//     and at the same times for every K, so the merged log is the same
//     for every K;
//   - sequence numbers: the merged order's (Add);
//   - tile IDs: each partition numbers its tiles 1, 2, … (Log.NewTile);
//     partition p's tile t becomes t plus the tiles of partitions 0 to
//     p-1, so IDs stay dense (the replay keeps tiles in slices by ID) and
//     do not depend on K. A tile never leaves its partition (a kernel's
//     tiles are its own), so no record names another partition's tile.
//
// The parts are left as they are; the merged log shares their records'
// bytes (Data) and marker args. Witnessed parts (a run diagnosing a
// phase-2 mismatch) must all be witnessed with one seed (WitnessAll):
// the merged log is witnessed with it, each record keeping its part's
// digest and origin under its new sequence number.
func MergeLogs(parts []*Log) (*Log, error) { return mergeLogs(parts, false) }

// MergeLogsConsuming is MergeLogs that lets go of each part's records as
// they are merged (a slab of them at a time): the merged log and the
// parts are never both whole, and the parts are empty afterwards.
func MergeLogsConsuming(parts []*Log) (*Log, error) { return mergeLogs(parts, true) }

func mergeLogs(parts []*Log, consume bool) (*Log, error) {
	offset := make([]int64, len(parts))
	var tiles int64
	total := 0
	for p, l := range parts {
		if (l.wit != nil) != (parts[0].wit != nil) || l.wit != nil && l.wit.seed != parts[0].wit.seed {
			return nil, fmt.Errorf("oplog: partition %d's log is witnessed unlike partition 0's (WitnessAll witnesses the parts alike)", p)
		}
		if len(l.when) != l.n {
			return nil, fmt.Errorf("oplog: partition %d's log has %d records and %d times (its Clock was not set from the start)", p, l.n, len(l.when))
		}
		offset[p] = tiles
		tiles += l.tiles
		total += l.n
	}
	out := &Log{tiles: tiles, pool: parts[0].pool}
	if w := parts[0].wit; w != nil {
		out.wit = &witness{seed: w.seed}
	}
	shift := func(id, off int64) int64 {
		if id > 0 {
			return id + off
		}
		return id
	}
	// The order of sim.MergeByTime, taken from the parts' times in place:
	// a verified run's log is millions of records, and a list of
	// references to them, or a Record made per record, came to more than
	// the merged log itself (a 256-rank verified ring on 8 SIPs peaked
	// 45 % above its one-Sim run).
	heads := make([]int, len(parts))
	var r Record
	for range total {
		best, bestAt := -1, sim.Never
		for p, l := range parts {
			if h := heads[p]; h < l.n && (best < 0 || l.when[h] < bestAt) {
				best, bestAt = p, l.when[h]
			}
		}
		l, i := parts[best], heads[best]
		heads[best]++
		l.recordInto(l.at(i), &r)
		off := offset[best]
		r.TileOut, r.TileA, r.TileB = shift(r.TileOut, off), shift(r.TileA, off), shift(r.TileB, off)
		out.Add(&r)
		if consume && heads[best]&(1<<slabShift-1) == 0 {
			l.slabs[heads[best]>>slabShift-1] = nil // (every record of it merged)
		}
		if w := l.wit; w != nil {
			// (Add noted an empty digest: a part's record has no Produced.)
			n := len(out.wit.digests) - 1
			out.wit.digests[n], out.wit.origins[n] = w.digests[i], w.origins[i]
		}
	}
	if consume {
		for _, l := range parts {
			*l = Log{}
		}
	}
	return out, nil
}
