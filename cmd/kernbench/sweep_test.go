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
