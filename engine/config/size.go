package config

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// sizeUnits maps a lower-case unit to its multiplier. K, KB and KiB are all
// 1024: memory sizes here are powers of two.
var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10,
	"m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
	"g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30,
	"t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40,
}

const sizeUnitList = "B, K, KB, KiB, M, MB, MiB, G, GB, GiB, T, TB, TiB"

// ParseSize parses a byte count: a decimal number with an optional unit,
// like "4096", "64K", "64KB", "64KiB", "1M", "1MiB", "1G" or "1.5K". K, KB and
// KiB mean 1024 (M 1024², G 1024³, T 1024⁴); the unit is case-insensitive
// and may follow a space. A fraction is allowed when the result is a whole
// number of bytes. Errors name the input.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.TrimSpace(t[i:])
	if !validDecimal(num) {
		return 0, fmt.Errorf("invalid size %q: want a number with an optional unit (%s)", s, sizeUnitList)
	}
	mult, ok := sizeUnits[strings.ToLower(unit)]
	if !ok {
		return 0, fmt.Errorf("invalid size %q: unknown unit %q (want %s)", s, unit, sizeUnitList)
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, fmt.Errorf("invalid size %q: bad number %q", s, num)
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	if !r.IsInt() {
		return 0, fmt.Errorf("invalid size %q: not a whole number of bytes", s)
	}
	if !r.Num().IsInt64() {
		return 0, fmt.Errorf("invalid size %q: too large", s)
	}
	return r.Num().Int64(), nil
}

// validDecimal reports whether s is digits with an optional fraction:
// "12", "1.5" (not "", ".5", "1.", "1.2.3").
func validDecimal(s string) bool {
	whole, frac, hasPoint := strings.Cut(s, ".")
	return digitsOnly(whole) && (!hasPoint || digitsOnly(frac))
}

func digitsOnly(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// FormatSize writes n as a size flag takes it and ParseSize reads it
// back: in the largest of G, M and K that divides it (4096 → 4K, 3 << 19
// → 1536K), else in bytes (1000).
func FormatSize(n int64) string {
	for _, u := range []struct {
		s string
		n int64
	}{{"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if n >= u.n && n%u.n == 0 {
			return fmt.Sprintf("%d%s", n/u.n, u.s)
		}
	}
	return strconv.FormatInt(n, 10)
}
