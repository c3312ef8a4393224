// Package config decodes kernbench's ccl.yaml: the run defaults, the named
// algorithms and the simulated system.
//
// Decoding is strict and hand-written over the yaml.v3 node tree rather than
// left to reflection, so that every mistake is reported with the file and
// line it came from, the dotted key path, and what would have been accepted:
//
//	ccl.yaml:7: defaults.buffer_kind: got "dram", want one of tcm, hbm, sram; did you mean "hbm"?
//
// The schema lives in one place (schema.go) as a tree of rules; the same tree
// decodes files, checks --set key paths and lists allowed keys in messages.
// The default values live only in default.yaml, which is embedded (Default)
// and is byte-for-byte the ccl.yaml shipped at the repository root; Load
// starts from it, so keys a file leaves out of defaults: and system: keep
// their default values.
//
// Load applies --set overrides to the node tree before decoding; a mistake in
// an overridden value is reported against the --set item, not a file line.
// Decoding goes on past a bad key or value (leaving it out) so that one Load
// reports every mistake (Errors, --set items first, then in file order), up
// to maxErrors; checks across keys (defaults.algorithm names an algorithm,
// placement fits the machine) run only where what they read decoded.
//
// This package is part of the engine: it imports no Starlark and does no
// I/O. Callers read the file and resolve Algorithm.Module against the
// config's directory themselves.
package config
