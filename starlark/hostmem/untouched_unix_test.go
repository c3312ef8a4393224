//go:build unix

package hostmem

import (
	"syscall"
	"testing"
)

// untouchedBytes is n bytes of fresh anonymous memory, none of it
// resident until written.
func untouchedBytes(t *testing.T, n int) ([]byte, func()) {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	return b, func() { syscall.Munmap(b) }
}
