package script

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.starlark.net/starlark"
)

// fail() keeps go.starlark.net's text and backtrace and is typed.
func TestFailIsTyped(t *testing.T) {
	l := &Loader{Src: Source{Overlay: map[string][]byte{"f.star": []byte("def f():\n    fail(\"no\", 1, [2], sep=\",\")\nf()\n")}}}
	_, err := l.Load("f.star")
	var fe *FailError
	if !errors.As(err, &fe) {
		t.Fatalf("got %v (%T), want a *FailError inside", err, err)
	}
	want := "Traceback (most recent call last):\n  f.star:3:2: in <toplevel>\n  f.star:2:9: in f\nError in fail: fail: no,1,[2]"
	if diff := cmp.Diff(want, Format(err)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// Stopped marks a thread's error with the limit that stopped it, and only
// then; the text stays the thread's own.
func TestStopped(t *testing.T) {
	run := func(l *Loader, src string) (*starlark.Thread, error) {
		th := l.NewThread("t")
		_, err := starlark.ExecFileOptions(FileOptions(), th, "x.star", src, nil)
		return th, err
	}
	th, err := run(&Loader{MaxSteps: 100}, "x = 0\nfor i in range(1000):\n    x += i\n")
	got := Stopped(th, err)
	if !IsStepLimit(got) || IsTimeout(got) || got.Error() != err.Error() {
		t.Errorf("step limit: got %v (step limit %v, timeout %v)", got, IsStepLimit(got), IsTimeout(got))
	}
	// A loop that never ends, watched by a watchdog whose limit has passed:
	// the thread stops at its first step (no clock: the time at which a
	// timer fires depends on the machine's load).
	wd := ManualWatchdog("--timeout 1ns")
	wd.Fire()
	th, err = run(&Loader{Watchdog: wd}, "while True:\n    pass\n")
	if got := Stopped(th, err); !IsTimeout(got) || IsStepLimit(got) {
		t.Errorf("timeout: got %v (step limit %v, timeout %v)", got, IsStepLimit(got), IsTimeout(got))
	}
	th, err = run(&Loader{MaxSteps: 100}, "fail(\"x\")\n")
	if got := Stopped(th, err); IsStepLimit(got) || IsTimeout(got) {
		t.Errorf("fail: got %v marked as a limit", got)
	}
	if Stopped(th, nil) != nil {
		t.Error("Stopped(th, nil) is not nil")
	}
}
