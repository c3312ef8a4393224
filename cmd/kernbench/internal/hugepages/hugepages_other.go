//go:build !linux || !(amd64 || arm64)

package hugepages

// Advise does nothing outside Linux on amd64 and arm64 (see
// hugepages_linux64.go).
func Advise(ranks int) (stop func()) { return func() {} }
