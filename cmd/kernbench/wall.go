package main

import "time"

// wallNow is the clock a run's wall time is read from (--json's wall_s,
// the footer's "wall"): the one place the command reads the wall clock
// for a report, so that its tests can give it a clock of their own and
// read none (TestMain).
var wallNow = time.Now

// wallSeconds runs run and returns the wall time it took, in seconds.
func wallSeconds(run func()) float64 {
	start := wallNow()
	run()
	return wallNow().Sub(start).Seconds()
}
