// Package output writes kernbench's output files, its one job: where an
// output flag's path sends what is written (stdout, a file replaced
// atomically, a pipe or device written into, through links), refusing
// what cannot receive it before a run starts, the --export-chakra folder,
// and removing the temporary files of outputs under way when the process
// is interrupted.
package output

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"kernbench/starlark/errkind"
	"kernbench/starlark/report"
	"kernbench/starlark/script"
)

// How an output flag (--trace, --oplog, --cpuprofile, --dot, --csv,
// --plot, --export-msccl; docs --stubs for each of its files) writes:
//
//   - "-" is the command's stdout;
//   - a symbolic link is followed to the file it names, also when that
//     file does not exist yet: the link stays, its target gets the output;
//   - a regular file (or a name that does not exist) is written to a
//     hidden temporary file in its own folder and renamed over it, so a
//     reader sees the previous file or the complete new one, never half;
//   - a named pipe or a character device is opened and written into,
//     never replaced;
//   - anything else (a folder, a block device, a socket) is refused
//     before the run starts.

// Kind is what an output does with what stands at its path.
type Kind int

const (
	Replace Kind = iota // a regular file, replaced whole by a rename
	Stream              // a pipe or a character device, written into
)

// KindOf decides, from the file at an output's path (after links),
// whether it is replaced or written into; it refuses the kinds of file an
// output must never touch.
func KindOf(st fs.FileInfo) (Kind, error) {
	m := st.Mode()
	switch {
	case m.IsRegular():
		return Replace, nil
	case m&fs.ModeNamedPipe != 0, m&fs.ModeDevice != 0 && m&fs.ModeCharDevice != 0:
		return Stream, nil
	case m.IsDir():
		return 0, errors.New("is a folder")
	case m&fs.ModeDevice != 0:
		return 0, errors.New("is a block device; an output is a regular file, a named pipe, a character device or - (stdout)")
	case m&fs.ModeSocket != 0:
		return 0, errors.New("is a socket; an output is a regular file, a named pipe, a character device or - (stdout)")
	}
	return 0, fmt.Errorf("is not a regular file (mode %v); an output is a regular file, a named pipe, a character device or - (stdout)", m)
}

// Dest is where one output flag's value sends its output.
type Dest struct {
	flag string
	path string // as the user gave it
	// stdout: the value is "-".
	stdout bool
	// real is the file system's name of the file written: path after
	// its links, joined to the working directory. shown is the same as
	// the user would write it (for messages).
	real, shown string
	kind        Kind
	perm        fs.FileMode // a replaced file keeps its permissions; a new one is 0644
	linked      bool        // path is a link (real is its target)
}

// maxLinks bounds the links followed from an output's path (a loop
// of links would go on for ever).
const maxLinks = 40

