package errkind_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.starlark.net/starlark"

	"kernbench/engine/l3l2"
	"kernbench/engine/machine"
	"kernbench/engine/prims"
	"kernbench/engine/sim"
	"kernbench/starlark/errkind"
	"kernbench/starlark/script"
	"kernbench/starlark/tl"
)

// Every kind is documented, has an exit status of a failure and a group;
// the names the engine's errors are looked up by are unique in their group.
func TestTableDeclaresEveryKindOnce(t *testing.T) {
	seen := map[*errkind.Kind]bool{}
	names := map[errkind.Group]map[string]bool{}
	for _, k := range errkind.Table() {
		if seen[k] {
			t.Errorf("%s (exit %d) is in the table twice", k.Name, k.Status)
		}
		seen[k] = true
		if k.Name == "" || k.Doc == "" || strings.HasSuffix(k.Doc, ".") {
			t.Errorf("kind %+v: want a name and a doc without a trailing period", *k)
		}
		if k.Status < errkind.ExitWrong || k.Status > errkind.ExitRuntime {
			t.Errorf("%s: exit status %d is not a failure's (1 to 4)", k.Name, k.Status)
		}
		if k.Group != errkind.Run && k.Status != errkind.ExitRuntime {
			t.Errorf("%s: a %v kind exits %d, want 4", k.Name, k.Group, k.Status)
		}
		key := fmt.Sprintf("%s/%d", k.Name, k.Status)
		if k.Group != errkind.Run {
			key = k.Name
		}
		if names[k.Group] == nil {
			names[k.Group] = map[string]bool{}
		}
		if names[k.Group][key] {
			t.Errorf("%s is declared twice in group %v", key, k.Group)
		}
		names[k.Group][key] = true
	}
}

// The generated reference (kernbench docs) has a row for every kind, with
// its doc and, outside the tl table, its exit status: nothing declared can
// be missing from it.
func TestReferenceListsEveryKind(t *testing.T) {
	ref := tl.Reference() + "\n" + errkind.Reference()
	for _, k := range errkind.Table() {
		doc := strings.ReplaceAll(k.Doc, "|", `\|`)
		row := fmt.Sprintf("| `%s` | %d | %s |\n", k.Name, k.Status, doc)
		if k.Group == errkind.TL {
			row = fmt.Sprintf("| `%s` | %s |\n", k.Name, doc)
		}
		if n := strings.Count(ref, row); n != 1 {
			t.Errorf("the reference has %d rows %q, want 1", n, row)
		}
	}
}

// Every kind name the engine raises is declared (an undeclared one would
// be an InternalError).
func TestEngineNames(t *testing.T) {
	tlNames := []string{"IpcqInvalidDirection", "IpcqMessageTooLarge", "StaleSlot"} // machine.IPCQError
	tlNames = append(tlNames, prims.Kinds...)
	var l3Names []string
	for _, k := range []l3l2.QueueErrorKind{l3l2.QueueBadArgument, l3l2.QueueBadDescriptor, l3l2.QueueInvalidDescriptor,
		l3l2.QueueOwnership, l3l2.QueueRemoteAborted, l3l2.QueueEndpointError} {
		l3Names = append(l3Names, string(k))
	}
	for _, k := range []l3l2.EndpointErrorKind{l3l2.EndpointBadDescriptor, l3l2.EndpointOutOfBounds, l3l2.EndpointSignalTimeout,
		l3l2.EndpointSignalProtocol, l3l2.EndpointLocalOperation} {
		l3Names = append(l3Names, string(k))
	}
	for _, c := range []l3l2.Code{l3l2.BadMagicVersion, l3l2.BadRegionID, l3l2.BadPayloadRange, l3l2.BadCounterRange,
		l3l2.OutOfBounds, l3l2.BadScalarCount, l3l2.CodeBadArgument, l3l2.CodeReleased, l3l2.CodePoisoned,
		l3l2.CodeSingleWriter, l3l2.CodeLocalOperation} {
		l3Names = append(l3Names, string(c))
	}
	for _, n := range tlNames {
		if errkind.Named(errkind.TL, n) == nil {
			t.Errorf("tl kind %s is not declared", n)
		}
	}
	for _, n := range l3Names {
		if errkind.Named(errkind.L3, n) == nil {
			t.Errorf("L3 kind %s is not declared", n)
		}
	}
}

// wrap buries err under several layers, as a run does (a rank, a
// Starlark EvalError's cause, a failure's context).
func wrap(err error) error {
	return fmt.Errorf("run: %w", fmt.Errorf("rank 3: %w", fmt.Errorf("tl.recv: %w", err)))
}

