package main

import (
	"bytes"
	"strings"
	"testing"
)

// Every shipped algorithm's *_test.star passes in the mock runtime
// (`kernbench test algorithms`, run as part of go test).
func TestShippedStarTests(t *testing.T) {
	var out, errb bytes.Buffer
	code := Main([]string{"test", "../../algorithms"}, &out, &errb)
	if code != 0 {
		t.Fatalf("kernbench test algorithms exited %d:\n%s\n%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), " passed, 0 failed") {
		t.Errorf("no summary line:\n%s", out.String())
	}
}
