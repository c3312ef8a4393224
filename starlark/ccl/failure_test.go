package ccl

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.starlark.net/starlark"

	"kernbench/engine/l3l2"
	"kernbench/engine/machine"
	"kernbench/engine/sim"
	"kernbench/starlark/script"
)

// stepLimited is the error of a script stopped by its step limit.
func stepLimited(t *testing.T) error {
	t.Helper()
	l := &script.Loader{MaxSteps: 500}
	th := l.NewThread("rank 0")
	_, err := starlark.ExecFileOptions(script.FileOptions, th, "k.star", "while True:\n    pass\n", nil)
	if err == nil {
		t.Fatal("the loop returned")
	}
	return script.Stopped(th, err)
}

// The failures the benches build take their kind and exit status from the
// errkind classifier, whatever the error is wrapped in.
func TestFailureKinds(t *testing.T) {
	type got struct {
		Code int
		Kind string
	}
	limit := stepLimited(t)
	cases := []struct {
		name    string
		failure func() error
		want    got
		msg     string // a part of the message
	}{
		{"deadlock", func() error { return simFailure(fmt.Errorf("run: %w", &sim.StallError{}), "") }, got{3, "Deadlock"}, "deadlock"},
		{"host memory", func() error { return simFailure(fmt.Errorf("run: %w", &OutOfMemoryError{Limit: 1 << 20}), "") }, got{3, "OutOfMemory"}, "over --max-memory"},
		{"stale slot", func() error {
			return simFailure(&rankError{rank: 1, err: fmt.Errorf("tl.fetch: %w", &machine.IPCQError{Kind: "StaleSlot", Msg: "m"})}, "")
		}, got{4, "StaleSlot"}, "StaleSlot: m"},
		{"kernel step limit", func() error { return simFailure(&rankError{rank: 0, err: limit}, "") }, got{3, "StepLimit"}, "raise --max-steps"},
		{"load step limit", func() error { return loadFailure(fmt.Errorf("cannot load x.star: %w", limit)) }, got{3, "StepLimit"}, "raise --max-steps if the script"},
		{"l3 remote abort", func() error {
			return l3Failure(&l3ProcError{proc: "l3 main", err: fmt.Errorf("q: %w", &l3l2.QueueError{Kind: l3l2.QueueRemoteAborted, Msg: "peer"})})
		}, got{4, "REMOTE_ABORTED"}, "REMOTE_ABORTED"},
		{"l3 timeout", func() error {
			return l3Failure(&l3ProcError{proc: "l3 main", err: fmt.Errorf("wait: %w", &l3l2.TimeoutError{Op: "counter.wait"})})
		}, got{4, "Timeout"}, "timed out"},
		{"l3 step limit", func() error { return l3Failure(&l3ProcError{proc: "l3 main", err: limit}) }, got{3, "StepLimit"}, "too many steps"},
		{"l3 fail", func() error { return l3Failure(&l3ProcError{proc: "l2", err: fmt.Errorf("fail: nope")}) }, got{4, "RuntimeError"}, "nope"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, ok := c.failure().(*Failure)
			if !ok {
				t.Fatalf("got %T, want a *Failure", c.failure())
			}
			if diff := cmp.Diff(c.want, got{f.Code, f.Kind}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if f.ErrorKind() == nil || f.ErrorKind().Status != f.Code || f.ErrorKind().Name != f.Kind {
				t.Errorf("kind %v disagrees with Code %d Kind %s", f.ErrorKind(), f.Code, f.Kind)
			}
			if !strings.Contains(f.Msg, c.msg) {
				t.Errorf("message %q lacks %q", f.Msg, c.msg)
			}
		})
	}
}
