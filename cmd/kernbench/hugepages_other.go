//go:build !linux

package main

// adviseHugePages does nothing outside Linux (see hugepages_linux.go).
func adviseHugePages() (stop func()) { return func() {} }
