package script_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"kernbench/starlark/script"
)

// An Env with a Dir reads relative paths there and reports every problem
// with the path as the user wrote it: the message of a command run
// in-process with Dir set must be the one it prints when run from Dir.
func TestEnvReadsInDir(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.star": "x = 1\n", "sub/b.star": "y = 2\n"})
	if err := os.Mkdir(filepath.Join(dir, "folder"), 0o755); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{script.MaxInputEnv: "4"}
	env := script.Env{Dir: dir, Getenv: func(k string) string { return vars[k] }}
	big := script.Env{Dir: dir}
	// The largest limit there is: the read of limit+1 bytes wrapped to a
	// negative count and every file read as empty.
	huge := script.Env{Dir: dir, Getenv: func(k string) string {
		if k == script.MaxInputEnv {
			return "9223372036854775807"
		}
		return ""
	}}
	for _, tc := range []struct {
		env     script.Env
		name    string
		want    string // contents, or the error's text
		wantErr bool
	}{
		{big, "a.star", "x = 1\n", false},
		{big, "sub/b.star", "y = 2\n", false},
		{big, "./sub/../a.star", "x = 1\n", false},
		{big, filepath.Join(dir, "a.star"), "x = 1\n", false},
		{big, "nope.star", "open nope.star: no such file or directory", true},
		{big, "sub/nope.star", "open sub/nope.star: no such file or directory", true},
		{big, "folder", "folder: not a regular file (a directory)", true},
		{env, "a.star", "a.star: larger than the input limit of 4 bytes", true},
		{huge, "a.star", "x = 1\n", false},
	} {
		data, err := tc.env.ReadInput(tc.name)
		got := string(data)
		if err != nil {
			got = err.Error()
		}
		if (err != nil) != tc.wantErr || !strings.HasPrefix(got, tc.want) || got == "" {
			t.Errorf("ReadInput(%q) = %q, err %v; want %q (error: %v)", tc.name, data, err, tc.want, tc.wantErr)
		}
	}

	src := script.Source{Env: big}
	for name, want := range map[string]bool{"a.star": true, "sub/b.star": true, "b.star": false} {
		if got := src.Exists(name); got != want {
			t.Errorf("Exists(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestEnvUserError(t *testing.T) {
	dir := t.TempDir()
	env := script.Env{Dir: dir}
	_, err := os.CreateTemp(env.Path("missing"), ".out.*")
	if got := env.UserError(err, "missing").Error(); !strings.HasPrefix(got, "open missing/.out.") {
		t.Errorf("CreateTemp error %q, want it to name missing/.out.*", got)
	}
	err = os.Rename(env.Path("x"), env.Path("y"))
	if diff := cmp.Diff("rename x y: no such file or directory", env.UserError(env.UserError(err, "x"), "y").Error()); diff != "" {
		t.Errorf("Rename error (-want +got):\n%s", diff)
	}
	// A path that only shares a prefix with the joined name stays as it is.
	_, err = os.Open(env.Path("ab"))
	if diff := cmp.Diff("open "+filepath.Join(dir, "ab")+": no such file or directory", env.UserError(err, "a").Error()); diff != "" {
		t.Errorf("Open error (-want +got):\n%s", diff)
	}
	if got := (script.Env{}).Path("a.star"); got != "a.star" {
		t.Errorf("the process's Env changes paths: %q", got)
	}
}

// An Env with NoDisk finds no file, even one that is there: a Source over
// it reads the embedded copy only (kernbench test --builtin must test the
// shipped files, not a ./algorithms or ./ccl.yaml of the working folder).
func TestEnvNoDiskReadsEmbeddedOnly(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"algorithms/a.star": "disk = 1\n", "ccl.yaml": "defaults: {}\n"})
	env := script.Env{Dir: dir, NoDisk: true}
	for _, name := range []string{"algorithms/a.star", "ccl.yaml", filepath.Join(dir, "ccl.yaml")} {
		if _, err := env.Stat(name); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Stat(%q) = %v, want not found", name, err)
		}
		if _, err := env.ReadInput(name); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("ReadInput(%q) = %v, want not found", name, err)
		}
	}
	src := script.Source{Env: env, Embedded: fstest.MapFS{"algorithms/a.star": {Data: []byte("embedded = 1\n")}}}
	data, err := src.ReadFile("algorithms/a.star")
	if diff := cmp.Diff("embedded = 1\n", string(data)); diff != "" || err != nil {
		t.Errorf("ReadFile: err %v (-want +got):\n%s", err, diff)
	}
	if src.Exists("ccl.yaml") {
		t.Errorf("Exists(ccl.yaml) with NoDisk = true, want false")
	}
	l := &script.Loader{Src: src}
	if err := l.CheckPlace("ccl.yaml"); err != nil {
		t.Errorf("CheckPlace of a file NoDisk hides: %v", err)
	}
}
