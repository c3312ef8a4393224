package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"kernbench/starlark/tl"
)

func newDocsCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "docs",
		Short: "Print the builtin reference (Markdown) generated from the registered builtins",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprint(stdout, tl.Reference())
			return err
		},
	}
}
