package testreport

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
// mock-schedule test ran 120 s silently); nothing is said between tests,
// nor of a test that has run less than the period: a 0.6 s test under
// way when a tick fell was "still running (0s)". The test drives the
// reporter's clock: each tick is sent when the test chooses, and a tick
// is done with once the reporter takes the next.
func TestTestProgress(t *testing.T) {
	lines := make(lineWriter, 8)
	ticks := make(chan time.Time)
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := t0
	p := StartProgress(lines, ticks, func() time.Time { return clock }, 10*time.Second)
	at := func(d time.Duration) { ticks <- t0.Add(d) }
	p.Start("a_test.star", "test_slow")
	at(600 * time.Millisecond) // 0.6 s: not reported
	at(9*time.Second + 900*time.Millisecond)
	at(10*time.Second + 200*time.Millisecond) // reported once per period
	at(11 * time.Second)
	at(21*time.Second + 400*time.Millisecond)
	at(22 * time.Second)
	p.Start("", "")
	at(30 * time.Second) // nothing runs: nothing said
	clock = t0.Add(30*time.Second + 500*time.Millisecond)
	p.Start("a_test.star", "test_fast")
	at(31*time.Second + 100*time.Millisecond) // 0.6 s into test_fast
	at(40 * time.Second)                      // 9.5 s into it
	at(41 * time.Second)                      // 10.5 s: reported
	p.Stop()
	close(lines)
	var got []string
	for l := range lines {
		got = append(got, l)
	}
	want := []string{
		"kernbench test: a_test.star: test_slow still running (10s)\n",
		"kernbench test: a_test.star: test_slow still running (21s)\n",
		"kernbench test: a_test.star: test_fast still running (10s)\n",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("progress (-want +got):\n%s", diff)
	}
}
