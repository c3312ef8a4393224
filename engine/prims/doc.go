// Package prims is the simulation side of a rank's chunk primitives: the
// bookkeeping that decides what the fused primitives (recv_reduce_send,
// recv_copy_send, …) and the plain tl operations may do on the simulated
// machine and when, independent of any script language. It holds the
// rank's issued writes that later writes and reads are checked against
// (WriteWriteHazard, PendingStoreHazard) and the sends whose sources
// must not be written yet (SendBufferHazard), the primitives' stores
// still under way into their destinations, the queue of operand loads
// issued ahead of their primitive, the staging ring forwarded pieces are
// stored into and the landing slots of rings outside TCM, the ownership of a piece's bytes while its stores copy
// them, which thread of the rank uses each direction side and reads each
// primitive's operand, how a buffer send is cut into messages, and the
// one-shot flags the rank's threads wait for. It also holds the values the
// pipeline of pieces works on: a typed view of memory (View), a tile's
// value (Tile), a load and the pool of the primitives' private loads
// (Load, LoadPool), the cut of a buffer into pieces and the check of each
// received piece (PieceElems, NextPiece), and the forwarded piece whose
// send waits for the next one (Deferred). Its failures, the hazards'
// (PendingStoreHazard, WriteWriteHazard, SendBufferHazard,
// DirectionInUse, LocalOperandHazard) among them, are
// Errors that name their kind, which starlark/errkind maps by name.
//
// starlark/tl is its Starlark face: it unpacks arguments, names call sites
// and turns what this package reports into the kinded errors of the
// reference; its Ptr, Tile and handle begin with this package's View,
// Tile and Load.
package prims
