#!/usr/bin/env bash
# Reproducible speed measurements for kernbench (not part of CI).
#
#   docs/benchmarks.sh            # all benchmarks, 5 repetitions each
#   COUNT=10 docs/benchmarks.sh   # more repetitions
#
# Prints go test -bench output; feed two runs to benchstat
# (go run golang.org/x/perf/cmd/benchstat@latest old.txt new.txt) to compare.
# Figures are wall-clock on whatever machine runs this: use an idle machine,
# and GOMAXPROCS=1 for the "one core" figures of docs/performance.md.
set -euo pipefail
cd "$(dirname "$0")/.."
count=${COUNT:-5}
export GOMAXPROCS=${GOMAXPROCS:-1}
go test ./engine/sim -run '^$' -bench 'EventLoop|ProcSwitch' -benchmem -count "$count"
go test ./engine/machine -run '^$' -bench 'IPCQRing64' -benchmem -count "$count"
go test ./starlark/ccl -run '^$' -bench 'RingAllreduce64|RingTimingOnly/N=64|RingVerified64' -benchmem -count "$count" -benchtime 3x
