// Package chakra writes a kernbench run as Chakra execution traces
// (mlcommons/chakra's et_def.proto) for ASTRA-sim: its one job is to turn
// a run's op_log into one ET file per rank, plus the network, system and
// remote-memory configurations ASTRA-sim's analytical backend needs to
// run them (kernbench run --export-chakra DIR; docs/astra-sim.md).
//
// It depends on the op_log alone (engine/oplog) and on a route function
// the caller gives: it knows nothing of Starlark or of the CLI. The
// schema is declared in et_def.proto and, for the encoder, in schema.go;
// the files are encoded by hand with protowire and decoded (Decode) by
// the protobuf runtime from a descriptor built from the same declaration.
package chakra
