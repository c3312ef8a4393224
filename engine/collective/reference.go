package collective

import "kernbench/engine/dtype"

// Inputs are what a reference result is computed from: the run's send
// buffers as they began, independently of any algorithm.
type Inputs struct {
	DT    dtype.DType
	Red   dtype.RedOp
	Root  int
	Count int64 // elements per chunk (nccl-tests' count)
	// Sends are every rank's send buffer; Before every rank's recv buffer
	// before the run, which the collectives with RecvUnchanged need (nil
	// otherwise).
	Sends, Before [][]byte
	// Sums, when not nil, holds the sums of the send buffers as they were
	// filled: the reductions it answers (dtype.FillSum.Reduce) are taken
	// from it instead of reading the buffers again.
	Sums *dtype.FillSum
}

// Expected computes every rank's expected recv buffer (float64
// accumulation in dtype.Reduce).
func (c Collective) Expected(in *Inputs) [][]byte {
	out := make([][]byte, len(in.Sends))
	c.reference(in, out)
	return out
}

// chunk is chunk i of b.
func (in *Inputs) chunk(b []byte, i int64) []byte {
	sz := int64(in.DT.Size())
	return b[i*in.Count*sz : (i+1)*in.Count*sz]
}

// reduceInto writes into dst the reduction over ranks of parts (the
// send buffers' elements from lo on).
func (in *Inputs) reduceInto(dst []byte, lo int64, parts [][]byte) {
	if in.Sums == nil || !in.Sums.Reduce(in.Red, dst, int(lo)) {
		dtype.Reduce(in.Red, in.DT, dst, parts)
	}
}

func (in *Inputs) chunkBytes() int64 { return in.Count * int64(in.DT.Size()) }

func allreduce(in *Inputs, out [][]byte) {
	want := make([]byte, in.chunkBytes())
	in.reduceInto(want, 0, in.Sends)
	for r := range out {
		out[r] = want
	}
}

func reduceScatter(in *Inputs, out [][]byte) {
	p := len(in.Sends)
	for r := range out {
		parts := make([][]byte, p)
		for s := range parts {
			parts[s] = in.chunk(in.Sends[s], int64(r))
		}
		out[r] = make([]byte, in.chunkBytes())
		in.reduceInto(out[r], int64(r)*in.Count, parts)
	}
}

func allgather(in *Inputs, out [][]byte) {
	want := make([]byte, 0, int64(len(in.Sends))*in.chunkBytes())
	for _, s := range in.Sends {
		want = append(want, s...)
	}
	for r := range out {
		out[r] = want
	}
}

func broadcast(in *Inputs, out [][]byte) {
	for r := range out {
		out[r] = in.Sends[in.Root]
	}
}

func reduce(in *Inputs, out [][]byte) {
	copy(out, in.Before)
	want := make([]byte, in.chunkBytes())
	in.reduceInto(want, 0, in.Sends)
	out[in.Root] = want
}

func alltoall(in *Inputs, out [][]byte) {
	p := len(in.Sends)
	for r := range out {
		out[r] = make([]byte, 0, int64(p)*in.chunkBytes())
		for s := range p {
			out[r] = append(out[r], in.chunk(in.Sends[s], int64(r))...)
		}
	}
}
