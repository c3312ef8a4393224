package ccl

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"go.starlark.net/starlark"

	"kernbench/engine/machine"
	"kernbench/engine/msccl"
	"kernbench/engine/topology"
	"kernbench/starlark/errkind"
	"kernbench/starlark/failure"
	"kernbench/starlark/mscclio"
	"kernbench/starlark/orch"
	"kernbench/starlark/report"
	"kernbench/starlark/script"
	"kernbench/starlark/target"
	"kernbench/starlark/wiring"
)

// An MSCCL XML schedule runs through the same path as a .star algorithm:
// starlark/mscclio turns it into the keyword arguments of its runner
// kernel (msccl_runner.star), and the bench, reference check, phase 2,
// traces and deadlock reports are those of every run. This file is what
// of that needs ccl's own types: options, plan, target, failures.

// IsMSCCL reports whether a run or check argument names an MSCCL XML file.
func IsMSCCL(arg string) bool { return mscclio.IsSchedule(arg) }

// loadMSCCL reads and validates an MSCCL XML file; every problem is an
// exit-2 failure with the file's line.
func loadMSCCL(arg string, src script.Source) (*msccl.Algo, error) {
	data, err := src.ReadFile(arg)
	if err != nil {
		return nil, report.WithKind(errkind.Usage, &report.Failure{Rank: -1, Msg: err.Error(), Err: err})
	}
	a, err := msccl.Parse(arg, data)
	if err != nil {
		return nil, report.WithKind(errkind.MSCCL, &report.Failure{Rank: -1, Msg: err.Error(), Err: err})
	}
	return a, nil
}

// mscclFailure is a failure of an error of starlark/mscclio, of its kind.
func mscclFailure(err error) error {
	var e *mscclio.Error
	if !errors.As(err, &e) {
		return err
	}
	return report.WithKind(e.Kind, &report.Failure{Rank: -1, Msg: e.Msg, Err: e.Err})
}

// mscclFlags are the flags of opts that a schedule fixes.
func mscclFlags(opts Options) mscclio.Flags {
	return mscclio.Flags{WorldSize: opts.WorldSize, Collective: opts.Collective, Topology: opts.Topology, InPlace: opts.InPlace, Keywords: opts.Keywords}
}

// mscclSizes are the sizes of the plan p as the bench allocates them.
func mscclSizes(p *plan) *mscclio.Sizes {
	sz := &mscclio.Sizes{Coll: p.coll.Name, InPlace: p.opts.InPlace, ElemSize: int64(p.dt.Size()), DataSpace: p.dataSpace}
	for _, count := range p.counts {
		sz.Sizes = append(sz.Sizes, mscclio.Size{Count: count, Send: p.coll.sendCount(count, p.world), Recv: p.coll.recvCount(count, p.world)})
	}
	return sz
}

// hintItems names the user's --set and --vary items in the hints of
// mscclio.Place, as every other hint does (target.DescribeGiven, target.SetHint).
type hintItems []target.SetItem

func (h hintItems) Given(pos string) string { return target.DescribeGiven(pos, h) }

func (h hintItems) Set(path string, value any) string {
	s, _ := target.SetHint(path, value, h, false)
	return s
}

// exportMSCCL writes the schedule that rec recorded of the run of the
// plan p at count, with the bench's buffers b on the queue pairs g, to w
// (--export-msccl): what cannot be written is an ExportError.
func exportMSCCL(rec *mscclio.Recorder, p *plan, b *buffers, g *machine.Group, count int64, w io.Writer) error {
	var send, recv []machine.Region
	for r := range b.send {
		send, recv = append(send, b.send[r].Reg), append(recv, b.recv[r].Reg)
	}
	run := mscclio.Run{Algo: p.algoName, Coll: p.coll.Name, World: p.world, InPlace: p.opts.InPlace, DType: p.dt}
	a, err := rec.Schedule(run, send, recv, g, count)
	if err == nil {
		err = mscclio.Write(a, w)
	}
	if err != nil {
		return report.WithKind(errkind.Export, &report.Failure{Rank: -1, Msg: err.Error(), Err: err})
	}
	return nil
}

// mscclRun is what a run of the schedule a in file uses of the
// configuration: no algorithm entry, and its own world size and channels.
func mscclRun(file string, a *msccl.Algo) target.RunOf {
	return target.RunOf{Known: true, What: file, Fixed: map[string]string{
		"world_size": fmt.Sprintf("%s is a schedule for ngpus=%d ranks", file, a.NGPUs),
		"channels":   fmt.Sprintf("%s's thread blocks give its channels", file),
	}}
}

