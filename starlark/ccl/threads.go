package ccl

// How a run simulates: on one Sim, or partitioned (engine/sim,
// partition.go: a Sim per SIP, run in conservative windows) on K
// goroutines (--threads). The partitioned order is the rule of every
// timed builtin-bench run of a machine of several SIPs, whatever K: a
// run that cannot use several goroutines runs the same partitioned run
// on one, so its result never depends on --threads or on another flag.

import (
	"fmt"
	"io"
	"runtime"
	"sync"

	"kernbench/engine/config"
	"kernbench/engine/machine"
	"kernbench/engine/sim"
	"kernbench/starlark/wiring"
)

// simMode is how one size simulates.
type simMode struct {
	// parts: on partitions, one per SIP (else one Sim).
	parts bool
	// threads is the goroutines that run the partitions' windows (1 on
	// one Sim), asked what was asked (--threads, else the cores).
	threads, asked int
	// why says why threads is less than asked ("" when it is not).
	why string
}

// modeOf decides how a run of opts on a machine of mp simulates; a bench
// that is not partitionable (a host bench, an L3 bench: one host process
// that reaches every SIP) runs on one Sim.
func modeOf(opts Options, mp machine.Params, partitionable bool, world int) simMode {
	asked := opts.Threads
	if asked <= 0 {
		asked = runtime.GOMAXPROCS(0)
	}
	m := simMode{threads: 1, asked: asked}
	switch {
	case !partitionable:
		m.why = "a host or L3 bench simulates on one thread (its host side reaches every SIP)"
	case mp.Untimed:
		m.why = "the untimed mock simulates on one thread"
	case mp.Sips < 2 || mp.Lookahead() <= 0:
		m.why = "a machine of one SIP simulates on one thread"
	case mp.Holds(world) == nil && len(mp.UsedSips(world)) < 2:
		m.why = "ranks on one SIP simulate on one thread"
	default:
		used := len(mp.UsedSips(world))
		m.parts, m.threads = true, asked
		switch {
		case opts.ExportMSCCL != nil:
			m.threads, m.why = 1, "--export-msccl records the schedule on one thread"
		case opts.Check:
			m.threads, m.why = 1, "--check scans every queue pair after each delivery, on one thread"
		case opts.CCLTrace != nil:
			m.threads, m.why = 1, "KERNBENCH_CCL_TRACE writes each send and receive in one order, on one thread"
		case opts.probe:
			m.threads, m.why = 1, "a memory probe runs on one thread"
		case asked > used:
			m.threads, m.why = used, fmt.Sprintf("a thread runs one SIP at least, and the ranks sit on %d", used)
		}
	}
	if m.threads >= asked {
		m.why = ""
	}
	return m
}

// sayThreads tells, with -v, how many threads the run simulates on and
// why fewer than asked (never in the table or --json, which are the same
// for every --threads).
func sayThreads(opts Options, cfg *config.Config, set config.Settings, partitionable bool, world int) {
	if !opts.Detail || opts.Stderr == nil || opts.silent {
		return
	}
	mp := wiring.MachineParams(cfg.System, set)
	mp.Untimed = opts.Untimed
	m := modeOf(opts, mp, partitionable, world)
	what := "as one simulation"
	if m.parts {
		what = fmt.Sprintf("as %d partitions (one per SIP with ranks)", len(mp.UsedSips(world)))
	}
	threads := "1 thread"
	if m.threads > 1 {
		threads = fmt.Sprintf("%d threads", m.threads)
	}
	fmt.Fprintf(opts.Stderr, "kernbench: the run simulates %s on %s", what, threads)
	if m.why != "" {
		asked := "asked"
		if opts.Threads <= 0 {
			asked = "cores available"
		}
		fmt.Fprintf(opts.Stderr, " of the %d %s: %s", m.asked, asked, m.why)
	}
	fmt.Fprintln(opts.Stderr)
}

// prints are a partitioned run's print output: the lines each
// partition's kernels print, with their times, buffered and written at
// each barrier in (time, partition, order of printing), the same for
// every number of threads. (A window's lines are all before the next
// window's: every event of the next is at or after this one's end.)
type prints struct {
	mu    sync.Mutex // (workers of one window append to their own parts)
	parts [][]printed
	n     int
}

type printed struct {
	at   sim.Time
	w    io.Writer
	line string
}

func newPrints(partitions int) *prints { return &prints{parts: make([][]printed, partitions)} }

// add keeps a line partition part printed at time at.
func (ps *prints) add(part int, at sim.Time, w io.Writer, line string) {
	ps.mu.Lock()
	ps.parts[part] = append(ps.parts[part], printed{at, w, line})
	ps.n++
	ps.mu.Unlock()
}

// flush writes the lines kept so far in (time, partition, order) and
// forgets them (at a barrier, or after the run: no partition runs).
func (ps *prints) flush() {
	if ps == nil || ps.n == 0 {
		return
	}
	for _, p := range sim.MergeByTime(ps.parts, func(p printed) sim.Time { return p.at }) {
		io.WriteString(p.w, p.line)
	}
	for i := range ps.parts {
		clear(ps.parts[i])
		ps.parts[i] = ps.parts[i][:0]
	}
	ps.n = 0
}
