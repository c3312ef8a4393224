// Package msccl reads MSCCL XML schedules (the IR that msccl-tools'
// MSCCLang compiles to and that the MSCCL runtimes execute) and checks that
// a schedule can run: every reference points at something that exists,
// every send has its receive, and no step waits for itself. It knows
// nothing about Starlark or the simulated machine; starlark/ccl runs a
// checked schedule through the ordinary run path.
package msccl

import (
	"fmt"
	"sort"
	"strings"
)

// Algo is one <algo> element: a schedule for ngpus ranks.
type Algo struct {
	File           string
	Line           int
	Name           string
	Coll           string // a name of engine/collective's Table
	Proto          string // Simple, LL, LL128: a timing hint, kept for reports
	NChannels      int
	NChunksPerLoop int
	NGPUs          int
	InPlace        bool
	// PieceBytes is the size of the messages a connection carries
	// (kernbench_piece_bytes, written by kernbench's export): 0 when the
	// file does not say, and a runner fills one FIFO slot per message.
	// The MSCCL runtimes look attributes up by name and ignore this one.
	PieceBytes int
	// MinBytes and MaxBytes are the range of call sizes the runtime
	// picks the schedule for, written as minBytes (inclusive) and
	// maxBytes (exclusive; 0 writes the largest int64: no bound). A
	// parsed file leaves them 0.
	MinBytes, MaxBytes int64
	GPUs               []GPU // indexed by id
}

// GPU is one rank's part of the schedule.
type GPU struct {
	ID                        int
	Line                      int
	IChunks, OChunks, SChunks int
	TBs                       []TB // indexed by id
}

// TB is a thread block: a sequence of steps with at most one peer it sends
// to and one it receives from, on one channel.
type TB struct {
	ID         int
	Line       int
	Send, Recv int // peer gpu, -1 for none
	Chan       int
	Steps      []Step // indexed by s
}

// Buffer names a rank's buffer: input, output or scratch.
type Buffer byte

const (
	Input   Buffer = 'i'
	Output  Buffer = 'o'
	Scratch Buffer = 's'
)

func (b Buffer) String() string { return string(b) }

// Step is one instruction of a thread block.
type Step struct {
	S      int
	Line   int
	Type   string // s r rcs rrs rrc rrcs cpy re nop
	SrcBuf Buffer
	SrcOff int
	DstBuf Buffer
	DstOff int
	Cnt    int
	DepID  int // thread block this step waits for, -1 for none
	Deps   int // the step of DepID it waits for
	HasDep bool
}

// stepKind says what a step type does: which operands it reads and writes
// and whether it receives from the thread block's recv peer and sends to
// its send peer.
type stepKind struct {
	readsSrc, writesDst, recvs, sends bool
}

var kinds = map[string]stepKind{
	"s":    {readsSrc: true, sends: true},
	"r":    {writesDst: true, recvs: true},
	"rcs":  {writesDst: true, recvs: true, sends: true},
	"rrs":  {readsSrc: true, recvs: true, sends: true},
	"rrc":  {readsSrc: true, writesDst: true, recvs: true},
	"rrcs": {readsSrc: true, writesDst: true, recvs: true, sends: true},
	"cpy":  {readsSrc: true, writesDst: true},
	"re":   {readsSrc: true, writesDst: true},
	"nop":  {},
}

// stepTypes are the step types kernbench runs, in MSCCL's spelling.
var stepTypes = []string{"s", "r", "rcs", "rrs", "rrc", "rrcs", "cpy", "re", "nop"}

// Reads, Writes, Recvs and Sends describe what the step's type does.
func (s *Step) Reads() bool  { return kinds[s.Type].readsSrc }
func (s *Step) Writes() bool { return kinds[s.Type].writesDst }
func (s *Step) Recvs() bool  { return kinds[s.Type].recvs }
func (s *Step) Sends() bool  { return kinds[s.Type].sends }

// Error is one problem of a file, at a line.
type Error struct {
	File string
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// ErrorList is every problem found in a file, sorted by line.
type ErrorList []*Error

// maxErrors bounds the list: past it, one more line says how many were left out.
const maxErrors = 20

func (l ErrorList) Error() string {
	var b strings.Builder
	for i, e := range l {
		if i == maxErrors {
			fmt.Fprintf(&b, "\n%s: ... and %d more problem(s)", e.File, len(l)-maxErrors)
			break
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

func (l ErrorList) sorted() ErrorList {
	sort.SliceStable(l, func(i, j int) bool { return l[i].Line < l[j].Line })
	return l
}
