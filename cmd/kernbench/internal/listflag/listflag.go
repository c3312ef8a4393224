// Package listflag reads the flags that list sizes and ranks, its one job:
// --sweep MIN:MAX[:FACTOR] and nccl-tests' -b/-e, sizes as whole
// elements of a type, --trace-ranks, and check's --world-sizes.
package listflag

import (
	"fmt"
	"kernbench/engine/config"
	"kernbench/engine/dtype"
	"kernbench/starlark/check"
	"math"
	"strconv"
	"strings"
)

// CheckMinMax validates nccl-tests' -b/-e (already defaulted to
// each other when only one is given) and returns what is wrong with them
// in their own names, or "".
func CheckMinMax(lo, hi string) string {
	var sizes [2]int64
	for i, f := range []struct{ name, value string }{{"-b/--minbytes", lo}, {"-e/--maxbytes", hi}} {
		n, err := config.ParseSize(f.value)
		if err != nil {
			return f.name + ": " + err.Error()
		}
		if n <= 0 {
			return fmt.Sprintf("%s must be > 0 (got %s)", f.name, f.value)
		}
		sizes[i] = n
	}
	if sizes[0] > sizes[1] {
		return fmt.Sprintf("-b/--minbytes %s is larger than -e/--maxbytes %s", lo, hi)
	}
	return ""
}

// Sweep turns MIN:MAX[:FACTOR] into the list of sizes min, min×f, …
// up to max (inclusive), like nccl-tests' -b/-e/-f.
func Sweep(spec string) ([]int64, error) {
	parts := strings.Split(spec, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return nil, fmt.Errorf("--sweep %q: want MIN:MAX[:FACTOR], e.g. 1K:4M or 1K:4M:4", spec)
	}
	lo, err := config.ParseSize(parts[0])
	if err != nil {
		return nil, fmt.Errorf("--sweep %q: %w", spec, err)
	}
	hi, err := config.ParseSize(parts[1])
	if err != nil {
		return nil, fmt.Errorf("--sweep %q: %w", spec, err)
	}
	factor := 2.0
	if len(parts) == 3 {
		if factor, err = strconv.ParseFloat(parts[2], 64); err != nil || !(factor > 1) || math.IsInf(factor, 0) {
			return nil, fmt.Errorf("--sweep %q: FACTOR must be a number > 1", spec)
		}
	}
	if lo <= 0 || hi < lo {
		return nil, fmt.Errorf("--sweep %q: want 0 < MIN <= MAX", spec)
	}
	// The steps are counted first: a FACTOR a hair over 1 would take for
	// ever, and a sweep that stopped at a row cap would silently leave out
	// the sizes the user asked for up to MAX. The loop compares floats: a
	// huge FACTOR makes v infinite, whose int64 is negative.
	if steps := math.Log(float64(hi)/float64(lo)) / math.Log(factor); steps >= MaxSweep {
		return nil, fmt.Errorf("--sweep %q: about %.0f sizes, more than %d; use a larger FACTOR or a narrower MIN:MAX", spec, steps+1, MaxSweep)
	}
	var sizes []int64
	// float64(hi) of the largest sizes rounds up to 2^63, whose int64
	// wraps to the most negative size: the loop stops below it.
	for v := float64(lo); v <= float64(hi) && v < math.MaxInt64; v *= factor {
		// A FACTOR close to 1 rounds several steps to one size: one row.
		if n := int64(v); len(sizes) == 0 || n != sizes[len(sizes)-1] {
			sizes = append(sizes, n)
		}
	}
	return sizes, nil
}

// WholeElements rounds a sweep's sizes down to whole dt elements, one row
// per size: a sweep's rows used to run size/element elements, so that
// --sweep 3:9 ran a 0-element row and 4:16:1.1 eleven rows of three
// sizes. Its smallest size must be whole elements, as --bytes must
// (flag names it).
func WholeElements(sizes []int64, dt dtype.DType, flag string) ([]int64, error) {
	elem := int64(dt.Size())
	if len(sizes) > 0 && sizes[0]%elem != 0 {
		return nil, fmt.Errorf("%s: the smallest size, %d bytes, is not a whole number of %s elements (%d bytes each); use a multiple of %d", flag, sizes[0], dt, elem, elem)
	}
	var out []int64
	for _, n := range sizes {
		n -= n % elem
		if len(out) == 0 || n != out[len(out)-1] {
			out = append(out, n)
		}
	}
	return out, nil
}

// MaxSweep bounds the rows of a sweep.
const MaxSweep = 1000

// maxTraceRanks bounds the ranks --trace-ranks lists, all ranges
// together: no machine a run can hold in memory has more.
const maxTraceRanks = 1 << 20

// Ranks reads --trace-ranks: ranks and ranges, like 0,3,8-15.
// Every rank is below maxTraceRanks, so a list never grows past it (a rank
// of 2^63-1 used to wrap the loop below and fill the memory).
func Ranks(s string) ([]int, error) {
	bad := fmt.Errorf("--trace-ranks %q: want ranks and ranges like 0,3,8-15", s)
	var out []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, bad
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, bad
			}
		}
		if b >= maxTraceRanks {
			return nil, fmt.Errorf("--trace-ranks %q: rank %d is past the largest world a run can hold (ranks are below %d)", s, b, maxTraceRanks)
		}
		if len(out)+(b-a+1) > maxTraceRanks {
			return nil, fmt.Errorf("--trace-ranks %q: lists more than %d ranks", s, maxTraceRanks)
		}
		for r := a; r <= b; r++ {
			out = append(out, r)
		}
	}
	return out, nil
}

// WorldSizes reads "1-16" or "2,4,8": at most check.MaxSizes sizes,
// each at most check.MaxWorldSize (an end of 2^63-1 used to wrap the
// loop below and fill the memory).
func WorldSizes(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(strings.TrimSpace(lo))
		if err != nil || a < 1 {
			return nil, fmt.Errorf("--world-sizes %q: want sizes like 1-16 or 2,4,8", s)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(strings.TrimSpace(hi)); err != nil || b < a {
				return nil, fmt.Errorf("--world-sizes %q: want sizes like 1-16 or 2,4,8", s)
			}
		}
		if b > check.MaxWorldSize {
			return nil, fmt.Errorf("--world-sizes %q: world size %d is over %d, the largest check builds a map for", s, b, check.MaxWorldSize)
		}
		if len(out)+(b-a+1) > check.MaxSizes {
			return nil, fmt.Errorf("--world-sizes %q: more than %d sizes; check fewer at a time", s, check.MaxSizes)
		}
		for w := a; w <= b; w++ {
			out = append(out, w)
		}
	}
	return out, nil
}