// runMSCCL is `kernbench run FILE.xml`.
func runMSCCL(arg string, opts Options) (*report.Report, error) {
	cfg, _, err := opts.loadConfig()
	if err != nil {
		return nil, err
	}
	src := script.Source{Env: opts.Env, Embedded: opts.Embedded, Overlay: map[string][]byte{mscclio.RunnerName: mscclio.Runner}}
	a, err := loadMSCCL(arg, src)
	if err != nil {
		return nil, err
	}
	if err := target.Ineffective(cfg, mscclRun(arg, a), opts.given()); err != nil {
		return nil, err
	}
	if err := mscclio.CheckFlags(arg, a, mscclFlags(opts)); err != nil {
		return nil, mscclFailure(err)
	}
	var final map[msccl.StepRef]bool
	if opts.RedOp == "avg" {
		if final, err = mscclio.Avg(a); err != nil {
			return nil, mscclFailure(err)
		}
	}
	if root, ok := mscclio.Root(a); ok {
		// --root 0 given is a root too: only the default gives way to the schedule's.
		if (opts.RootGiven || opts.Root != 0) && opts.Root != root {
			drop := fmt.Sprintf("--root %d", opts.Root)
			if opts.Keywords {
				drop = fmt.Sprintf("root=%d", opts.Root)
			}
			return nil, usage("%s: the schedule's %s root is rank %d (the only rank that %s); drop %s", arg, a.Coll, root, map[bool]string{true: "receives nothing", false: "sends nothing"}[a.Coll == "broadcast"], drop)
		}
		opts.Root = root
	}
	opts.WorldSize, opts.Collective, opts.Topology, opts.InPlace = a.NGPUs, a.Coll, "custom", a.InPlace
	opts.Params = append(append([]starlark.Tuple(nil), opts.Params...), mscclio.Params(a, final)...)
	loader := &script.Loader{Src: src, Search: "algorithms", MaxSteps: opts.MaxSteps, Stderr: opts.Stderr, Predeclared: orch.Predeclared(), PrintPrefix: printPrefix}
	globals, err := loader.Load(mscclio.RunnerName)
	if err != nil {
		return nil, failure.Load(err)
	}
	kernel, err := target.EntryPoint(globals, mscclio.RunnerName, "kernel")
	if err != nil {
		return nil, err
	}
	hook, err := target.EntryPoint(globals, mscclio.RunnerName, "neighbors")
	if err != nil {
		return nil, err
	}
	name := a.Name
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(arg), filepath.Ext(arg))
	}
	set := cfg.Defaults
	set.Channels = 1 // the directions carry the channels (g<peer>_<chan>)
	_, slotsGiven := cfg.DefaultsGiven["n_slots"]
	var slotsWhy string
	set.NSlots, slotsWhy = mscclio.Slots(arg, a, set, slotsGiven)
	tgt := &target.Target{Name: name, File: arg, Settings: set, NSlotsWhy: slotsWhy}
	pl, err := makePlan(tgt, globals, true, opts)
	if err != nil {
		return nil, err
	}
	sayThreads(opts, cfg, set, true, pl.world)
	sizes := mscclSizes(pl)
	if err := mscclio.Chunks(a, *sizes); err != nil {
		return nil, mscclFailure(err)
	}
	if fit, ok := mscclio.NewFit(a, sizes, cfg.System, set); ok {
		place, err := mscclio.Place(arg, fit, set, cfg.DefaultsGiven["buffer_kind"], hintItems(opts.setItems()), int64(pl.dt.Size()))
		if err != nil {
			return nil, mscclFailure(err)
		}
		tgt.Settings.BufferKind = place.Rings.String()
		tgt.Staging, tgt.BufferKindWhy, tgt.StagingWhy = place.Staging, place.RingsWhy, place.StagingWhy
	}
	// What the schedule leaves in its outputs, worked out without running
	// (kernbench check's result check): a wrong row it explains is the
	// schedule's doing, which the data's ranges alone do not say.
	var scheduleWrong []string
	if err := mscclio.Result(a, opts.Root); err != nil {
		scheduleWrong = strings.Split(err.Error(), "\n")
	}
	// A race the run's order may not meet: the run's rows are right for
	// its order, which a GPU need not keep. (Not in the mock, whose
	// schedules= explores orders and reports what it meets.)
	var races []string
	if err := mscclio.Races(a); err != nil {
		l, _ := err.(msccl.ErrorList)
		for _, e := range l {
			races = append(races, e.Error())
		}
		if len(l) > 0 && opts.Stderr != nil && !opts.silent && !opts.Untimed {
			fmt.Fprintf(opts.Stderr, "kernbench: warning: %s has %d race(s), which this run's order of steps may not meet (kernbench check %s lists them); the first: %s\n", arg, len(l), arg, l[0])
		}
	}
	rep, err := pl.sweep(cfg, tgt, arg, loader, func(p *plan, loader *script.Loader, count int64) (*report.Result, error) {
		// Each size has its own record of where the thread blocks are.
		pr := mscclio.NewProgress(a.File)
		pp := *p
		pp.params = append(append([]starlark.Tuple(nil), p.params...), starlark.Tuple{starlark.String("progress"), pr.Builtin()})
		pp.procNote = pr.Note
		res, err := runOnce(&pp, cfg, tgt, loader, kernel, hook, count)
		// A deadlock with n_slots (the user's) below what the schedule
		// needs says which setting gives it that.
		var f *report.Failure
		if err != nil && errkind.Of(err) == errkind.Deadlock && errors.As(err, &f) {
			f.Msg += mscclio.SlotsNeeded(a).Hint(arg, tgt.Settings.NSlots)
		}
		// A send that a write races with is named by its direction
		// (g1_1): the thread block of the file that sends on it is where
		// the writing step's missing dependency points.
		if err != nil && errkind.Of(err) == errkind.SendBufferHazard && errors.As(err, &f) {
			f.Msg += mscclio.SendHint(arg, a, f.Msg)
		}
		return res, err
	})
	if rep != nil {
		rep.ScheduleWrong, rep.ScheduleRaces = scheduleWrong, races
		// Rows that pass where the check finds the result wrong: one
		// order's timing, or data nothing wrote that held the right
		// value in this run (scratch starts zeroed). A wrong row's error
		// lists the lines; here only --json would.
		wrong := false
		for _, r := range rep.Results {
			wrong = wrong || r.Wrong > 0
		}
		if len(scheduleWrong) > 0 && !wrong && err == nil && opts.Stderr != nil && !opts.silent && !opts.Untimed {
			fmt.Fprintf(opts.Stderr, "kernbench: warning: %s leaves outputs wrong that this run's rows do not show (kernbench check %s lists them); the first: %s\n", arg, arg, scheduleWrong[0])
		}
	}
	return rep, err
}

