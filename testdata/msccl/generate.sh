#!/bin/sh
# Regenerates the MSCCL XML files of this directory from msccl-tools'
# MSCCLang examples (github.com/microsoft/msccl-tools, commit 030a750),
# binomial_tree.py and reduce_scatter_ring.py. Usage, from this directory:
#
#   sh generate.sh /path/to/msccl-tools
#
# The shim/ folder stands in for lxml, z3, tabulate, argcomplete and
# humanfriendly, which msccl-tools imports but XML generation does not need
# (PyPI is not reachable where these files were made); python3 3.11.
set -eu
tools=$(cd "$1" && pwd)
here=$(pwd)
ex="$tools/examples/mscclang"
export PYTHONPATH="$here/shim:$tools"
# Not every file is byte-stable: for some schedules (allreduce_rdh_16,
# alltoall_two_step_8 and _16 here) msccl-tools orders steps differently
# from run to run, even with PYTHONHASHSEED fixed. The committed files are
# one run; another run gives an equivalent schedule in another order.
gen() { # gen OUT SCRIPT ARGS...
	out=$1; shift
	python3 "$@" > "$out.tmp"
	# Check() prints its verdict after the XML; keep the XML only.
	sed -n '/^<algo/,/^<\/algo>/p' "$out.tmp" > "$out"
	rm "$out.tmp"
}
for n in 4 8 16; do
	gen allreduce_ring_ch1_$n.xml "$ex/allreduce_a100_ring.py" $n 1 1
	gen allreduce_ring_ch2_$n.xml "$ex/allreduce_a100_ring.py" $n 2 1
	gen allreduce_binomial_tree1_$n.xml binomial_tree.py $n 1
	gen allreduce_binomial_tree2_$n.xml binomial_tree.py $n 2
	gen allreduce_rdh_$n.xml "$ex/allreduce_recursive_doubling_halving.py" $n 1
	gen allgather_ring_ch2_$n.xml "$ex/allgather_ring.py" $n 2 1
	gen alltoall_allpairs_$n.xml "$ex/alltoall_allpairs.py" $n 1
	gen reduce_scatter_ring_$n.xml reduce_scatter_ring.py $n
done
# Hierarchical algorithms: GPUS_PER_NODE × NODES.
gen allreduce_hierarchical_4.xml "$ex/hierarchical_allreduce.py" 2 2 1
gen allreduce_hierarchical_8.xml "$ex/hierarchical_allreduce.py" 4 2 1
gen allreduce_hierarchical_16.xml "$ex/hierarchical_allreduce.py" 4 4 1
# 16 GPUs as 8 × 2 (45 connections on a rank, rx rings past TCM), and 4 × 4
# in two instances (thread blocks whose staging is past TCM too).
gen allreduce_hierarchical_8x2_16.xml "$ex/hierarchical_allreduce.py" 8 2 1
gen allreduce_hierarchical_4x4_i2_16.xml "$ex/hierarchical_allreduce.py" 4 4 2
gen alltoall_two_step_4.xml "$ex/alltoall_a100_two_step.py" 2 2
gen alltoall_two_step_8.xml "$ex/alltoall_a100_two_step.py" 2 4
gen alltoall_two_step_16.xml "$ex/alltoall_a100_two_step.py" 4 4
# A real race in msccl-tools' output, kept to test that kernbench reports
# it: interleaved replication (the default) of steps of several chunks in
# the output buffer gives instance 0's send of o[0..2) on gpu 1 a
# dependency on o[0] only, while instance 1's thread block receives o[1].
gen allgather_recursive_doubling_i2_4.xml "$ex/allgather_recursive_doubling.py" 4 2
