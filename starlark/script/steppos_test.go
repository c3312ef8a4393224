package script

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.starlark.net/starlark"
)

// A step limit reached in a loop names a line of that loop, whatever step
// of the loop the budget ends on. go.starlark.net gives a loop's back edge
// the position of the instruction laid out before it, which can be a call
// in a branch after the loop (tl.send at line 11 below, never run): that
// line is never the one named.
func TestStepLimitNamesTheLoop(t *testing.T) {
	const src = `def kernel(mode):
    if mode == "deadlock":
        g(1)
        g(2)
    elif mode == "loop":
        x = 0
        while True:
            x += 1
    elif mode == "error":
        g(3)
        g("N", 4)
kernel("loop")
`
	for budget := uint64(1000); budget < 1012; budget++ {
		t.Run(fmt.Sprint(budget), func(t *testing.T) {
			l := &Loader{Src: Source{Overlay: map[string][]byte{"f.star": []byte(src)}}, MaxSteps: budget}
			th := l.NewThread("t")
			_, err := starlark.ExecFileOptions(FileOptions(), th, "f.star", src, starlark.StringDict{"g": starlark.None})
			err = Stopped(th, err)
			if !IsStepLimit(err) {
				t.Fatalf("got %v, want the step limit", err)
			}
			var ee *starlark.EvalError
			if !errors.As(err, &ee) {
				t.Fatalf("got %T (%v), want an EvalError", err, err)
			}
			top := ee.CallStack.At(0)
			if diff := cmp.Diff("kernel f.star:8", fmt.Sprintf("%s %s:%d", top.Name, top.Pos.Filename(), top.Pos.Line)); diff != "" {
				t.Errorf("the innermost frame (-want +got):\n%s\n%s", diff, ee.Backtrace())
			}
		})
	}
}