// MSCCLMap is the neighbour map of a schedule check read: the
// connections of its thread blocks (nil when they do not make a valid
// map), on the machine a run would place its ngpus ranks on.
type MSCCLMap struct {
	NGPUs   int
	Links   [][]machine.Link
	Machine machine.Params
}

// CheckMSCCL is `kernbench check FILE.xml` (opts: the run it checks): the file parses and validates,
// and its neighbour map is consistent. The map is nil when the file or
// the configuration could not be read.
func CheckMSCCL(arg string, o Options) ([]string, *MSCCLMap) {
	cfg, _, err := target.LoadConfigWithFaults(o.Env, o.ConfigPath, o.Sets, o.Faults, o.Embedded)
	if err != nil {
		return target.ConfigProblems(err), nil
	}
	a, err := loadMSCCL(arg, script.Source{Env: o.Env, Embedded: o.Embedded})
	if err != nil {
		return strings.Split(err.Error(), "\n"), nil
	}
	mp := &MSCCLMap{NGPUs: a.NGPUs}
	if err := target.Ineffective(cfg, mscclRun(arg, a), o.given()); err != nil {
		return []string{err.Error()}, mp
	}
	if err := mscclio.CheckFlags(arg, a, mscclFlags(o)); err != nil {
		return []string{err.Error()}, mp
	}
	set := cfg.Defaults
	set.Channels = 1 // the directions carry the channels, as in a run
	mp.Machine = wiring.MachineParams(cfg.System, set)
	// The machine's faults (--fault, system.faults), as run refuses them.
	if err := wiring.CheckFaults(cfg.System, mp.Machine); err != nil {
		var problems []string
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				problems = append(problems, e.Error())
			}
		} else {
			problems = append(problems, err.Error())
		}
		return problems, mp
	}
	pairing, err := topology.Validate(&topology.Topology{Name: "custom", Maps: mscclio.Neighbors(a)})
	if err != nil {
		return []string{fmt.Sprintf("%s: %v", arg, err)}, mp
	}
	mp.Links = make([][]machine.Link, len(pairing))
	for r, ps := range pairing {
		for _, p := range ps {
			mp.Links[r] = append(mp.Links[r], machine.Link{Dir: p.Dir, Peer: p.Peer, PeerDir: p.PeerDir, RecvOnly: p.RecvOnly})
		}
	}
	// The result and the races: both are the schedule's own, so both
	// are listed, races first (a racy schedule's result is one order's).
	var problems []string
	if err := mscclio.Races(a); err != nil {
		problems = strings.Split(err.Error(), "\n")
	}
	root, _ := mscclio.Root(a) // else a run's default --root 0
	if err := mscclio.Result(a, root); err != nil {
		problems = append(problems, strings.Split(err.Error(), "\n")...)
	}
	// A buffer_kind the user gave that cannot hold the rings (the bench's
	// buffers aside: check knows no size): a problem of the run, listed
	// with the schedule's own.
	set = cfg.Defaults
	_, slotsGiven := cfg.DefaultsGiven["n_slots"]
	set.NSlots, _ = mscclio.Slots(arg, a, set, slotsGiven)
	if fit, ok := mscclio.NewFit(a, nil, cfg.System, set); ok {
		if _, err := mscclio.Place(arg, fit, set, cfg.DefaultsGiven["buffer_kind"], hintItems(o.setItems()), 1); err != nil {
			problems = append(problems, err.Error())
		}
	}
	return problems, mp
}
