// Package topology builds and checks the neighbour maps of an IPCQ process
// group (docs/topologies.md; invariant I3, docs/architecture.md).
//
// A neighbour map for one rank is a map[string]int from a direction name to
// the peer rank; a whole topology is one map per rank, indexed by rank. Every
// installed direction is one queue pair: direction d of rank A and its
// reverse direction on the peer B are the two ends of the same pair.
//
// What lives here:
//
//   - [Table] declares the builtin topologies once (name, directions,
//     generator); [Names], config validation, the CLI's help and the
//     documentation follow it. [Builtin] generates one for a world size,
//     with one or more channels per neighbour.
//   - [Validate] checks invariant I3 after an algorithm's neighbors() hook
//     has had its say, and returns the [Pairing]: for every (rank,
//     direction) the direction on the peer that forms the other end of the
//     queue pair, so the runtime can install queue pairs without working
//     out reverses itself.
//
// The package is pure data: it imports only the standard library, knows
// nothing of Starlark, ranks' PEs or time, and never iterates a map without
// sorting its keys, so its results and error texts are deterministic. The
// Starlark glue (init_process_group and the neighbors() hook) calls Builtin,
// lets the hook edit Topology.Maps, then calls Validate; a Validate error is
// an init failure (InitError).
//
// # Decisions
//
// ring_1d_unidir: the spec says "E only; the receiver side of E is W". Both
// E and W are installed on every rank (so tl.directions() lists ["E", "W"])
// and W is marked receive-only in [Topology.RecvOnly]: a rank sends on E and
// receives on W, and the runtime rejects tl.send on a receive-only direction
// as IpcqInvalidDirection. Nothing ever arrives on E (its other end, the
// peer's W, may not send), so the runtime rejects a receive on a direction
// whose peer end is receive-only in the same way (machine.Group.LookupRecv). RecvOnly entries that name
// directions a neighbors() hook removed are ignored.
//
// One-way maps: after a neighbors() hook, [ImplyReceiveEnds] gives the peer
// of every direction whose reverse name the peer lacks that reverse,
// receive-only, the same shape as ring_1d_unidir. It fills in nothing where
// the reverse is ambiguous (parent), undefined (custom names) or already
// taken, so those mistakes still reach Validate.
//
// Size-2 rings and mesh dimensions of size 2: E and W (or N and S) of a rank
// both point at the same peer. They are still two distinct queue pairs: E of
// A pairs with W of B and W of A with E of B, exactly as in a longer ring. A
// dimension of size 1 (world size 1, mesh_shape [1, C] or [R, 1]) has no
// directions at all, since every neighbour would be the rank itself and
// self-loops are not allowed.
//
// Reverse directions: E↔W, N↔S, child_left→parent, child_right→parent, and
// parent→whichever child direction of the parent points back. Any other name
// is a custom name; a custom name pairs only with a custom name, and only
// when the pairing is unambiguous: the two ranks each have exactly one custom
// direction pointing at the other. Builtin names pair by the fixed rules, so
// several directions between the same two ranks are fine as long as each
// finds exactly one partner.
//
// mesh_shape is read only by mesh_2d; other topologies ignore it, because it
// may come from ccl.yaml defaults shared by algorithms of other topologies.
package topology
