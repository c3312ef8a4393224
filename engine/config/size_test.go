package config

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr string
	}{
		{in: "0", want: 0},
		{in: "4096", want: 4096},
		{in: "4096B", want: 4096},
		{in: "4096 b", want: 4096},
		{in: "64K", want: 64 << 10},
		{in: "64KB", want: 64 << 10},
		{in: "64KiB", want: 64 << 10},
		{in: "64kib", want: 64 << 10},
		{in: "64 KiB", want: 64 << 10},
		{in: " 64k ", want: 64 << 10},
		{in: "1M", want: 1 << 20},
		{in: "1MB", want: 1 << 20},
		{in: "1MiB", want: 1 << 20},
		{in: "1G", want: 1 << 30},
		{in: "1GiB", want: 1 << 30},
		{in: "2T", want: 2 << 40},
		{in: "1.5K", want: 1536},
		{in: "0.5MiB", want: 512 << 10},
		{in: "9223372036854775807", want: 9223372036854775807},
		{in: "8191PiB", wantErr: `invalid size "8191PiB": unknown unit "PiB" (want B, K, KB, KiB, M, MB, MiB, G, GB, GiB, T, TB, TiB)`},
		{in: "", wantErr: `invalid size "": want a number with an optional unit (B, K, KB, KiB, M, MB, MiB, G, GB, GiB, T, TB, TiB)`},
		{in: "K", wantErr: `invalid size "K": want a number with an optional unit (B, K, KB, KiB, M, MB, MiB, G, GB, GiB, T, TB, TiB)`},
		{in: "-1", wantErr: `invalid size "-1": want a number with an optional unit (B, K, KB, KiB, M, MB, MiB, G, GB, GiB, T, TB, TiB)`},
		{in: ".5K", wantErr: `invalid size ".5K": want a number with an optional unit (B, K, KB, KiB, M, MB, MiB, G, GB, GiB, T, TB, TiB)`},
		{in: "1.K", wantErr: `invalid size "1.K": want a number with an optional unit (B, K, KB, KiB, M, MB, MiB, G, GB, GiB, T, TB, TiB)`},
		{in: "1.2.3", wantErr: `invalid size "1.2.3": want a number with an optional unit (B, K, KB, KiB, M, MB, MiB, G, GB, GiB, T, TB, TiB)`},
		{in: "1e3", wantErr: `invalid size "1e3": unknown unit "e3" (want B, K, KB, KiB, M, MB, MiB, G, GB, GiB, T, TB, TiB)`},
		{in: "4Q", wantErr: `invalid size "4Q": unknown unit "Q" (want B, K, KB, KiB, M, MB, MiB, G, GB, GiB, T, TB, TiB)`},
		{in: "4 K B", wantErr: `invalid size "4 K B": unknown unit "K B" (want B, K, KB, KiB, M, MB, MiB, G, GB, GiB, T, TB, TiB)`},
		{in: "1.5", wantErr: `invalid size "1.5": not a whole number of bytes`},
		{in: "1.0001K", wantErr: `invalid size "1.0001K": not a whole number of bytes`},
		{in: "9223372036854775808", wantErr: `invalid size "9223372036854775808": too large`},
		{in: "8388608T", wantErr: `invalid size "8388608T": too large`},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		gotErr := ""
		if err != nil {
			gotErr = err.Error()
		}
		if diff := cmp.Diff(tt.wantErr, gotErr); diff != "" {
			t.Errorf("ParseSize(%q) error (-want +got):\n%s", tt.in, diff)
		}
		if diff := cmp.Diff(tt.want, got); err == nil && diff != "" {
			t.Errorf("ParseSize(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"0", "4096", "64K", "64KB", "64KiB", "1.5K", "1M", "1GiB", "x", "", "1.", "9223372036854775807", "8T"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseSize(s)
		if err != nil {
			if !strings.Contains(err.Error(), strconv.Quote(s)) {
				t.Errorf("ParseSize(%q): error %q does not name the input", s, err)
			}
			return
		}
		if got < 0 {
			t.Fatalf("ParseSize(%q) = %d, want >= 0", s, got)
		}
		if digitsOnly(s) {
			if _, perr := strconv.ParseInt(s, 10, 64); perr != nil {
				t.Errorf("ParseSize(%q) = %d, want an out-of-range error", s, got)
			}
		}
		// Plain integers parse as themselves.
		if n, perr := strconv.ParseInt(s, 10, 64); perr == nil && n >= 0 && digitsOnly(s) && got != n {
			t.Errorf("ParseSize(%q) = %d, want %d", s, got, n)
		}
		// Every result prints back as a plain integer that parses to itself.
		plain := strconv.FormatInt(got, 10)
		if back, err := ParseSize(plain); err != nil || back != got {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", plain, back, err, got)
		}
	})
}

func TestFormatSize(t *testing.T) {
	got := []string{FormatSize(4 << 20), FormatSize(1 << 30), FormatSize(96 << 10), FormatSize(1000), FormatSize(3 << 19)}
	want := []string{"4M", "1G", "96K", "1000", "1536K"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("FormatSize (-want +got):\n%s", diff)
	}
}
