package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

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

// removeTempsOnInterrupt makes SIGINT, SIGTERM and SIGHUP remove the
// temporary output files and end the process with 128 + the signal's
// number, as the shell reports a process the signal ended: what was
// printed so far (the rows of the sizes done) stays. The returned
// function ends the handling.
func removeTempsOnInterrupt(stderr io.Writer) func() {
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
			fmt.Fprintf(stderr, "kernbench: stopped by %v%s\n", sig, unwritten)
			os.Exit(code)
		case <-done:
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}

// keepOnBrokenPipe makes a write to a stdout or stderr whose reader has
// gone (`| head`) fail instead of ending the process, until the returned
// function is called: a run that writes output files finishes them
// first.
func keepOnBrokenPipe() func() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGPIPE)
	return func() { signal.Stop(ch) }
}
