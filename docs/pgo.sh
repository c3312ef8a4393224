#!/usr/bin/env bash
# Regenerates cmd/kernbench/default.pgo, the CPU profile `go build` uses
# for profile-guided optimisation of the kernbench binary (go build picks
# default.pgo in the main package's folder; -pgo=off builds without it).
#
#   docs/pgo.sh          # profile the jobs below, merge, write default.pgo
#
# The jobs are the shapes users run: timing-only rings at 64 and 256
# ranks, verified rings, the piece-by-piece ring (Starlark-heavy), a tree,
# the mesh, alltoall and an MSCCL schedule. Regenerate after a change that
# moves the hot path, then compare the builds with docs/instructions.sh
# (docs/performance.md, "Profile-guided optimisation").
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
go build -pgo=off -o "$dir/kernbench" ./cmd/kernbench
i=0
while read -r job; do
	[ -z "$job" ] && continue
	i=$((i + 1))
	# shellcheck disable=SC2086
	"$dir/kernbench" $job --cpuprofile "$dir/$i.prof" -q >/dev/null
done <<'JOBS'
run ring_allreduce --world-size 64 --set system.sips=2 --bytes 16M --timing-only
run ring_allreduce --world-size 256 --set system.sips=8 --bytes 4M --timing-only
run ring_allreduce --world-size 16 --bytes 16M
run ring_allreduce --world-size 64 --set system.sips=2 --bytes 1M
run ring_allreduce_manual --world-size 32 --bytes 4M
run tree_allreduce --world-size 1024 --set system.sips=32 --bytes 256K --timing-only
run mesh_allreduce --world-size 16 --bytes 4M
run alltoall --world-size 32 --bytes 2M
run testdata/msccl/allreduce_binomial_tree2_16.xml --world-size 16 --bytes 4M
JOBS
go tool pprof -proto "$dir"/*.prof > cmd/kernbench/default.pgo
echo "wrote cmd/kernbench/default.pgo from $i profiles"
