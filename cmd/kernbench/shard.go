package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"kernbench"
	"kernbench/cmd/kernbench/internal/compare"
	"kernbench/cmd/kernbench/internal/render"
	"kernbench/cmd/kernbench/internal/shards"
	"kernbench/starlark/script"
	"kernbench/starlark/target"
)

// mergeOptions are what the flags and arguments of `kernbench merge` say,
// as cobra parsed them.
type mergeOptions struct {
	Env     script.Env
	Reports []string // the shards' --json reports
	JSON    bool
	Quiet   bool
}

// mergeFunc runs a `kernbench merge` whose flags and arguments are parsed
// into o.
type mergeFunc func(cmd *cobra.Command, o *mergeOptions, stdout, stderr io.Writer) error

func newMergeCmd(env script.Env, stdout, stderr io.Writer) *cobra.Command {
	return newMergeCmdWith(env, stdout, stderr, runMerge)
}

// newMergeCmdWith is the merge command with run as what it runs: tests
// give their own to see the options a command line makes.
func newMergeCmdWith(env script.Env, stdout, stderr io.Writer, run mergeFunc) *cobra.Command {
	o := &mergeOptions{Env: env}
	cmd := &cobra.Command{
		Use:   "merge REPORT.json...",
		Short: "Join the --json reports of a sharded sweep (--shard I/N) into the report one run would print",
		Long: `Join the --json reports of the shards of one sweep (kernbench run ... --shard I/N
--json, one per shard) into the table (or, with --json, the document) a
single run of the whole sweep prints: the same rows in size order. The
reports must come from the same algorithm, settings and sweep, and every
shard must be there; a size or shard that appears twice, a failed shard,
a missing one, a row of a size the shard's part of the sweep does not
hold or rows edited since the run is an error naming the files
(docs/cluster.md). wall_s
is the sum of the shards' wall times. A size a shard refused over
--max-memory is a refused row of the merged sweep, and merge then exits 2
as the run of the whole sweep would.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return errors.New("merge needs the --json reports of a sharded sweep, as kernbench merge shard-*.json")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, files []string) error {
			o.Reports = files
			return run(cmd, o, stdout, stderr)
		},
	}
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the merged JSON document instead of the table")
	cmd.Flags().BoolVarP(&o.Quiet, "quiet", "q", false, "print only the table")
	return cmd
}

// runMerge runs `kernbench merge`: it joins the reports and renders the
// merged one as one run would.
func runMerge(_ *cobra.Command, o *mergeOptions, stdout, stderr io.Writer) error {
	rep, err := shards.Merge(o.Env, o.Reports)
	if err != nil {
		return usageErr(err.Error())
	}
	if o.JSON {
		render.JSON(stdout, rep)
	} else {
		if len(rep.Results) > 0 {
			fmt.Fprintln(stdout, render.Header())
		}
		for i := range rep.Results {
			fmt.Fprintln(stdout, render.Row(&rep.Results[i]))
		}
		render.Summary(stdout, rep, o.Quiet, false)
	}
	// Sizes a shard refused over --max-memory are rows of the merged
	// sweep, and its status says so, as one run's would.
	return worstFailure(compare.RefusedSizes([]compare.Labeled{{Rep: rep}}, stderr), nil, stderr)
}

// notRowFlags are the run flags that change nothing in a report's rows
// (outputs, limits, how the sweep is spread) or whose effect the report
// records elsewhere: the size flags in the shard's sweep, --config and
// --set in its configuration digest, the rest in the header or the rows
// (sameRun), so that a shard relying on a default and one giving the
// same value as a flag still merge. Every other flag set (--seed,
// --jitter-seed, --bench, ...) makes another run.
var notRowFlags = map[string]bool{
	"json": true, "jsonl": true, "jobs": true, "threads": true, "quiet": true, "verbose": true,
	"shard": true, "shards": true, "trace": true, "trace-ranks": true,
	"trace-kinds": true, "oplog": true, "dot": true, "cpuprofile": true,
	"csv": true, "plot": true, "export-msccl": true, "dump-pointers": true,
	"timeout": true, "max-memory": true, "max-steps": true, "check": true,
	"strict": true, "bytes": true, "sweep": true, "minbytes": true,
	"maxbytes": true, "stepfactor": true, "config": true, "set": true,
	"world-size": true, "topology": true, "collective": true, "root": true,
	"data-space": true, "timing-only": true, "verify-data": true,
	"dtype": true, "redop": true, "in-place": true,
}

// rowSettings lists the flags set on cmd that decide a report's rows, as
// --name=value, in name order.
func rowSettings(cmd *cobra.Command) []string {
	out := []string{}
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if !notRowFlags[f.Name] {
			out = append(out, "--"+f.Name+"="+f.Value.String())
		}
	})
	return out
}

// configDigest identifies the configuration a run uses (the default,
// ccl.yaml or --config, and --set), whatever file it was read from.
func configDigest(o *runOptions) string {
	cfg, _, err := target.LoadConfig(o.Env, o.ConfigPath, o.Sets, kernbench.Files)
	if err != nil {
		return "" // the run reports it
	}
	c := *cfg
	c.File = ""
	data, err := json.Marshal(&c)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}
