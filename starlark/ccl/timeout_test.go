package ccl

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench"
	"kernbench/starlark/report"
	"kernbench/starlark/script"
)

// A script stopped by --timeout ends with exit 3, kind Timeout, the hint
// for the code it was running (a kernel's or the file's own) and its
// backtrace at the print that passed the limit (the thread notices at its
// next step). The loops after it would run for ever.
func TestTimeoutStopsTheScriptWhereItIs(t *testing.T) {
	type got struct {
		Code      int
		Kind      string
		Msg       string
		Backtrace []string
	}
	const stopped = "Starlark computation cancelled: wall-clock timeout: stopped after --timeout 1h"
	for _, c := range []struct {
		name, src string
		want      got
	}{
		{"kernel", "def kernel(sendbuf, recvbuf, rank, world_size, tl):\n    print(\"now\")\n    x = 3\n    for i in range(100):\n        x = x * x + 7\n",
			got{3, "Timeout", "rank 0: " + stopped + " (raise --timeout if the kernel is meant to run this long)", []string{"x.star:2:10: in kernel"}}},
		{"top level", "print(\"now\")\nx = 3\nfor i in range(100):\n    x = x * x + 7\n\ndef kernel(sendbuf, recvbuf, rank, world_size, tl):\n    pass\n",
			got{3, "Timeout", stopped + " (raise --timeout if the script is meant to run this long)", []string{"x.star:1:6: in <toplevel>"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "x.star")
			if err := os.WriteFile(file, []byte(c.src), 0o644); err != nil {
				t.Fatal(err)
			}
			wd := script.ManualWatchdog("--timeout 1h")
			defer wd.Stop()
			_, err := Run(file, Options{Embedded: kernbench.Files, WorldSize: 2, Counts: []int64{8}, Watchdog: wd, Stderr: wd.FireOnWrite()})
			var f *report.Failure
			if !errors.As(err, &f) {
				t.Fatalf("Run = %v, want a *Failure", err)
			}
			for i, l := range f.Backtrace {
				f.Backtrace[i] = strings.TrimPrefix(l, filepath.Dir(file)+"/")
			}
			if diff := cmp.Diff(c.want, got{f.ErrorKind().Status, f.ErrorKind().Name, f.Msg, f.Backtrace}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
