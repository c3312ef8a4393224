package testrun

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernbench/starlark/errkind"
	"kernbench/starlark/script"
)

// A test file's -timeout stops the running test and every later one, each
// marked as timed out; the tests before it keep their result. A file
// stopped while it loads is a load error of kind Timeout (exit 3, as any
// file past its -timeout). The loops would run for ever.
func TestFileTimeout(t *testing.T) {
	const bigint = "    x = 3\n    for i in range(100):\n        x = x * x + 7\n"
	type outcome struct {
		Name     string
		Pass     bool
		TimedOut bool
		Stopped  bool // a message says the file's -timeout stopped it
	}
	for _, c := range []struct {
		name, src string
		want      []outcome
		loadKind  *errkind.Kind // of the load error; nil: it loads
	}{
		{"in a test", "def test_fast():\n    assert.eq(1, 1)\n\ndef test_stop():\n    print(\"now\")\n" + bigint + "\ndef test_after():\n    assert.eq(1, 1)\n",
			[]outcome{{"test_fast", true, false, false}, {"test_stop", false, true, true}, {"test_after", false, true, true}}, nil},
		{"while loading", "print(\"now\")\nx = 3\nfor i in range(100):\n    x = x * x + 7\n\ndef test_after():\n    assert.eq(1, 1)\n",
			nil, errkind.Timeout},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "x_test.star"), []byte(c.src), 0o644); err != nil {
				t.Fatal(err)
			}
			wd := script.ManualWatchdog("-timeout 1h (per test file)")
			defer wd.Stop()
			o := Options{Env: script.Env{Dir: dir, Getenv: func(string) string { return "" }}, MaxSteps: 1_000_000, Stderr: wd.FireOnWrite(), watchdog: wd}
			results, err := RunFile("x_test.star", o)
			if got := errkind.Of(err); got != c.loadKind {
				t.Fatalf("RunFile error %v of kind %v, want kind %v", err, got, c.loadKind)
			}
			if err != nil && !strings.Contains(err.Error(), "wall-clock timeout: stopped after -timeout 1h (per test file)") {
				t.Errorf("load error %q does not name the -timeout", err)
			}
			var got []outcome
			for _, r := range results {
				got = append(got, outcome{r.Name, r.Pass, r.TimedOut, strings.Contains(strings.Join(r.Messages, "\n"), "stopped after -timeout 1h (per test file)")})
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
