package main

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// Issue 13 (3): a long test is reported on stderr while it runs (a large
// mock-schedule test ran 120 s silently); nothing is said between tests.
func TestTestProgress(t *testing.T) {
	var b strings.Builder
	w := &lockedWriter{w: &b}
	p := newTestProgress(w, 20*time.Millisecond)
	p.start("a_test.star", "test_slow")
	// At least one report (20 ms in); a loaded machine may take longer to
	// run the reporter, so wait for it rather than for a fixed time.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		w.mu.Lock()
		n := len(b.String())
		w.mu.Unlock()
		if n > 0 {
			break
		}
	}
	p.start("", "")
	w.mu.Lock()
	n := len(b.String())
	w.mu.Unlock()
	time.Sleep(70 * time.Millisecond)
	p.stop()
	w.mu.Lock()
	got := b.String()
	w.mu.Unlock()
	if !regexp.MustCompile(`^(kernbench test: a_test\.star: test_slow still running \(\d+s\)\n)+$`).MatchString(got) {
		t.Errorf("progress = %q, want lines naming the running test", got)
	}
	if len(got) != n {
		t.Errorf("progress printed %q after the test ended", got[n:])
	}
}
