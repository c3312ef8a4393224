// Package sweep runs the sizes of a run and hands on their rows in size
// order, its one job: one after the other, or up to -j at once, each
// size then writing its print output, op_log, CCL trace and pointer
// dumps into buffers copied out in size order, so that a parallel sweep
// writes byte for byte what a sequential one writes. Only the last size
// records a timeline (one trace document per run).
package sweep

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"sync"

	"kernbench/starlark/report"
)

// Outputs are where a size writes.
type Outputs struct {
	Stderr, OpLog, CCLTrace, DumpPointers, Trace io.Writer
}

// Sweep is a run's sizes and what runs one.
type Sweep struct {
	Counts []int64
	// Jobs > 1 runs up to that many sizes at once.
	Jobs int
	// Out are the run's outputs (Trace: the last size's).
	Out      Outputs
	Progress func(i, n int, count int64) // before each size (may be nil)
	// Size runs one size, writing to out; own says out are the size's own
	// buffers (a parallel sweep): what the size prints goes there.
	Size func(count int64, out Outputs, own bool) (*report.Result, error)
	// Refused is the row of a size whose error is a refusal that makes a
	// row, or nil.
	Refused func(count int64, err error) *report.Result
	// Deliver receives each size's row, in size order.
	Deliver func(*report.Result)
	// Between, when set, runs after each size but the last of a sweep
	// that runs them one after the other.
	Between func()
}

// Parallel says whether s runs sizes at once.
func (s *Sweep) Parallel() bool { return s.Jobs > 1 && len(s.Counts) > 1 }

// Run runs every size until the first that fails (in size order), whose
// error it returns after the sizes before it are delivered.
func (s *Sweep) Run() error {
	if s.Parallel() {
		return s.parallel()
	}
	out := s.Out
	for i, count := range s.Counts {
		if s.Progress != nil {
			s.Progress(i, len(s.Counts), count)
		}
		out.Trace = nil
		if i == len(s.Counts)-1 {
			out.Trace = s.Out.Trace
		}
		res, err := s.Size(count, out, false)
		if s.Between != nil && i < len(s.Counts)-1 {
			s.Between()
		}
		if row := s.Refused(count, err); row != nil {
			res, err = row, nil
		}
		if err != nil {
			return err
		}
		s.Deliver(res)
	}
	return nil
}

// InternalError is a panic (a bug in kernbench) caught on a goroutine of
// its own and carried to the caller with the goroutine's backtrace.
type InternalError struct {
	Value any
	Stack []byte
}

func (e *InternalError) Error() string { return fmt.Sprintf("internal error: %v", e.Value) }

// pointOutput is what one size of a parallel sweep wrote.
type pointOutput struct {
	stderr, oplog, cclTrace, dump bytes.Buffer
	res                           *report.Result
	err                           error
	done                          chan struct{}
}

// parallel runs the sizes Jobs at a time and delivers them in order; at
// the first size that fails (in size order) it stops starting new ones
// and returns that error after the sizes before it are delivered.
func (s *Sweep) parallel() error {
	n := len(s.Counts)
	points := make([]*pointOutput, n)
	for i := range points {
		points[i] = &pointOutput{done: make(chan struct{})}
	}
	slots := make(chan struct{}, s.Jobs)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	go func() {
		for i, count := range s.Counts {
			select {
			case slots <- struct{}{}:
			case <-stop:
				for ; i < n; i++ {
					points[i].err = errSweepStopped
					close(points[i].done)
				}
				return
			}
			wg.Add(1)
			go func(i int, count int64, out *pointOutput) {
				defer wg.Done()
				defer func() { <-slots }()
				defer close(out.done)
				// A panic here would kill the process past the CLI's error
				// boundary: carry it to the delivering goroutine instead.
				defer func() {
					if r := recover(); r != nil {
						out.err = &InternalError{Value: r, Stack: debug.Stack()}
					}
				}()
				to := Outputs{Stderr: &out.stderr}
				if s.Out.OpLog != nil {
					to.OpLog = &out.oplog
				}
				if s.Out.CCLTrace != nil {
					to.CCLTrace = &out.cclTrace
				}
				if s.Out.DumpPointers != nil {
					to.DumpPointers = &out.dump
				}
				if i == n-1 {
					to.Trace = s.Out.Trace
				}
				out.res, out.err = s.Size(count, to, true)
			}(i, count, points[i])
		}
	}()
	var firstErr error
	for i, out := range points {
		if s.Progress != nil && firstErr == nil {
			s.Progress(i, n, s.Counts[i])
		}
		<-out.done
		if firstErr != nil {
			continue
		}
		if ie := (*InternalError)(nil); errors.As(out.err, &ie) {
			close(stop)
			wg.Wait()
			panic(ie) // to the CLI's error boundary, as in a sequential sweep
		}
		for _, c := range []struct {
			buf *bytes.Buffer
			w   io.Writer
		}{{&out.stderr, s.Out.Stderr}, {&out.oplog, s.Out.OpLog}, {&out.cclTrace, s.Out.CCLTrace}, {&out.dump, s.Out.DumpPointers}} {
			if c.w != nil && c.buf.Len() > 0 {
				_, _ = c.w.Write(c.buf.Bytes())
			}
		}
		if row := s.Refused(s.Counts[i], out.err); row != nil {
			out.res, out.err = row, nil
		}
		if out.err != nil {
			firstErr = out.err
			close(stop)
			continue
		}
		s.Deliver(out.res)
	}
	wg.Wait()
	return firstErr
}

// errSweepStopped marks sizes a parallel sweep did not start because an
// earlier size failed.
var errSweepStopped = errors.New("not run: an earlier size failed")