// Resolve finds where flag's path sends its output, refusing a
// path that cannot receive it: a folder, a block device or socket, a
// folder that does not exist, a loop of links, a link through /proc to a
// regular file.
func Resolve(env script.Env, flag, path string) (*Dest, error) {
	d := &Dest{flag: flag, path: path, perm: 0o644}
	switch path {
	case "":
		return nil, fmt.Errorf("%s: an empty file name; give a file, or - for stdout", flag)
	case "-":
		d.stdout = true
		return d, nil
	}
	linkedTo := path // what the path's link names, for messages
	if to, err := os.Readlink(env.Path(path)); err == nil {
		d.linked = true
		if linkedTo = to; !filepath.IsAbs(to) {
			linkedTo = filepath.Join(filepath.Dir(path), to)
		}
	}
	// A pipe or a device (links followed by the kernel, /dev/stdout
	// too) is written into through the name given.
	if st, err := os.Stat(env.Path(path)); err == nil && !st.Mode().IsRegular() {
		kind, err := KindOf(st)
		if err != nil {
			if st.IsDir() && flag == "--stubs" {
				// The file name is kernbench's, not the user's.
				return nil, fmt.Errorf("%s: %s is a folder where a stub file goes; move it away or give --stubs another folder", flag, d.describe(linkedTo))
			}
			if st.IsDir() {
				return nil, fmt.Errorf("%s: %s is a folder; give a file name, as %s", flag, d.describe(linkedTo), filepath.Join(path, examples[flag]))
			}
			return nil, fmt.Errorf("%s: %s %w", flag, d.describe(linkedTo), err)
		}
		d.real, d.shown, d.kind = env.Path(path), linkedTo, kind
		return d, nil
	}
	// A regular file, or none yet: the links are followed here, to the
	// file the output replaces (or creates) in its own folder.
	real, shown := env.Path(path), path
	for hops := 0; ; hops++ {
		st, err := os.Lstat(real)
		if errors.Is(err, fs.ErrNotExist) {
			// A new file, maybe through a dangling link: its folder must
			// exist (found only when the file is written, after the
			// simulation, the error would also name the hidden temporary
			// file the output is first written to).
			dir, shownDir := filepath.Dir(real), filepath.Dir(shown)
			dst, derr := os.Stat(dir)
			switch {
			case errors.Is(derr, fs.ErrNotExist):
				return nil, fmt.Errorf("%s: %s: the folder %s does not exist", flag, d.describe(shown), shownDir)
			case derr != nil:
				return nil, fmt.Errorf("%s: %s: %v", flag, d.describe(shown), env.UserError(derr, shownDir))
			case !dst.IsDir():
				return nil, fmt.Errorf("%s: %s: %s is not a folder", flag, d.describe(shown), shownDir)
			}
			d.real, d.shown, d.kind = real, shown, Replace
			return d, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", flag, env.UserError(err, path))
		}
		if st.Mode()&fs.ModeSymlink != 0 {
			if hops == maxLinks {
				return nil, fmt.Errorf("%s: %s: more than %d links in a row (a loop of links?)", flag, path, maxLinks)
			}
			if abs, err := filepath.Abs(real); err == nil && strings.HasPrefix(abs, "/proc/") {
				// /dev/stdout and the like, open on a regular file: a
				// file descriptor of the process, not a file to replace.
				return nil, fmt.Errorf("%s: %s leads to a file descriptor (%s) open on a regular file; give that file's name, or - for stdout", flag, path, abs)
			}
			to, err := os.Readlink(real)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", flag, env.UserError(err, path))
			}
			if filepath.IsAbs(to) {
				real, shown = to, to
				continue
			}
			// Relative to the folder the link is in: that folder's own
			// name after its links, so that ".." in the link goes where
			// the kernel takes it.
			dir := filepath.Dir(real)
			if r, err := filepath.EvalSymlinks(dir); err == nil {
				dir = r
			}
			real, shown = filepath.Join(dir, to), filepath.Join(filepath.Dir(shown), to)
			continue
		}
		kind, err := KindOf(st)
		if err != nil || kind != Replace {
			// What stood there a moment ago was a regular file.
			return nil, fmt.Errorf("%s: %s changed while it was looked at; try again", flag, d.describe(shown))
		}
		d.real, d.shown, d.kind, d.perm = real, shown, kind, st.Mode().Perm()
		return d, nil
	}
}

// describe names the file an output reaches: the path as given, and
// where its links lead.
func (d *Dest) describe(shown string) string {
	if !d.linked {
		return d.path
	}
	return fmt.Sprintf("%s (a link to %s)", d.path, shown)
}

// Name is the output's file as the user gave it, for messages.
func (d *Dest) Name() string {
	if d.stdout {
		return "- (stdout)"
	}
	return d.describe(d.shown)
}

// examples names a file each output flag could write, for the
// message that refuses a folder.
var examples = map[string]string{"--oplog": "oplog.jsonl", "--trace": "trace.json", "--cpuprofile": "cpu.prof", "--dot": "deadlock.dot",
	"--csv": "results.csv", "--plot": "busbw.svg", "--export-msccl": "schedule.xml"}

// ResolveAll resolves every output flag given (paths maps each flag
// to its value, "" for a flag not given) and refuses, before anything
// runs, a path that cannot receive its output and one file named by two
// flags: both would write into it and leave neither readable.
func ResolveAll(env script.Env, paths map[string]string) (map[string]*Dest, error) {
	dests := map[string]*Dest{}
	flags := slices.Sorted(maps.Keys(paths))
	for _, flag := range flags {
		if paths[flag] == "" {
			continue
		}
		d, err := Resolve(env, flag, paths[flag])
		if err != nil {
			return nil, err
		}
		dests[flag] = d
	}
	for i, a := range flags {
		for _, b := range flags[i+1:] {
			da, db := dests[a], dests[b]
			if da == nil || db == nil {
				continue
			}
			if da.stdout && db.stdout {
				return nil, fmt.Errorf("%s and %s both write to stdout (-); give one of them a file", a, b)
			}
			if !da.stdout && !db.stdout && sameFile(da.real, db.real) {
				return nil, fmt.Errorf("%s and %s name the same file %s; give each its own file", a, b, paths[a])
			}
		}
	}
	return dests, nil
}

// OverInput refuses an output whose file is one the command reads
// (its script, bench, --config or ./ccl.yaml; inputs as given, those that
// are no regular file on disk skipped): the run replaced what it was
// given to run (--trace algo.star wrote the trace over the algorithm).
func OverInput(env script.Env, dests map[string]*Dest, inputs []string) error {
	for _, flag := range slices.Sorted(maps.Keys(dests)) {
		d := dests[flag]
		if d.stdout || d.kind != Replace {
			continue
		}
		for _, in := range inputs {
			if in == "" {
				continue
			}
			if st, err := os.Stat(env.Path(in)); err != nil || !st.Mode().IsRegular() {
				continue
			}
			if sameFile(d.real, env.Path(in)) {
				return fmt.Errorf("%s %s would write over %s, a file this command reads; give the output another file", flag, d.path, in)
			}
		}
	}
	return nil
}

