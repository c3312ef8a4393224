package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"kernbench/cmd/kernbench/internal/output"
	"kernbench/starlark/errkind"
	"kernbench/starlark/host"
	"kernbench/starlark/orch"
	"kernbench/starlark/report"
	"kernbench/starlark/script"
	"kernbench/starlark/tl"
)

// docsOptions are what the flags of `kernbench docs` say, as cobra parsed
// them.
type docsOptions struct {
	Env   script.Env
	Stubs string // --stubs: the folder to write editor stubs into
}

// docsFunc runs a `kernbench docs` whose flags are parsed into o.
type docsFunc func(cmd *cobra.Command, o *docsOptions, stdout, stderr io.Writer) error

func newDocsCmd(env script.Env, stdout, stderr io.Writer) *cobra.Command {
	return newDocsCmdWith(env, stdout, stderr, runDocs)
}

// newDocsCmdWith is the docs command with run as what it runs: tests give
// their own to see the options a command line makes.
func newDocsCmdWith(env script.Env, stdout, stderr io.Writer, run docsFunc) *cobra.Command {
	o := &docsOptions{Env: env}
	cmd := &cobra.Command{
		Use:   "docs",
		Short: "Print the builtin reference (Markdown) generated from the registered builtins, or write editor stubs",
		Long: `Print the builtin reference (docs/builtins.md is exactly this output).
With --stubs DIR, write Python-syntax stubs for editors and Starlark
language servers instead, and print one line per file written:
DIR/kernbench_tl.pyi (tl, Ptr, Tile), DIR/kernbench_torch.pyi (torch,
tensor) and DIR/kernbench_orch.pyi (orch, l2 and their objects).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd, o, stdout, stderr)
		},
	}
	cmd.Flags().StringVar(&o.Stubs, "stubs", "", "write Python-syntax stubs (kernbench_tl.pyi, kernbench_torch.pyi, kernbench_orch.pyi) into this folder instead of printing the reference")
	return cmd
}

// runDocs runs `kernbench docs`: the reference on stdout, or the stubs
// into their folder.
func runDocs(cmd *cobra.Command, o *docsOptions, stdout, stderr io.Writer) error {
	env, stubs := o.Env, o.Stubs
	switch {
	case stubs == "" && cmd.Flags().Changed("stubs"):
		return usageErr("--stubs: an empty folder name; give a folder")
	case stubs == "-":
		return usageErr("--stubs writes three files into a folder: - (stdout) cannot take them; give a folder")
	case stubs != "":
		if err := os.MkdirAll(env.Path(stubs), 0o755); err != nil {
			return report.WithKind(errkind.IO, &report.Failure{Rank: -1, Msg: "--stubs: " + env.UserError(err, stubs).Error(), Err: err})
		}
		// Each file is written as run's output files are: a link
		// followed, a regular file replaced whole. All three are
		// resolved first: a name that cannot be written leaves the
		// others as they were.
		dests := make([]*output.Dest, len(stubFiles))
		for i, f := range stubFiles {
			d, err := output.Resolve(env, "--stubs", filepath.Join(stubs, f.name))
			if err != nil {
				return usageErr(err.Error())
			}
			dests[i] = d
		}
		for i, f := range stubFiles {
			d := dests[i]
			if fl := output.Write(env, d, stdout, []byte(f.render())); fl != nil {
				return fl
			}
			fmt.Fprintf(stdout, "wrote %s (%s)\n", d.Name(), f.holds)
		}
		return nil
	}
	_, err := fmt.Fprint(stdout, Reference())
	return err
}

// Reference is the builtin reference (docs/builtins.md): the sections of
// tl, the host benches and L3/L2 orchestration, each rendered from its
// package's method tables.
func Reference() string {
	return tl.Reference() + "\n" + host.Reference() + "\n" + orch.Reference() + "\n" + errkind.Reference()
}

// stubFiles are the stub files `kernbench docs --stubs` writes.
var stubFiles = []struct {
	name   string
	holds  string // what the file declares, as the command's report says
	render func() string
}{
	{"kernbench_tl.pyi", "tl, Ptr, Tile", tl.Stubs},
	{"kernbench_torch.pyi", "torch, tensor", host.Stubs},
	{"kernbench_orch.pyi", "orch, l2 and their objects", orch.Stubs},
}
