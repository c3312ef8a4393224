// Package cputime reads the CPU time this process has used, for tests that
// bound how much work something may take. Wall time is no such bound: on a
// machine shared with other work a run that takes 0.04 s alone takes tens
// of seconds, while the CPU time it uses stays the same. Only tests import
// this package.
package cputime

import "time"

// pollEvery is how often Await reads the CPU clock. It only decides how
// soon a passed limit is noticed, never whether it is.
const pollEvery = 20 * time.Millisecond

// Process is the CPU time (user and system, all threads) this process has
// used; ok is false where it is not measured.
func Process() (d time.Duration, ok bool) { return process() }

// Await waits for a value on ch, or until the process has used more than
// limit of CPU time since Await was called, whichever comes first; ok is
// false when the limit passed (a hang that spins). The process's time
// counts every goroutine, so the limit is for all the work going on, not
// only the one that sends on ch. Where the CPU clock is not measured Await
// waits for ch alone: a hang is then left to go test's -timeout, as is one
// that blocks without using CPU anywhere.
func Await[T any](ch <-chan T, limit time.Duration) (v T, ok bool) {
	start, measured := Process()
	if !measured {
		return <-ch, true
	}
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		select {
		case v := <-ch:
			return v, true
		case <-tick.C:
			if now, _ := Process(); now-start > limit {
				// A value that came meanwhile still counts.
				select {
				case v := <-ch:
					return v, true
				default:
				}
				return v, false
			}
		}
	}
}
