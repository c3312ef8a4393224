package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"kernbench/starlark/errkind"
	"kernbench/starlark/orch"
	"kernbench/starlark/tl"
)

func newDocsCmd(stdout io.Writer) *cobra.Command {
	var stubs string
	cmd := &cobra.Command{
		Use:   "docs",
		Short: "Print the builtin reference (Markdown) generated from the registered builtins",
		Long: `Print the builtin reference (docs/builtins.md is exactly this output).
With --stubs DIR, also write DIR/kernbench_tl.pyi: Python-syntax stubs of tl,
Ptr and Tile for editors and Starlark language servers.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if stubs != "" {
				if err := os.MkdirAll(stubs, 0o755); err != nil {
					return err
				}
				path := filepath.Join(stubs, "kernbench_tl.pyi")
				if err := os.WriteFile(path, []byte(tl.Stubs()), 0o644); err != nil {
					return err
				}
			}
			_, err := fmt.Fprint(stdout, tl.Reference()+"\n"+orch.Reference()+"\n"+errkind.Reference())
			return err
		},
	}
	cmd.Flags().StringVar(&stubs, "stubs", "", "also write Python-syntax stubs (kernbench_tl.pyi) into this folder")
	return cmd
}
