package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"kernbench/starlark/errkind"
	"kernbench/starlark/host"
	"kernbench/starlark/orch"
	"kernbench/starlark/script"
	"kernbench/starlark/tl"
)

func newDocsCmd(env script.Env, stdout io.Writer) *cobra.Command {
	var stubs string
	cmd := &cobra.Command{
		Use:   "docs",
		Short: "Print the builtin reference (Markdown) generated from the registered builtins",
		Long: `Print the builtin reference (docs/builtins.md is exactly this output).
With --stubs DIR, also write Python-syntax stubs for editors and Starlark
language servers: DIR/kernbench_tl.pyi (tl, Ptr, Tile), DIR/kernbench_torch.pyi
(torch, tensor) and DIR/kernbench_orch.pyi (orch, l2 and their objects).`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if stubs != "" {
				if err := os.MkdirAll(env.Path(stubs), 0o755); err != nil {
					return env.UserError(err, stubs)
				}
				for _, f := range stubFiles {
					if err := os.WriteFile(filepath.Join(env.Path(stubs), f.name), []byte(f.render()), 0o644); err != nil {
						return env.UserError(err, stubs)
					}
				}
			}
			_, err := fmt.Fprint(stdout, Reference())
			return err
		},
	}
	cmd.Flags().StringVar(&stubs, "stubs", "", "also write Python-syntax stubs (kernbench_tl.pyi, kernbench_torch.pyi, kernbench_orch.pyi) into this folder")
	return cmd
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
	render func() string
}{
	{"kernbench_tl.pyi", tl.Stubs},
	{"kernbench_torch.pyi", host.Stubs},
	{"kernbench_orch.pyi", orch.Stubs},
}
