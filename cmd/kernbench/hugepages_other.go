//go:build !linux || !(amd64 || arm64)

package main

// adviseHugePages does nothing outside Linux on amd64 and arm64 (see
// hugepages_linux64.go).
func adviseHugePages() (stop func()) { return func() {} }