// loopErr is the error of a Starlark loop that never ends, stopped by the
// loader's step limit or its watchdog, as a Loader's caller sees it.
func loopErr(t *testing.T, l *script.Loader) error {
	t.Helper()
	th := l.NewThread("loop")
	_, err := starlark.ExecFileOptions(script.FileOptions(), th, "loop.star", "while True:\n    pass\n", nil)
	if err == nil {
		t.Fatal("the loop returned")
	}
	return script.Stopped(th, err)
}

type kinded struct{ k *errkind.Kind }

func (e kinded) Error() string            { return "kinded" }
func (e kinded) ErrorKind() *errkind.Kind { return e.k }

func TestOf(t *testing.T) {
	// Its limit has passed before the loop runs: the loop stops at its
	// first step, with no clock involved.
	wd := script.ManualWatchdog("--timeout 1ms")
	wd.Fire()
	cases := []struct {
		name string
		err  error
		want *errkind.Kind
	}{
		{"nil", nil, nil},
		{"plain error", wrap(errors.New("fail: nope")), errkind.Runtime},
		{"kinded", wrap(kinded{errkind.Config}), errkind.Config},
		{"tl error built without its kind", wrap(&tl.Error{Msg: "m"}), errkind.Internal},
		{"stall", wrap(&sim.StallError{}), errkind.Deadlock},
		{"wait timeout", wrap(&sim.WaitTimeoutError{}), errkind.Deadlock},
		{"watchdog", wrap(&sim.WatchdogError{}), errkind.Watchdog},
		{"events without end at one instant", wrap(&sim.StuckInstantError{}), errkind.NoTimeProgress},
		{"stale slot", wrap(&machine.IPCQError{Kind: "StaleSlot"}), errkind.StaleSlot},
		{"primitive's dtype mismatch", wrap(&prims.Error{Kind: prims.KindDtypeMismatch}), errkind.DtypeMismatch},
		{"primitive's piece too large", wrap(&prims.Error{Kind: prims.KindIpcqMessageTooLarge}), errkind.IpcqMessageTooLarge},
		{"invariant", wrap(&machine.InvariantError{Name: "I2"}), errkind.Invariant},
		{"unreceived", wrap(&machine.UnreceivedError{Sends: []machine.Unreceived{{Sender: 0, SendDir: "E", Receiver: 1, RecvDir: "W", Count: 1}}}), errkind.Unreceived},
		{"remote abort", wrap(&l3l2.QueueError{Kind: l3l2.QueueRemoteAborted}), errkind.RemoteAborted},
		{"region", wrap(&l3l2.RegionError{Code: l3l2.OutOfBounds}), errkind.L3OutOfBounds},
		{"endpoint", wrap(&l3l2.EndpointError{Kind: l3l2.EndpointSignalTimeout}), errkind.SignalTimeout},
		{"l3 timeout", wrap(&l3l2.TimeoutError{}), errkind.L3Timeout},
		{"l3 argument", wrap(&l3l2.ArgError{}), errkind.L3ValueError},
		{"descriptor", wrap(&l3l2.DescriptorError{Code: l3l2.BadMagicVersion}), errkind.BadMagicVersion},
		{"simulated memory full", wrap(&machine.OutOfMemoryError{Mem: &machine.Memory{}, Requested: 1}), errkind.TLOutOfMemory},
		{"step limit", wrap(loopErr(t, &script.Loader{MaxSteps: 1000})), errkind.StepLimit},
		{"timeout", wrap(loopErr(t, &script.Loader{Watchdog: wd})), errkind.Timeout},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := errkind.Of(c.err)
			if got != c.want {
				t.Errorf("Of(%v) = %v, want %v", c.err, got, c.want)
			}
			wantStatus := errkind.ExitOK
			if c.want != nil {
				wantStatus = c.want.Status
			}
			if s := errkind.Status(c.err); s != wantStatus {
				t.Errorf("Status(%v) = %d, want %d", c.err, s, wantStatus)
			}
		})
	}
}

