package script

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.starlark.net/starlark"
)

// A memory watch's threads poll it every coldPollSteps steps, and every
// hotPollSteps while each poll reports a collection; the step budget
// (--max-steps, or what a spawner left: SetStepLimit) still ends the
// thread at its count, polls or not. The polls are counted by the
// thread's own steps, never by a clock.
func TestStepSchedule(t *testing.T) {
	const loop = "def f():\n    for i in range(100000):\n        pass\nf()\n"
	for _, tc := range []struct {
		name      string
		budget    uint64 // Loader.MaxSteps
		limit     uint64 // SetStepLimit (0: not called)
		hot       bool   // every poll reports a collection
		wantSteps []uint64
		wantLimit bool
	}{
		{name: "cold polls", wantSteps: []uint64{64, 128, 192, 256}},
		{name: "hot polls", hot: true, wantSteps: []uint64{64, 80, 96, 112}},
		{name: "polls under a budget", budget: 1000, wantSteps: []uint64{64, 128, 192, 256}, wantLimit: true},
		{name: "a budget under the first poll", budget: 40, wantSteps: nil, wantLimit: true},
		{name: "a spawner's remainder", budget: 1_000_000, limit: 100, wantSteps: []uint64{64}, wantLimit: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var steps []uint64
			var th *starlark.Thread
			poll := func(seen *uint64) bool {
				steps = append(steps, th.ExecutionSteps())
				return tc.hot
			}
			l := &Loader{MaxSteps: tc.budget, MemoryWatch: NewMemoryWatch(poll)}
			th = l.NewThread("polled")
			if tc.limit > 0 {
				SetStepLimit(th, tc.limit)
			}
			_, err := starlark.ExecFile(th, "loop.star", loop, nil)
			if got := IsStepLimit(Stopped(th, err)); got != tc.wantLimit {
				t.Fatalf("stopped by the step limit: %v, want %v (error %v)", got, tc.wantLimit, err)
			}
			if len(tc.wantSteps) > 0 && len(steps) > len(tc.wantSteps) {
				steps = steps[:len(tc.wantSteps)]
			}
			if diff := cmp.Diff(tc.wantSteps, steps); diff != "" {
				t.Errorf("the steps of the first polls (-want +got):\n%s", diff)
			}
		})
	}
}
