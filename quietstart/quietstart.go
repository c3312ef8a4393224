// Package quietstart keeps go.starlark.net's start-up quiet and out of
// the way of an address-space limit. Its package starlark reserves 4 GiB
// of address space as it is initialised (its small-integer encoding).
// Under an address-space limit (ulimit -v, RLIMIT_AS) that reservation
// either fails, and starlark logs "Starlark failed to allocate 4GB address
// space ... Integer performance may suffer." on stderr before kernbench's
// main runs, on every command; or it succeeds and takes 4 GiB of the
// address space the Go heap needs (under ulimit -v 8G, half of what the
// runtime leaves). kernbench takes the limit into account itself (its
// default --max-memory), so under a limit the reservation is made to fail
// and its line is not printed.
//
// The module path sorts before go.starlark.net/starlark, and a program's
// packages are initialised in the order of their import paths wherever
// their imports allow (the Go spec, "Package initialization"): this
// package's init, which needs only the standard library, runs before
// starlark's. It sends the standard logger's output nowhere and, under a
// limit, lowers the soft limit below what the reservation needs, until
// Restore.
package quietstart

import (
	"io"
	"log"
)

var saved io.Writer

func init() {
	saved = log.Writer()
	log.SetOutput(io.Discard)
	lowerAddressSpace()
}

// Restore gives the standard logger its output and the process its
// address-space limit back; the program's main calls it first.
func Restore() {
	if saved != nil {
		log.SetOutput(saved)
	}
	restoreAddressSpace()
}
