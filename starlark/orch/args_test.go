package orch_test

import (
	"strings"
	"testing"

	"go.starlark.net/starlark"

	"kernbench/starlark/ccl"
	"kernbench/starlark/orch"
)

// Object arguments (a message, an input handle, a reservation) are checked
// after the arity, with the builtin's own message naming what it wanted
// and what it got.
func TestObjectArguments(t *testing.T) {
	const queue = `
def main(orch):
    q = orch.create_worker_chip_queue(depth = 2, input_arena_bytes = 64, output_arena_bytes = 64)
`
	const l2 = `
def l2(l2):
    ep = l2.spsc_queue_endpoint(l2.decode_endpoint_binding(l2.scalars))
    %s

def main(orch):
    q = orch.create_worker_chip_queue(depth = 2, input_arena_bytes = 64, output_arena_bytes = 64)
    orch.submit_next_level(l2, q.chip_task_arg_scalars())
`
	cases := []struct{ name, src, want string }{
		{"message is an int", queue + "    q.output.read(3)\n", "queue.output.read: message must be a message, got int"},
		{"message is a queue", queue + "    q.output.release(q)\n", "queue.output.release: message must be a message, got queue"},
		{"message missing", queue + "    q.output.read()\n", "queue.output.read: missing argument for message"},
		{"too many arguments first", queue + "    q.output.read(3, 4)\n", "queue.output.read: got 2 arguments, want at most 1"},
		{"handle is a string", strings.Replace(l2, "%s", `ep.input().read("h")`, 1), "endpoint.input.read: handle must be a handle, got string"},
		{"handle is an endpoint side", strings.Replace(l2, "%s", `ep.input().view(ep.output())`, 1), "endpoint.input.view: handle must be a handle, got endpoint.output"},
		{"reservation is None", strings.Replace(l2, "%s", `ep.output().write(None, b"x")`, 1), "endpoint.output.write: reservation must be a reservation, got NoneType"},
		{"reservation is an endpoint side", strings.Replace(l2, "%s", `ep.output().publish(ep.input())`, 1), "endpoint.output.publish: reservation must be a reservation, got endpoint.input"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			th := &starlark.Thread{Name: "test"}
			g, err := starlark.ExecFile(th, "x.star", c.src, orch.Predeclared())
			if err != nil {
				t.Fatal(err)
			}
			err = ccl.RunL3(g["main"].(starlark.Callable), th, nil, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}
