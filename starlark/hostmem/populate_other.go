//go:build !linux

package hostmem

// populate does nothing outside Linux (see populate_linux.go): the fill
// faults the pages in.
func populate([]byte) {}
