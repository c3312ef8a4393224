package main

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/spf13/pflag"

	"kernbench/starlark/script"
)

// loadPathUsage is the help of --load-path, the same for run, check and
// test.
const loadPathUsage = "also let load() (and run_kernel_in_mock) read .star files under this folder, searched after the loading file's own folder (repeatable); without it a script loads only from its own folder tree and the shipped library"

// addLoadPath registers --load-path on flags, into dirs.
func addLoadPath(flags *pflag.FlagSet, dirs *[]string) {
	flags.StringArrayVar(dirs, "load-path", nil, loadPathUsage)
}

// checkLoadPath refuses a --load-path that is empty or not an existing
// folder: a typo would otherwise only show as a refused load() later.
func checkLoadPath(env script.Env, dirs []string) error {
	for _, d := range dirs {
		if d == "" {
			return fmt.Errorf("--load-path: an empty folder name; give a folder")
		}
		st, err := env.Stat(d)
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("--load-path: the folder %s does not exist", d)
		}
		if err != nil {
			return fmt.Errorf("--load-path: %w", err)
		}
		if !st.IsDir() {
			return fmt.Errorf("--load-path: %s is not a folder", d)
		}
	}
	return nil
}
