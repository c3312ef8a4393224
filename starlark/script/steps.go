package script

import (
	"math"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// A thread's steps are the clock of two of its limits: the step budget
// (--max-steps) and the memory watch's polls. go.starlark.net calls one
// hook (OnMaxSteps) when a thread reaches the step count it was given;
// the schedule sets that count to whichever of the two comes first.
//
// A memory watch polls every coldPollSteps steps (a poll that finds no
// new garbage collection costs about 7 ns), and every hotPollSteps while
// each poll finds one: a thread that allocates fast starts a collection
// every few steps ("x" * (1 << i) in a loop doubles the heap at each of
// its 12 steps), a thread that does not starts one every 100,000 steps
// or more (a kernel's make) and polls often for 16 steps after it. One
// step may allocate a gigabyte, so no cadence of steps bounds what a
// thread holds between two polls; 64 lets a loop of 12 steps double five
// times, and costs under 1 % of the interpreter's time (16 costs 9 %).
const (
	coldPollSteps = 64
	hotPollSteps  = 16
	noPoll        = math.MaxUint64 // nextPoll of a thread without a memory watch
)

// scheduleKey is the thread-local key of a thread's step schedule.
const scheduleKey = "kernbench/script.steps"

// stepSchedule is a thread's step budget and memory polls.
type stepSchedule struct {
	budget   uint64                  // the step limit (0: none)
	poll     func(seen *uint64) bool // the memory watch's poll (nil: none)
	seen     uint64                  // the poll's note of what it last saw
	nextPoll uint64                  // the step of the next poll (noPoll: none)
	// The step limit's grace (Loader.overBudget): the steps allowed past
	// the budget, the position where the limit was first reached, and
	// whether the thread moved since.
	grace int
	first syntax.Position
	moved bool
	// The source ranges of the loops of the function the limit was
	// reached in: the grace steps go on until the thread is in one.
	loops [][2]syntax.Position
}

// inLoop reports whether pos lies in one of s.loops (true when the
// function has none, or its source could not be read).
func (s *stepSchedule) inLoop(pos syntax.Position) bool {
	if len(s.loops) == 0 {
		return true
	}
	before := func(a, b syntax.Position) bool {
		return a.Line < b.Line || a.Line == b.Line && a.Col <= b.Col
	}
	for _, sp := range s.loops {
		if before(sp[0], pos) && before(pos, sp[1]) {
			return true
		}
	}
	return false
}

// arm makes go.starlark.net call the hook at the schedule's next turn.
func (s *stepSchedule) arm(th *starlark.Thread) {
	next := s.nextPoll
	if s.budget > 0 {
		next = min(next, s.budget)
	}
	th.SetMaxExecutionSteps(next)
}

// SetStepLimit gives th a budget of n steps in all (a spawned thread gets
// what its spawner has left), keeping its memory polls.
func SetStepLimit(th *starlark.Thread, n uint64) {
	if s, ok := th.Local(scheduleKey).(*stepSchedule); ok {
		s.budget = n
		s.arm(th)
		return
	}
	th.SetMaxExecutionSteps(n)
}
