//go:build !unix

package hostmem

import "testing"

// untouchedBytes is n bytes from the Go heap (no /proc here: the test
// that uses it is skipped).
func untouchedBytes(t *testing.T, n int) ([]byte, func()) { return make([]byte, n), func() {} }
