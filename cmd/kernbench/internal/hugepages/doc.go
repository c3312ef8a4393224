// Package hugepages asks the kernel for transparent huge pages for the Go
// heap of a timing-only run, its one job: a process-wide setting, which
// only the command makes (Linux on amd64 and arm64; elsewhere Advise does
// nothing).
package hugepages
