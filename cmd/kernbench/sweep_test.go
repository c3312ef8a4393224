package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseSweep(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want []int64
		err  bool
	}{
		{spec: "1K:8K", want: []int64{1024, 2048, 4096, 8192}},
		{spec: "1K:8K:4", want: []int64{1024, 4096}},
		{spec: "1K:9K", want: []int64{1024, 2048, 4096, 8192}},
		{spec: "4K:4K", want: []int64{4096}},
		{spec: "1000:8000:2", want: []int64{1000, 2000, 4000, 8000}},
		{spec: "8K:1K", err: true},
		{spec: "1K", err: true},
		{spec: "1K:2K:1", err: true},
		{spec: "1K:2K:x", err: true},
		{spec: "0:2K", err: true},
		{spec: "1Q:2K", err: true},
		// Issue 13: a huge FACTOR made the second size infinite, whose
		// int64 is negative ("count must be >= 0 (got -2305843009213693952)").
		{spec: "4:64:1e308", want: []int64{4}},
		{spec: "4:64:1e300", want: []int64{4}},
		// Steps that round to one size are one row, not 1000 copies.
		{spec: "4:6:1.001", want: []int64{4, 5}},
		// More than 1000 sizes is an error, not a sweep cut short of MAX
		// (nor one that takes for ever with a FACTOR a hair over 1).
		{spec: "4:1G:1.01", err: true},
		{spec: "1:8E:1.0000000000000002", err: true},
	} {
		got, err := parseSweep(tc.spec)
		if (err != nil) != tc.err {
			t.Errorf("parseSweep(%q) error = %v, want error %v", tc.spec, err, tc.err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("parseSweep(%q) (-want +got):\n%s", tc.spec, diff)
		}
	}
}
