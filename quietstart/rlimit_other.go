//go:build !linux

package quietstart

// Elsewhere only the log line is kept off stderr.
func lowerAddressSpace()   {}
func restoreAddressSpace() {}
