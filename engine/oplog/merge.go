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
func MergeLogs(parts []*Log) (*Log, error) {
	type ref struct {
		p, i int
		at   sim.Time
	}
	refs := make([][]ref, len(parts))
	offset := make([]int64, len(parts))
	var tiles int64
	for p, l := range parts {
		if (l.wit != nil) != (parts[0].wit != nil) || l.wit != nil && l.wit.seed != parts[0].wit.seed {
			return nil, fmt.Errorf("oplog: partition %d's log is witnessed unlike partition 0's (WitnessAll witnesses the parts alike)", p)
		}
		if len(l.when) != l.n {
			return nil, fmt.Errorf("oplog: partition %d's log has %d records and %d times (its Clock was not set from the start)", p, l.n, len(l.when))
		}
		offset[p] = tiles
		tiles += l.tiles
		refs[p] = make([]ref, l.n)
		for i := range l.n {
			refs[p][i] = ref{p, i, l.when[i]}
		}
	}
	out := &Log{tiles: tiles}
	if w := parts[0].wit; w != nil {
		out.wit = &witness{seed: w.seed}
	}
	shift := func(id, off int64) int64 {
		if id > 0 {
			return id + off
		}
		return id
	}
	for _, rf := range sim.MergeByTime(refs, func(r ref) sim.Time { return r.at }) {
		r := parts[rf.p].Record(rf.i)
		off := offset[rf.p]
		r.TileOut, r.TileA, r.TileB = shift(r.TileOut, off), shift(r.TileA, off), shift(r.TileB, off)
		out.Add(r)
		if w := parts[rf.p].wit; w != nil {
			// (Add noted an empty digest: a part's record has no Produced.)
			n := len(out.wit.digests) - 1
			out.wit.digests[n], out.wit.origins[n] = w.digests[rf.i], w.origins[rf.i]
		}
	}
	return out, nil
}
