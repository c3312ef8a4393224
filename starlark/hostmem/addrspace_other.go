//go:build !linux

package hostmem

// addressSpaceRoom: only Linux is asked for its address-space limit.
func addressSpaceRoom() int64 { return 0 }
