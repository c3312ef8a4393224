package main

// The peer: a SimPy model of the same pipelined ring allreduce (not
// shipped with kernbench), which the performance targets are stated
// against. perfreport runs it with -peer SCRIPT alternately with
// kernbench, run for run, so that both see the same drift of a shared
// machine, and compares whole-process CPU time per message.

import (
	"bytes"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The peer's job for N ranks is `--ranks N --chunks peerChunks --slots
// peerSlots`: N·2(N−1)·peerChunks messages, as many as kernbench's ring
// with 4 KiB messages and N × 32 KiB per rank.
const (
	peerChunks = 8
	peerSlots  = 32
)

// peerArgs are the peer script's arguments for n ranks.
func peerArgs(n int) []string {
	return []string{"--ranks", strconv.Itoa(n), "--chunks", strconv.Itoa(peerChunks), "--slots", strconv.Itoa(peerSlots)}
}

// peerMessages is the number of messages the peer's ring sends: each of
// the n links carries 2(n−1) steps of chunks messages.
func peerMessages(n, chunks int) int64 {
	return int64(n) * 2 * int64(n-1) * int64(chunks)
}

// peerOutput is what one run of the peer printed: its first line names
// the SimPy and Python versions, then a header and one row per rank count.
type peerOutput struct {
	SimPy, Python string
	N             int
	ChunkBytes    int64
	TSimUS        float64 // simulated time, µs
	Events        int64
	Checked, Bad  int64
}

// parsePeer reads the peer's output for a run of n ranks: the versions
// line, the header, and the single row for n. It fails on a missing
// column, a row for another rank count, a chunk reported wrong (bad ≠ 0)
// or an incomplete run (fewer checked chunks than n·n·chunks).
func parsePeer(out string, n, chunks int) (peerOutput, error) {
	var p peerOutput
	lines := strings.Split(strings.TrimSpace(out), "\n")
	first := strings.Fields(lines[0])
	for i := 0; i+1 < len(first); i++ {
		switch first[i] {
		case "simpy":
			p.SimPy = first[i+1]
		case "python":
			p.Python = first[i+1]
		}
	}
	if p.SimPy == "" || p.Python == "" {
		return peerOutput{}, fmt.Errorf("peer: no `simpy VERSION  python VERSION` in its first line %q", lines[0])
	}
	var header []string
	var rows [][]string
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		switch {
		case len(f) == 0:
		case header == nil && f[0] == "N":
			header = f
		case header != nil && len(f) == len(header):
			rows = append(rows, f)
		default:
			return peerOutput{}, fmt.Errorf("peer: unexpected line %q", l)
		}
	}
	if header == nil {
		return peerOutput{}, fmt.Errorf("peer: no header line (N … bad …) in its output:\n%s", out)
	}
	if len(rows) != 1 {
		return peerOutput{}, fmt.Errorf("peer: %d result rows, want 1:\n%s", len(rows), out)
	}
	row := rows[0]
	col := func(name string) (string, error) {
		i := slices.Index(header, name)
		if i < 0 {
			return "", fmt.Errorf("peer: no %q column in its header %q", name, strings.Join(header, " "))
		}
		return row[i], nil
	}
	var rowN int64
	for _, c := range []struct {
		name string
		dst  *int64
	}{{"N", &rowN}, {"chunkB", &p.ChunkBytes}, {"events", &p.Events}, {"checked", &p.Checked}, {"bad", &p.Bad}} {
		s, err := col(c.name)
		if err != nil {
			return peerOutput{}, err
		}
		if *c.dst, err = strconv.ParseInt(s, 10, 64); err != nil {
			return peerOutput{}, fmt.Errorf("peer: column %s: %v", c.name, err)
		}
	}
	p.N = int(rowN)
	s, err := col("T_sim_us")
	if err != nil {
		return peerOutput{}, err
	}
	if p.TSimUS, err = strconv.ParseFloat(s, 64); err != nil {
		return peerOutput{}, fmt.Errorf("peer: column T_sim_us: %v", err)
	}
	switch {
	case p.N != n:
		return peerOutput{}, fmt.Errorf("peer: a row for N=%d, want N=%d", p.N, n)
	case p.Bad != 0:
		return peerOutput{}, fmt.Errorf("peer: N=%d: %d chunks reduced wrong (bad column), want 0", n, p.Bad)
	case p.Checked != int64(n)*int64(n)*int64(chunks):
		return peerOutput{}, fmt.Errorf("peer: N=%d: %d chunks checked, want %d (deadlock or early end)", n, p.Checked, int64(n)*int64(n)*int64(chunks))
	}
	return p, nil
}

// peerRun is one run of the peer process.
type peerRun struct {
	out       peerOutput
	cpu, wall time.Duration // user + system of the process; wall clock
}

// resolvePython is the interpreter's own executable (its sys.executable):
// a launcher such as pyenv's shim, a shell script that execs the
// interpreter, costs about 0.4 s of CPU per start on the project's
// machine, which would be counted as the peer's.
func resolvePython(python string) (string, error) {
	out, err := exec.Command(python, "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		return "", fmt.Errorf("-python %s: %v", python, err)
	}
	exe := strings.TrimSpace(string(out))
	if exe == "" {
		return "", fmt.Errorf("-python %s: no sys.executable", python)
	}
	return exe, nil
}

// runPeer runs the peer script for n ranks once. PYTHONPATH and the rest
// of the environment pass through (SimPy must be importable).
func runPeer(python, script string, n int) (peerRun, error) {
	cmd := exec.Command(python, append([]string{script}, peerArgs(n)...)...)
	c, err := runChild(cmd)
	if err != nil {
		return peerRun{}, fmt.Errorf("peer %s %s: %v: %s%s", python, strings.Join(peerArgs(n), " "), err, c.out.String(), strings.TrimSpace(c.errOut.String()))
	}
	p, err := parsePeer(c.out.String(), n, peerChunks)
	if err != nil {
		return peerRun{}, err
	}
	return peerRun{out: p, cpu: c.cpu, wall: c.wall}, nil
}

// child is what a finished child process left: its output, its wall
// time and its user + system time (from its rusage).
type child struct {
	out, errOut bytes.Buffer
	wall, cpu   time.Duration
}

// runChild runs cmd to its end, keeping its output and times (the times
// of kernbench's jobs and of the peer are read the same way).
func runChild(cmd *exec.Cmd) (*child, error) {
	c := &child{}
	cmd.Stdout, cmd.Stderr = &c.out, &c.errOut
	start := time.Now()
	err := cmd.Run()
	c.wall = time.Since(start)
	if cmd.ProcessState != nil {
		c.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	return c, err
}

// usPerMessage is a time of sec seconds in microseconds per message.
func usPerMessage(sec float64, msgs int64) float64 {
	return sec * 1e6 / float64(max(msgs, 1))
}

// pairRatios are, pair by pair, the peer's CPU time per message divided
// by kernbench's (both in seconds): how many times faster kernbench is
// per message.
func pairRatios(peerCPU, kbCPU []float64, peerMsgs, kbMsgs int64) []float64 {
	r := make([]float64, min(len(peerCPU), len(kbCPU)))
	for i := range r {
		r[i] = usPerMessage(peerCPU[i], peerMsgs) / max(usPerMessage(kbCPU[i], kbMsgs), 1e-12)
	}
	return r
}

// medianFloat is the middle value (the mean of the two middle ones for an
// even count), 0 for none.
func medianFloat(fs []float64) float64 {
	if len(fs) == 0 {
		return 0
	}
	s := slices.Clone(fs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
