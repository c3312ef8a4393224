// Command kernbench writes, runs and verifies collective-communication
// algorithms on a simulated accelerator. See README.md and docs/.
package main

import (
	"os"

	"early.kernbench/quietstart"
)

func main() {
	quietstart.Restore()
	os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
}
