package ccl

import (
	"errors"
	"kernbench/starlark/report"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kernbench"
)

// tl.event / tl.signal / tl.wait order work between the threads of a rank:
// a consumer thread waits for the producer's stores, a second signal is an
// error, and an event nobody signals is a deadlock naming it.
func TestEvents(t *testing.T) {
	cases := []struct {
		name, src string
		code      int    // 0: the run verifies
		msg       string // fragment of the failure's message and detail
	}{
		{"producer consumer", `
def produce(tl, ev, tmp, src):
    tl.copy(tmp, src)
    tl.signal(ev)

def kernel(sendbuf, recvbuf, rank, world_size, tl):
    tmp = tl.alloc(len(sendbuf), sendbuf.dtype, space = "hbm")
    ev = tl.event("copied")
    h = tl.spawn(produce, ev, tmp, sendbuf)
    tl.wait(ev)
    tl.wait(ev)  # set events do not block
    if rank == 0:
        tl.send("E", tmp)
        tl.recv_copy("W", recvbuf)
    else:
        tl.recv_reduce_copy_send("W", tmp, recvbuf, "E")
    tl.wait(h)
`, 0, ""},
		{"signalled twice", `
def kernel(sendbuf, recvbuf, rank, world_size, tl):
    ev = tl.event("twice")
    tl.signal(ev)
    tl.signal(ev)
`, report.ExitRuntime, `tl.signal: <event "twice" of rank 0> was already signalled at `},
		{"never signalled", `
def kernel(sendbuf, recvbuf, rank, world_size, tl):
    tl.wait(tl.event("never"))
`, report.ExitDeadlock, `waiting in <event "never" of rank 1>`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "ev.star")
			if err := os.WriteFile(file, []byte(c.src), 0o644); err != nil {
				t.Fatal(err)
			}
			o := Options{WorldSize: 2, Counts: []int64{1000}}
			if c.code == 0 {
				checkCorrect(t, runVerified(t, file, o))
				return
			}
			o.Embedded, o.Verify = kernbench.Files, true
			_, err := Run(file, o)
			var f *report.Failure
			if !errors.As(err, &f) {
				t.Fatalf("Run: %v, want a failure", err)
			}
			if f.ErrorKind().Status != c.code || !strings.Contains(f.Msg+"\n"+f.Detail, c.msg) {
				t.Errorf("exit %d, message %q\n%s\nwant exit %d and %q", f.ErrorKind().Status, f.Msg, f.Detail, c.code, c.msg)
			}
		})
	}
}
