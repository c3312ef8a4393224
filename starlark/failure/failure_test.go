package failure

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.starlark.net/starlark"

	"kernbench/engine/l3l2"
	"kernbench/engine/machine"
	"kernbench/engine/sim"
	"kernbench/starlark/errkind"
	"kernbench/starlark/hostmem"
	"kernbench/starlark/report"
	"kernbench/starlark/script"
)

// stepLimited is the error of a script stopped by its step limit.
func stepLimited(t *testing.T) error {
	t.Helper()
	l := &script.Loader{MaxSteps: 500}
	th := l.NewThread("rank 0")
	_, err := starlark.ExecFileOptions(script.FileOptions(), th, "k.star", "while True:\n    pass\n", nil)
	if err == nil {
		t.Fatal("the loop returned")
	}
	return script.Stopped(th, err)
}

// The failures the benches build take their kind and exit status from the
// errkind classifier, whatever the error is wrapped in.
func TestFailureKinds(t *testing.T) {
	limit := stepLimited(t)
	cases := []struct {
		name    string
		failure func() error
		want    *errkind.Kind
		msg     string // a part of the message
	}{
		{"deadlock", func() error { return Sim(fmt.Errorf("run: %w", &sim.StallError{}), nil, nil) }, errkind.Deadlock, "deadlock"},
		{"host memory", func() error { return Sim(fmt.Errorf("run: %w", &hostmem.OutOfMemoryError{Limit: 1 << 20}), nil, nil) }, errkind.HostMemory, "over --max-memory"},
		{"stale slot", func() error {
			return Sim(&RankError{Rank: 1, Err: fmt.Errorf("tl.fetch: %w", &machine.IPCQError{Kind: "StaleSlot", Msg: "m"})}, nil, nil)
		}, errkind.StaleSlot, "StaleSlot: m"},
		{"kernel step limit", func() error { return Sim(&RankError{Rank: 0, Err: limit}, nil, nil) }, errkind.StepLimit, "raise --max-steps"},
		{"load step limit", func() error { return Load(fmt.Errorf("cannot load x.star: %w", limit)) }, errkind.StepLimit, "raise --max-steps if the script"},
		{"l3 remote abort", func() error {
			return L3(&ProcError{Proc: "l3 main", Err: fmt.Errorf("q: %w", &l3l2.QueueError{Kind: l3l2.QueueRemoteAborted, Msg: "peer"})})
		}, errkind.RemoteAborted, "REMOTE_ABORTED"},
		{"l3 timeout", func() error {
			return L3(&ProcError{Proc: "l3 main", Err: fmt.Errorf("wait: %w", &l3l2.TimeoutError{Op: "counter.wait"})})
		}, errkind.L3Timeout, "timed out"},
		{"l3 step limit", func() error { return L3(&ProcError{Proc: "l3 main", Err: limit}) }, errkind.StepLimit, "too many steps"},
		{"l3 fail", func() error { return L3(&ProcError{Proc: "l2", Err: fmt.Errorf("fail: nope")}) }, errkind.Runtime, "nope"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, ok := c.failure().(*report.Failure)
			if !ok {
				t.Fatalf("got %T, want a *Failure", c.failure())
			}
			// The kind is the failure's one kind field: the exit status
			// and the JSON kind are read from it.
			got := []any{errkind.Of(f), errkind.Status(f), f.Out().Kind}
			if diff := cmp.Diff([]any{c.want, c.want.Status, c.want.Name}, got); diff != "" {
				t.Errorf("kind, exit status, JSON kind (-want +got):\n%s", diff)
			}
			if !strings.Contains(f.Msg, c.msg) {
				t.Errorf("message %q lacks %q", f.Msg, c.msg)
			}
		})
	}
}
