//go:build !linux

package ccl

// populate does nothing outside Linux (see populate_linux.go): the fill
// faults the pages in.
func populate([]byte) {}
