package output

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"kernbench/engine/chakra"
	"kernbench/starlark/errkind"
	"kernbench/starlark/report"
	"kernbench/starlark/script"
)

// --export-chakra DIR writes a folder of files (engine/chakra), not one
// output: it is created by the run and never replaces anything. What
// stands at DIR (a file, a folder, even empty, a link) is refused before
// the run, and so is a DIR whose parent is not a folder; the files are
// created inside the new folder, each refusing to replace a file.

// CheckChakraDir refuses, before anything runs, an --export-chakra folder
// the run could not create. several says the command runs more than one
// algorithm or variant.
func CheckChakraDir(env script.Env, dir string, several bool) error {
	switch dir {
	case "":
		return errors.New("--export-chakra: an empty folder name; give a folder that does not exist yet, such as chakra_out")
	case "-":
		return errors.New("--export-chakra: writes a folder of files, not stdout; give a folder that does not exist yet")
	}
	if several {
		return errors.New("--export-chakra writes the schedule of one algorithm at one size; drop the other algorithms and --vary")
	}
	parent := filepath.Dir(filepath.Clean(dir))
	st, err := os.Stat(env.Path(parent))
	switch {
	case err != nil && errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("--export-chakra: the folder %s that would hold %s does not exist", parent, dir)
	case err != nil:
		return fmt.Errorf("--export-chakra: %v", err)
	case !st.IsDir():
		return fmt.Errorf("--export-chakra: %s, where %s would be made, is not a folder", parent, dir)
	}
	if _, err := os.Lstat(env.Path(dir)); err == nil {
		return fmt.Errorf("--export-chakra: %s already exists; the export makes a new folder and replaces nothing: remove it or give another name", dir)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("--export-chakra: %v", err)
	}
	return nil
}

// WriteChakraDir creates dir and writes the export's files into it; on a
// failure it removes what it made.
func WriteChakraDir(env script.Env, dir string, t *chakra.Trace) *report.Failure {
	fail := func(err error) *report.Failure {
		return report.WithKind(errkind.IO, &report.Failure{Rank: -1, Msg: "--export-chakra: " + err.Error(), Err: err})
	}
	if t == nil {
		err := fmt.Errorf("--export-chakra: the run recorded no schedule; nothing written to %s", dir)
		return report.WithKind(errkind.Export, &report.Failure{Rank: -1, Msg: err.Error(), Err: err})
	}
	files, err := t.Files()
	if err != nil {
		return report.WithKind(errkind.Export, &report.Failure{Rank: -1, Msg: err.Error(), Err: err})
	}
	real := env.Path(dir)
	if err := os.Mkdir(real, 0o755); err != nil {
		return fail(err)
	}
	var made []string
	undo := func() {
		for _, f := range made {
			_ = os.Remove(f)
		}
		_ = os.Remove(real)
	}
	for _, f := range files {
		name := filepath.Join(real, f.Name)
		w, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			undo()
			return fail(err)
		}
		made = append(made, name)
		_, err = w.Write(f.Data)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			undo()
			return fail(fmt.Errorf("%s: %w", filepath.Join(dir, f.Name), err))
		}
	}
	return nil
}
