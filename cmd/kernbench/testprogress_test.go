package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// lineWriter hands each write to the test as it happens.
type lineWriter chan string

func (c lineWriter) Write(b []byte) (int, error) {
	c <- string(b)
	return len(b), nil
}

// Issue 13 (3): a long test is reported on stderr while it runs (a large
// mock-schedule test ran 120 s silently); nothing is said between tests.
// The test drives the reporter's clock: each tick is sent when the test
// chooses, and a tick is done with once the reporter takes the next.
func TestTestProgress(t *testing.T) {
	lines := make(lineWriter, 8)
	ticks := make(chan time.Time)
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	p := startTestProgress(lines, ticks, func() time.Time { return t0 })
	p.start("a_test.star", "test_slow")
	var got []string
	ticks <- t0.Add(10 * time.Second)
	got = append(got, <-lines)
	ticks <- t0.Add(21*time.Second + 400*time.Millisecond)
	got = append(got, <-lines)
	p.start("", "")
	ticks <- t0.Add(30 * time.Second) // nothing runs: nothing said
	ticks <- t0.Add(40 * time.Second) // taken only once the reporter is done with 30 s
	p.stop()
	close(lines)
	for l := range lines {
		got = append(got, l)
	}
	want := []string{
		"kernbench test: a_test.star: test_slow still running (10s)\n",
		"kernbench test: a_test.star: test_slow still running (21s)\n",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("progress (-want +got):\n%s", diff)
	}
}