// sameFile reports whether a and b (links followed) are one file: the
// same cleaned absolute path, or (when both exist) the same file.
func sameFile(a, b string) bool {
	aa, err1 := filepath.Abs(a)
	bb, err2 := filepath.Abs(b)
	if err1 == nil && err2 == nil && aa == bb {
		return true
	}
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}

// File is an output written while the run goes on (--oplog, --trace,
// --cpuprofile). A regular file is written to a temporary file in its
// folder and renamed into place when complete, so a reader never sees
// half a file (nor a previous run's file half overwritten) even if the
// process is killed; a pipe or device is written directly, stdout too.
type File struct {
	dest    *Dest
	env     script.Env
	f       *os.File  // nil for stdout
	out     io.Writer // f, or stdout
	w       *bufio.Writer
	written int64
	tmp     bool // f is a temporary file to rename to dest.real
	// keepEmpty: the run simulated, so an output it wrote nothing to (an
	// op_log of no records: a deadlock before any data operation) is
	// still its output, and replaces what stands at the path (KeepEmpty).
	keepEmpty bool
}

// Create opens d for writing; stdout is the command's, for "-".
func Create(env script.Env, d *Dest, stdout io.Writer) (*File, error) {
	of := &File{dest: d, env: env}
	switch {
	case d.stdout:
		of.out = stdout
	case d.kind == Stream:
		f, err := os.OpenFile(d.real, os.O_WRONLY, 0)
		if err != nil {
			return nil, env.UserError(err, d.path)
		}
		of.f, of.out = f, f
	default:
		f, err := os.CreateTemp(filepath.Dir(d.real), "."+filepath.Base(d.real)+".*")
		if err != nil {
			return nil, env.UserError(err, filepath.Dir(d.shown))
		}
		of.f, of.out, of.tmp = f, f, true
		trackTemp(f.Name())
	}
	of.w = bufio.NewWriter(countingWriter{of})
	return of, nil
}

type countingWriter struct{ of *File }

func (c countingWriter) Write(b []byte) (int, error) {
	n, err := c.of.out.Write(b)
	c.of.written += int64(n)
	return n, err
}

// close flushes and closes the output. A temporary file that received
// nothing (the run failed before recording anything; its error and exit
// status say why) is removed, and what stands at the output's path is
// left as it was: bad input (a misspelt --set, a file that does not load)
// loses nothing, an earlier run's file included. A pipe, a device and
// stdout are only flushed.
func (of *File) Close() *report.Failure {
	err := of.w.Flush()
	if of.f == nil {
		if err != nil {
			return of.failure(err)
		}
		return nil
	}
	if !of.tmp {
		return of.closeFile(err)
	}
	var f *report.Failure
	settleTemp(of.f.Name(), func() { f = of.closeFile(err) })
	return f
}

// closeFile is close's end for a file: err is the flush's error.
func (of *File) closeFile(err error) *report.Failure {
	if err == nil && of.tmp {
		err = of.f.Chmod(of.dest.perm)
	}
	if cerr := of.f.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		if of.tmp {
			_ = os.Remove(of.f.Name())
		}
		return of.failure(err)
	case of.written == 0 && of.tmp && !of.keepEmpty:
		_ = os.Remove(of.f.Name())
	case of.tmp:
		// The run took a while: what stands at the path now is replaced
		// only if it still is a regular file (or nothing).
		if st, err := os.Lstat(of.dest.real); err == nil && !st.Mode().IsRegular() {
			_ = os.Remove(of.f.Name())
			return of.failure(fmt.Errorf("%s is no longer a regular file (%v) and was left as it is", of.dest.shown, st.Mode().Type()))
		}
		if err := os.Rename(of.f.Name(), of.dest.real); err != nil {
			_ = os.Remove(of.f.Name())
			return of.failure(err)
		}
	}
	return nil
}

// failure is the IOError of an output that could not be written.
func (of *File) failure(err error) *report.Failure {
	named := of.dest.shown // the name the file system saw
	if of.dest.kind == Stream {
		named = of.dest.path
	}
	err = of.env.UserError(err, filepath.Dir(named))
	return report.WithKind(errkind.IO, &report.Failure{Rank: -1, Msg: fmt.Sprintf("%s %s: %v", of.dest.flag, of.dest.Name(), err), Err: err})
}

