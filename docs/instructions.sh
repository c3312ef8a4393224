#!/usr/bin/env bash
# Instructions executed by kernbench binaries on one job, counted by
# valgrind (cachegrind), for before/after comparisons that a busy machine
# cannot blur: unlike wall time, the count barely moves from run to run
# (GOGC=off keeps the collector's timing out of it; GOMAXPROCS=1;
# GODEBUG=disablethp=1 keeps out the timing-only run's huge-page scan, a
# background goroutine whose work depends on wall time: with it the count
# moved by 2-3 M between runs of one binary, without it by about 0.5 M;
# cpu.rdtscp=off keeps the runtime's clock reads off RDTSCP, which
# valgrind 3.19 cannot decode: a contended runtime lock reads the clock,
# and on a busy machine the run died of SIGILL part-way, printing the
# count of the part it ran).
#
#   docs/instructions.sh OLD_BINARY NEW_BINARY ...
#   JOB="run ring_allreduce --world-size 32 --bytes 1024K --timing-only" docs/instructions.sh BIN...
#   LL=1048576,16,64 docs/instructions.sh BIN...   # also simulate a 1 MiB last-level cache
#
# The default job is the 64-rank timing-only ring of docs/performance.md.
# It needs valgrind (Debian: apt-get install valgrind); a run takes about
# 25 times the job's own time without LL (the default job: about 2.5 s),
# about twice as long with it.
set -euo pipefail
if ! command -v valgrind >/dev/null; then
	echo "docs/instructions.sh: valgrind is not installed" >&2
	exit 1
fi
if [ $# -eq 0 ]; then
	echo "usage: docs/instructions.sh BINARY..." >&2
	exit 2
fi
job=${JOB:-run ring_allreduce --world-size 64 --set system.sips=2 --bytes 2048K --timing-only}
cache=(--cache-sim=no)
if [ -n "${LL:-}" ]; then
	cache=(--cache-sim=yes "--LL=$LL")
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for bin in "$@"; do
	bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
	(cd "$dir" && GOGC=off GOMAXPROCS=1 GODEBUG=disablethp=1,cpu.rdtscp=off valgrind --tool=cachegrind "${cache[@]}" \
		--cachegrind-out-file=/dev/null "$bin" $job 2>&1 >/dev/null) |
		awk -v b="$bin" '/I *refs|D1 *misses|LLd misses/ {sub(/^==[0-9]+== */, ""); print b ": " $0}'
done
