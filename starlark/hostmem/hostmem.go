// Package hostmem is the host memory a simulation may use: it estimates
// what a run will hold (Configured, Counted), tells the default
// --max-memory, measures what the process holds, stops the runs and the
// Starlark that pass their limit, and keeps the collector's headroom near
// what the runs hold. Process-wide settings (the Go
// runtime's soft memory limit and GC percent, the kernel's page
// population) are changed only through the Settings a program installs
// (Install): a program that installs none keeps its own.
//
// It knows nothing of ccl's runs beyond plain figures: ccl describes a
// run to the estimate (Run, Rings, Counts), registers it (GuardRun),
// hands the simulation TurnGuard's guard and a Starlark loader Watch's
// watch, and refuses or reports in its own terms.
package hostmem

import (
	"fmt"
	"math"
)

// FormatBytes prints n in binary units with one decimal (2.0 GiB).
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f, u := float64(n), "KMGTPE"
	i := -1
	for f >= unit && i < len(u)-1 {
		f /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", f, u[i])
}

// LimitText is how a message names the --max-memory limit: a user who
// gave none is told the figure is the default and what it is made of.
func LimitText(limit int64, isDefault bool) string {
	if isDefault {
		return FormatBytes(limit) + " (" + DefaultLimitWhy() + ")"
	}
	return FormatBytes(limit)
}

// RuntimeBytes is what a small run of the binary holds (14.4 to 15.6 MiB
// measured at 2 to 8 ranks × 4K; runs that churn more reach 20 MiB, the
// collector's minimum heap filled): the floor of every estimate, and the
// smallest limit a memory watch is kept for (Watch).
const RuntimeBytes = 20 << 20

// SatAdd is a+b for byte counts (a, b >= 0), or the largest int64 when
// that overflows: a size past what any machine holds compares as too
// large instead of wrapping to a negative one.
func SatAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// SatMul is a*b for byte counts (a, b >= 0), saturating as SatAdd.
func SatMul(a, b int64) int64 {
	if a != 0 && b > math.MaxInt64/a {
		return math.MaxInt64
	}
	return a * b
}
