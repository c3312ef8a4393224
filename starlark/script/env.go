package script

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Env is the surroundings a command reads besides its arguments: the
// working directory its relative paths (FILE.star, --config, ./ccl.yaml,
// output files) mean, and its environment variables. The zero Env is the
// process's own. Tests give each in-process command its own Env, so
// commands can run side by side in one process without os.Chdir or
// os.Setenv, both of which are process-wide.
//
// Paths stay as the user wrote them everywhere they are shown (messages,
// Starlark positions, reports); only the file system sees them joined to
// Dir.
type Env struct {
	// Dir is the working directory ("" = the process's).
	Dir string
	// Getenv reads an environment variable (nil = os.Getenv).
	Getenv func(string) string
	// NoDisk hides the file system: Stat (and so ReadInput) finds no
	// file, so the embedded copy of the shipped files is all a command
	// reads (kernbench test --builtin, which must not pick up a
	// ./ccl.yaml or an algorithms/ folder of the working directory).
	NoDisk bool
}

// Path is name as the file system must see it: joined to Dir when it is
// relative.
func (e Env) Path(name string) string {
	if e.Dir == "" || filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(e.Dir, name)
}

// Var is the environment variable key ("" when unset).
func (e Env) Var(key string) string {
	if e.Getenv == nil {
		return os.Getenv(key)
	}
	return e.Getenv(key)
}

// Stat is os.Stat of name in e; errors name the file as the user wrote it.
func (e Env) Stat(name string) (fs.FileInfo, error) {
	if e.NoDisk {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
	}
	st, err := os.Stat(e.Path(name))
	return st, e.UserError(err, name)
}

// Abs is the absolute path of name in e.
func (e Env) Abs(name string) (string, error) {
	return filepath.Abs(e.Path(name))
}

// UserError puts name back where err (from an operation on e.Path(name),
// or on a path under it) shows the joined path, so that a message reads
// the same whatever Dir is: "open x.star: …", not "open /work/x.star: …".
func (e Env) UserError(err error, name string) error {
	if err == nil || e.Dir == "" || filepath.IsAbs(name) {
		return err
	}
	joined := e.Path(name)
	back := func(p string) string {
		if p == joined {
			return name
		}
		if rest, ok := strings.CutPrefix(p, joined); ok && strings.HasPrefix(rest, string(filepath.Separator)) {
			return name + rest
		}
		return p
	}
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		pe.Path = back(pe.Path)
	case errors.As(err, &le):
		le.Old, le.New = back(le.Old), back(le.New)
	}
	return err
}
