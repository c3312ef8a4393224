package main

import (
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"kernbench"
	"kernbench/starlark/ccl"
	"kernbench/starlark/testrun"
)

func newTestCmd(stdout, stderr io.Writer) *cobra.Command {
	var run string
	var verbose, asJSON bool
	cmd := &cobra.Command{
		Use:   "test [PATH...]",
		Short: "Run *_test.star files (test_* functions) in the mock runtime",
		Long: `Find *_test.star files under the given files or folders (default: the
working directory), run every top-level test_* function with assert
predeclared and @kernbench//testing.star (run_kernel_in_mock) loadable, and
print go-test-like results ending in "N passed, N failed".

Exit status: 0 all passed, 1 a test failed, 2 a test file did not load.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			o := testrun.Options{Verbose: verbose, Embedded: kernbench.Files, Stderr: stderr, MaxSteps: defaultMaxSteps}
			if run != "" {
				re, err := regexp.Compile(run)
				if err != nil {
					return usageErr(stderr, asJSON, fmt.Sprintf("-run: %v", err))
				}
				o.Run = re
			}
			files, err := testrun.Discover(args)
			if err != nil {
				return usageErr(stderr, asJSON, err.Error())
			}
			var all []testrun.Result
			passed, failed, broken := 0, 0, 0
			for _, f := range files {
				start := time.Now()
				results, err := testrun.RunFile(f, o)
				if err != nil {
					broken++
					fmt.Fprintf(stdout, "FAIL %s [load error]\n%s\n", f, indent(err.Error()))
					continue
				}
				fileFailed := 0
				for _, r := range results {
					if r.Pass {
						passed++
						if verbose {
							fmt.Fprintf(stdout, "--- PASS: %s (%.2fs)\n", r.Name, r.Seconds)
						}
						continue
					}
					failed++
					fileFailed++
					fmt.Fprintf(stdout, "--- FAIL: %s (%.2fs)\n", r.Name, r.Seconds)
					for _, m := range r.Messages {
						fmt.Fprintln(stdout, indent(m))
					}
				}
				if len(results) == 0 && o.Run == nil {
					hint := ""
					if !strings.HasSuffix(f, "_test.star") {
						hint = " (an algorithm? run it with kernbench run, and test it from a NAME_test.star file)"
					}
					fmt.Fprintf(stderr, "kernbench: %s defines no test_* functions%s\n", f, hint)
				}
				status := "ok  "
				if fileFailed > 0 {
					status = "FAIL"
				}
				fmt.Fprintf(stdout, "%s %s\t%d test(s)\t%.3fs\n", status, f, len(results), time.Since(start).Seconds())
				all = append(all, results...)
			}
			if asJSON {
				writeJSON(stdout, map[string]any{"results": all, "passed": passed, "failed": failed, "load_errors": broken})
			}
			fmt.Fprintf(stdout, "%d passed, %d failed\n", passed, failed)
			switch {
			case broken > 0:
				return &exitError{code: ccl.ExitUsage, err: fmt.Errorf("%d test file(s) did not load", broken)}
			case failed > 0:
				return &exitError{code: ccl.ExitWrong, err: fmt.Errorf("%d test(s) failed", failed)}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&run, "run", "", "run only tests whose name matches this regular expression")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "list passing tests too")
	cmd.Flags().BoolVar(&asJSON, "json", false, "also print the results as one JSON document")
	return cmd
}

func indent(s string) string {
	out := "    "
	for _, c := range s {
		out += string(c)
		if c == '\n' {
			out += "    "
		}
	}
	return out
}
