// Package collective declares the builtin collectives once: their names,
// the bench's buffer layout and nccl-tests' bus bandwidth factor. Config
// validation (engine/config), MSCCL import (engine/msccl), the builtin
// bench and its reference results (starlark/ccl), the CLI's help and the
// documentation all take the collectives from Table, so adding one means
// adding a row here and its reference in starlark/ccl (a test in
// cmd/kernbench fails until every list agrees).
//
// The package is pure data and imports only the standard library.
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
	// Bus is nccl-tests' busbw/algbw factor, see BusFactor.
	Bus Bus
	// Result says what every rank's recv buffer holds afterwards, for the
	// documentation and the CLI's help.
	Result string
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

// Table lists the builtin collectives in the order messages and the
// documentation show them.
var Table = []Collective{
	{Name: "allreduce", Reduces: true, Bus: BusTwice,
		Result: "every recv = redop over ranks of send"},
	{Name: "reduce_scatter", SendMul: true, Reduces: true, Bus: BusShare,
		Result: "recv of rank r = redop of chunk r of every send"},
	{Name: "allgather", RecvMul: true, Bus: BusShare,
		Result: "chunk r of every recv = send of rank r"},
	{Name: "broadcast", Rooted: true, Bus: BusOne,
		Result: "every recv = send of `root` (kernel keyword `root`)"},
	{Name: "reduce", Reduces: true, Rooted: true, Bus: BusOne,
		Result: "recv of `root` = redop; other ranks' recv unchanged"},
	{Name: "alltoall", SendMul: true, RecvMul: true, Bus: BusShare,
		Result: "chunk j of recv on rank r = chunk r of send on rank j"},
}

// Names lists the names of Table, in its order.
func Names() []string {
	out := make([]string, len(Table))
	for i, c := range Table {
		out[i] = c.Name
	}
	return out
}

// Lookup finds a collective of Table by name.
func Lookup(name string) (Collective, bool) {
	i := slices.IndexFunc(Table, func(c Collective) bool { return c.Name == name })
	if i < 0 {
		return Collective{}, false
	}
	return Table[i], true
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