// The exit statuses users rely on (spec: 1 wrong, 2 usage, 3 deadlock or
// limit, 4 run time), by kind.
func TestStatuses(t *testing.T) {
	got := map[string]int{}
	for _, k := range []*errkind.Kind{errkind.Usage, errkind.Load, errkind.MemoryLimit, errkind.Deadlock,
		errkind.StepLimit, errkind.Timeout, errkind.HostMemory, errkind.WrongResult, errkind.Runtime,
		errkind.TLOutOfMemory, errkind.L3Timeout} {
		got[fmt.Sprintf("%s/%v", k.Name, k.Group)] = k.Status
	}
	want := map[string]int{
		"UsageError/0": 2, "LoadError/0": 2, "OutOfMemory/0": 3, "Deadlock/0": 3, "StepLimit/0": 3,
		"Timeout/0": 3, "WrongResult/0": 1, "RuntimeError/0": 4, "OutOfMemory/1": 4, "Timeout/2": 4,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// The step limit of a module loaded by another is seen through load()'s
// error, and a thread cancelled for another reason before the watchdog
// fired is not a timeout.
func TestLimitCauses(t *testing.T) {
	src := script.Source{Overlay: map[string][]byte{
		"top.star":  []byte("load(\"loop.star\", \"x\")\n"),
		"loop.star": []byte("x = 0\nfor i in range(1000000):\n    x += i\n"),
	}}
	l := &script.Loader{Src: src, MaxSteps: 1000}
	_, err := l.Load("top.star")
	if k := errkind.Of(fmt.Errorf("load: %w", err)); k != errkind.StepLimit {
		t.Errorf("a step limit in a loaded module: got %v, want StepLimit (%v)", k, err)
	}

	wd := script.ManualWatchdog("--timeout 1h")
	defer wd.Stop()
	th := (&script.Loader{Watchdog: wd}).NewThread("cancelled")
	script.Cancel(th, "the simulation ended")
	_, err = starlark.ExecFileOptions(script.FileOptions(), th, "x.star", "x = 1\n", nil)
	err = script.Stopped(th, err)
	if err == nil || errkind.Of(err) != errkind.Runtime {
		t.Errorf("a thread cancelled when the simulation ended: got %v (%v), want RuntimeError", errkind.Of(err), err)
	}
}

// Every L3/L2 kind is the kind of an engine error that carries it: the
// errors of the descriptor decoder for the validation results it returns,
// the typed errors of the queue, region and endpoint layers for the rest.
// (An L2 endpoint records most of them in endpoint.error() instead of
// raising them; cmd/kernbench's TestEveryKindFromTheCLI runs the ones an
// L3 main raises.)
func TestEveryL3KindHasItsEngineError(t *testing.T) {
	decode := func(s ...uint64) error {
		_, err := l3l2.DecodeDescriptor(s)
		if err == nil {
			t.Fatalf("DecodeDescriptor(%v) succeeded", s)
		}
		return err
	}
	errs := []error{
		&l3l2.TimeoutError{Op: "counter.wait"},
		&l3l2.ArgError{Op: "counter.wait", Msg: "timeout must be > 0"},
		decode(0),
		decode(l3l2.RegionMagicVersion, 0),
		decode(l3l2.RegionMagicVersion),
		decode(l3l2.RegionMagicVersion, 1, 64, 0),
	}
	for _, k := range []l3l2.QueueErrorKind{l3l2.QueueBadArgument, l3l2.QueueBadDescriptor, l3l2.QueueInvalidDescriptor,
		l3l2.QueueOwnership, l3l2.QueueRemoteAborted, l3l2.QueueEndpointError} {
		errs = append(errs, &l3l2.QueueError{Kind: k})
	}
	for _, k := range []l3l2.EndpointErrorKind{l3l2.EndpointBadDescriptor, l3l2.EndpointOutOfBounds, l3l2.EndpointSignalTimeout,
		l3l2.EndpointSignalProtocol, l3l2.EndpointLocalOperation} {
		errs = append(errs, &l3l2.EndpointError{Kind: k})
	}
	for _, c := range []l3l2.Code{l3l2.BadCounterRange, l3l2.OutOfBounds, l3l2.CodeBadArgument, l3l2.CodeReleased,
		l3l2.CodePoisoned, l3l2.CodeSingleWriter, l3l2.CodeLocalOperation} {
		errs = append(errs, &l3l2.RegionError{Code: c})
	}
	found := map[*errkind.Kind]bool{}
	for _, err := range errs {
		k := errkind.Of(wrap(err))
		if k.Group != errkind.L3 {
			t.Errorf("%T %v is a %s (group %v), want an L3 kind", err, err, k.Name, k.Group)
		}
		found[k] = true
	}
	for _, k := range errkind.Table() {
		if k.Group == errkind.L3 && !found[k] {
			t.Errorf("no engine error is of the kind %s", k.Name)
		}
	}
}
