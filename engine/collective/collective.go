// Package collective declares the builtin collectives once: their names,
// the bench's buffer layout, nccl-tests' bus bandwidth factor and the
// reference result the bench checks a run against. Config validation
// (engine/config), MSCCL import (engine/msccl), the builtin bench
// (starlark/ccl), the CLI's help and the documentation all take the
// collectives from Table, so adding one means adding a row here, with its
// reference (reference.go); nothing else switches on a collective's name
// (a test in cmd/kernbench fails until every list agrees).
package collective

import "slices"

// Collective is one builtin collective.
type Collective struct {
	// Name is how ccl.yaml, --collective and MSCCL's coll= name it.
	Name string
	// SendMul and RecvMul: the send (recv) buffer holds count × world_size
	// elements rather than count (nccl-tests' count is per chunk).
	SendMul, RecvMul bool
	// Reduces: the result combines ranks' data with the run's redop (so
	// the check allows rounding and --redop matters).
	Reduces bool
	// Rooted: the collective has a root rank (the kernel's `root` keyword,
	// --root, the report's root).
	Rooted bool
	// RecvUnchanged: some ranks' recv buffers must end as they began (the
	// non-root ranks of reduce), so the bench keeps them to check.
	RecvUnchanged bool
	// Bus is nccl-tests' busbw/algbw factor, see BusFactor.
	Bus Bus
	// Result says what every rank's recv buffer holds afterwards, for the
	// documentation and the CLI's help.
	Result string
	// reference computes Result (Collective.Expected).
	reference func(in *Inputs, out [][]byte)
}

// Bus is the shape of a collective's busbw/algbw factor for p ranks.
type Bus int

const (
	// BusOne: factor 1 (broadcast, reduce).
	BusOne Bus = iota
	// BusShare: (p-1)/p, a rank moves every chunk but its own once.
	BusShare
	// BusTwice: 2(p-1)/p, reduce-scatter then allgather.
	BusTwice
)

// Table is the builtin collectives in the order messages and the
// documentation show them (a copy: the table is read-only).
func Table() []Collective { return slices.Clone(table) }

var table = []Collective{
	{Name: "allreduce", Reduces: true, Bus: BusTwice,
		Result: "every recv = redop over ranks of send", reference: allreduce},
	{Name: "reduce_scatter", SendMul: true, Reduces: true, Bus: BusShare,
		Result: "recv of rank r = redop of chunk r of every send", reference: reduceScatter},
	{Name: "allgather", RecvMul: true, Bus: BusShare,
		Result: "chunk r of every recv = send of rank r", reference: allgather},
	{Name: "broadcast", Rooted: true, Bus: BusOne,
		Result: "every recv = send of `root` (kernel keyword `root`)", reference: broadcast},
	{Name: "reduce", Reduces: true, Rooted: true, RecvUnchanged: true, Bus: BusOne,
		Result: "recv of `root` = redop; other ranks' recv unchanged", reference: reduce},
	{Name: "alltoall", SendMul: true, RecvMul: true, Bus: BusShare,
		Result: "chunk j of recv on rank r = chunk r of send on rank j", reference: alltoall},
}

// Names lists the names of Table, in its order.
func Names() []string {
	out := make([]string, len(table))
	for i, c := range table {
		out[i] = c.Name
	}
	return out
}

// Lookup finds a collective of Table by name.
func Lookup(name string) (Collective, bool) {
	i := slices.IndexFunc(table, func(c Collective) bool { return c.Name == name })
	if i < 0 {
		return Collective{}, false
	}
	return table[i], true
}

// BusFactor is nccl-tests' busbw/algbw factor for p ranks.
func (c Collective) BusFactor(p int) float64 {
	fp := float64(p)
	switch c.Bus {
	case BusTwice:
		return 2 * (fp - 1) / fp
	case BusShare:
		return (fp - 1) / fp
	}
	return 1
}

// WideBuffers names the buffers that hold count × world_size elements,
// the size a report prints (nccl-tests' size: the larger buffer), for a
// line that tells it from --bytes: "recvbuf", "sendbuf", "sendbuf and
// recvbuf", or "" when both hold count elements.
func (c Collective) WideBuffers() string {
	switch {
	case c.SendMul && c.RecvMul:
		return "sendbuf and recvbuf"
	case c.SendMul:
		return "sendbuf"
	case c.RecvMul:
		return "recvbuf"
	}
	return ""
}
