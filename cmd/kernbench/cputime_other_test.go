//go:build !unix

package main

import "time"

// processCPU is not measured here: serial bad cases fall back to wall time.
func processCPU() (time.Duration, bool) { return 0, false }
