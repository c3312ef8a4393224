package compare

import (
	"fmt"
	"io"
	"kernbench/cmd/kernbench/internal/render"
	"kernbench/starlark/report"
	"kernbench/starlark/sweep"
	"runtime/debug"
	"sync"
)

// InOrder runs run(0) … run(n-1) on up to workers goroutines and calls
// emit(i) on the caller's goroutine once run(i) and every run before it
// are done, so that what the runs buffered is written out in order. A
// panic in a run is raised again on the caller's goroutine (a
// *sweep.InternalError with the run's backtrace), past which the process
// would otherwise end outside the CLI's error boundary.
func InOrder(n, workers int, run, emit func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	done := make([]chan struct{}, n)
	panics := make([]any, n)
	for i := range done {
		done[i] = make(chan struct{})
	}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				func() {
					defer close(done[i])
					defer func() {
						if r := recover(); r != nil {
							if _, ok := r.(*sweep.InternalError); !ok {
								r = &sweep.InternalError{Value: r, Stack: debug.Stack()}
							}
							panics[i] = r
						}
					}()
					run(i)
				}()
			}
		}()
	}
	go func() {
		for i := 0; i < n; i++ {
			next <- i
		}
		close(next)
	}()
	for i := 0; i < n; i++ {
		<-done[i]
		if panics[i] != nil {
			wg.Wait()
			panic(panics[i])
		}
		emit(i)
	}
	wg.Wait()
}

// PrintOptions say how Print writes a comparison's summary.
type PrintOptions struct {
	JSON, JSONL, Quiet bool
	// Sweep: the command asked for several sizes, so each run that ran
	// at least one of them gets its average busbw line.
	Sweep bool
	// Whole: the runs are one sweep split by size (kernbench run auto),
	// whose average over every row is the run's, as a single run's.
	Whole bool
}

// Print writes what follows a comparison's rows: the JSON document of
// its reports (JSON), each report's summary line (JSONL), or the
// average busbw of each run of a sweep (and of the whole, for auto) and,
// unless quiet, each run's description and the faults it ran under.
func Print(w io.Writer, reps []Labeled, po PrintOptions) {
	asJSON, jsonl, quiet := po.JSON, po.JSONL, po.Quiet
	switch {
	case asJSON:
		all := struct {
			Runs []Report `json:"runs"`
		}{}
		for _, l := range reps {
			all.Runs = append(all.Runs, Report{Label: l.Label, Report: l.Rep})
		}
		render.JSON(w, all)
	case jsonl:
		for _, l := range reps {
			summary := *l.Rep
			summary.Results = nil
			render.JSONLine(w, Report{Label: l.Label, Report: &summary})
		}
	default:
		if po.Sweep {
			// Every run that ran a size, one row being an average too:
			// auto's run of a single size had no line.
			var all []report.Result
			for _, l := range reps {
				all = append(all, l.Rep.Results...)
				if avg, n := report.MeanBusBW(l.Rep.Results); n > 0 {
					fmt.Fprintf(w, "# avg busbw %s: %.2f GB/s\n", l.Label, avg)
				}
			}
			if avg, n := report.MeanBusBW(all); po.Whole && n > 0 {
				fmt.Fprintf(w, "# avg busbw: %.2f GB/s\n", avg)
			}
		}
		if !quiet {
			for _, l := range reps {
				r := l.Rep
				if r.Collective == "" {
					continue // failed before it started: its error row says why
				}
				root := ""
				if r.Root != nil {
					root = fmt.Sprintf(", root %d", *r.Root)
				}
				fmt.Fprintf(w, "# %s: %s, collective %s, topology %s, world_size %d%s%s, %s, backpressure %s, data in %s\n",
					l.Label, r.File, r.Collective, r.Topology, r.WorldSize, root, render.InPlace(r), render.Placement(r), r.Backpressure, r.DataSpace)
				// Every variant runs under the same faults: what each
				// algorithm put through them at its largest size.
				if n := len(r.Results); n > 0 {
					for _, f := range r.Results[n-1].Faults {
						fmt.Fprintf(w, "# %s fault at %d bytes: %s\n", l.Label, r.Results[n-1].Bytes, f)
					}
				}
			}
		}
	}
}
