// Package prims is a rank's kernel on the simulated machine, without any
// script language: what each tl operation does there, with the rank's
// bookkeeping that decides what it may do and when.
//
// Its Kernel (one per rank and per tl.spawn thread) fetches, stores,
// copies, receives and sends on engine/machine (ops.go), computes tiles
// on the PE's math unit (tilemath.go) and runs the fused primitives
// (recv_reduce_send, recv_copy_send, …: primitive.go), whose pipeline of
// pieces (pipeline.go, NCCL's Primitives) is a state machine driven by
// the rank's process or by steps of the event loop. The bookkeeping is
// the rank's: the issued writes that later writes and reads are checked
// against (WriteWriteHazard, PendingStoreHazard) and the sends whose
// sources must not be written yet (SendBufferHazard), the primitives'
// stores still under way into their destinations, the queue of operand
// loads issued ahead of their primitive, the staging ring forwarded
// pieces are stored into and the landing slots of rings outside TCM, the
// ownership of a piece's bytes while its stores copy them, which thread
// of the rank uses each direction side and reads each primitive's
// operand, how a buffer send is cut into messages, and the one-shot
// events the rank's threads wait for. The values it works on are
// engine values: a typed view of memory (View), a tile (Tile), a load
// and the pool of the primitives' private loads (Load, LoadPool), the
// cut of a buffer into pieces and the check of each received piece
// (PieceElems, NextPiece), and the forwarded piece whose send waits for
// the next one (Deferred). Its failures are Errors that name their kind
// (PendingStoreHazard, WriteWriteHazard, SendBufferHazard,
// DirectionInUse, LocalOperandHazard, DtypeMismatch, …), which
// starlark/errkind maps by name.
//
// starlark/tl is its Starlark face: tl's Kernel begins with this
// package's Kernel, unpacks arguments into its calls, names call sites
// (Face) and turns views, tiles and loads into Starlark values (Ptr,
// Tile and handle begin with View, Tile and Load).
package prims