// Write writes data, made whole after the run (--csv, --plot,
// --export-msccl, --dot), to d as Create and close do; it fails
// with the output's IOError.
func Write(env script.Env, d *Dest, stdout io.Writer, data []byte) *report.Failure {
	if !d.stdout {
		// Looked at again: the run took a while, and a pipe may stand
		// where there was nothing.
		again, err := Resolve(env, d.flag, d.path)
		if err != nil {
			return report.WithKind(errkind.IO, &report.Failure{Rank: -1, Msg: err.Error(), Err: err})
		}
		d = again
	}
	of, err := Create(env, d, stdout)
	if err != nil {
		return report.WithKind(errkind.IO, &report.Failure{Rank: -1, Msg: fmt.Sprintf("%s %s: %v", d.flag, d.Name(), err), Err: err})
	}
	_, werr := of.w.Write(data)
	f := of.Close()
	if werr != nil && f == nil {
		f = of.failure(werr)
	}
	return f
}

// temps are the temporary files of the outputs being written (an output
// file is written beside its target and renamed into place when done):
// an interrupt removes them rather than leave large hidden files behind.
// An output's close holds the lock while it renames or removes its file,
// and the interrupt holds it until the process ends.
var temps struct {
	sync.Mutex
	names map[string]bool
}

func trackTemp(name string) {
	temps.Lock()
	defer temps.Unlock()
	if temps.names == nil {
		temps.names = map[string]bool{}
	}
	temps.names[name] = true
}

// settleTemp runs f, which renames or removes the temporary file name,
// and forgets the file; an interrupt waits for it.
func settleTemp(name string, f func()) {
	temps.Lock()
	defer temps.Unlock()
	f()
	delete(temps.names, name)
}

// RemoveTempsOnInterrupt makes SIGINT, SIGTERM and SIGHUP remove the
// temporary output files and end the process with 128 + the signal's
// number, as the shell reports a process the signal ended: what was
// printed so far (the rows of the sizes done) stays. The returned
// function ends the handling.
func RemoveTempsOnInterrupt(stderr io.Writer) func() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-ch:
			temps.Lock() // held until the exit: no output is renamed into place half written
			for name := range temps.names {
				_ = os.Remove(name)
			}
			code := 128 + 2
			if s, ok := sig.(syscall.Signal); ok {
				code = 128 + int(s)
			}
			unwritten := ""
			if len(temps.names) > 0 {
				unwritten = fmt.Sprintf("; %d output file(s) under way not written (their temporary files are removed)", len(temps.names))
			}
			fmt.Fprintf(stderr, "kernbench: stopped by %s%s\n", signalName(sig), unwritten)
			os.Exit(code)
		case <-done:
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}

// signalName is how the last line names sig: Go names SIGTERM and SIGHUP
// "terminated" and "hangup", which read wrong after "stopped by"; Ctrl-C
// stays "interrupt".
func signalName(sig os.Signal) string {
	switch sig {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	}
	return sig.String()
}

// KeepOnBrokenPipe makes a write to a stdout or stderr whose reader has
// gone (`| head`) fail instead of ending the process, until the returned
// function is called: a run that writes output files finishes them
// first.
func KeepOnBrokenPipe() func() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGPIPE)
	return func() { signal.Stop(ch) }
}

// Writer is where the output's bytes go until Close.
func (of *File) Writer() io.Writer { return of.w }

// Stdout says the output is the command's stdout ("-").
func (d *Dest) Stdout() bool { return d.stdout }

// Set is the output files a run writes while its table's rows stream: a
// reader that ends early (`| head`) must not end the process before they
// are complete and in place, so while the set holds a file a closed
// stdout only fails the rows' writes (KeepOnBrokenPipe); an interrupt
// removes the temporary files (RemoveTempsOnInterrupt). An output that
// received nothing (the run failed before simulating) is removed rather
// than left empty, unless KeepEmpty says the run simulated.
type Set struct {
	files       []*File
	restorePipe func()
}

// Hold adds the open output of to the set.
func (s *Set) Hold(of *File) {
	if len(s.files) == 0 {
		s.restorePipe = KeepOnBrokenPipe()
	}
	s.files = append(s.files, of)
}

// KeepEmpty says that the run simulated: its files are its outputs even
// when nothing was written to them, and replace what stands at their
// paths (an earlier run's file would otherwise pass for this run's).
func (s *Set) KeepEmpty() {
	for _, of := range s.files {
		of.keepEmpty = true
	}
}

// Close closes the set's files and returns the failure of the first that
// could not be written, printing the others' on stderr.
func (s *Set) Close(stderr io.Writer) *report.Failure {
	var first *report.Failure
	for _, of := range s.files {
		if f := of.Close(); f != nil && first == nil {
			first = f
		} else if f != nil {
			fmt.Fprintf(stderr, "kernbench: %s\n", f.Msg)
		}
	}
	if len(s.files) > 0 {
		s.restorePipe()
	}
	s.files = nil
	return first
}
