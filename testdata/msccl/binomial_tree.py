# Binomial-tree allreduce in MSCCLang, for kernbench's MSCCL import tests.
#
# msccl-tools ships this algorithm as examples/mscclang/allreduce_binomial_tree.py,
# but that example no longer runs against the library's current chunk()
# signature (the index became mandatory), so this is our own version of it:
# reduce up a binomial tree onto rank 0, then broadcast back down; with two
# trees, the second half of the buffer uses the mirror tree rooted at the
# last rank.
#
#   python3 binomial_tree.py NUM_GPUS TREES  > file.xml
import argparse

from msccl.language import *  # noqa: F401,F403
from msccl.language.collectives import AllReduce
from msccl.topologies import fully_connected


def tree(size, index, mirrored):
    # Ranks are renumbered so that the mirrored tree is the plain one seen
    # from the other end of the rank range.
    def real(r):
        return size - 1 - r if mirrored else r

    distance = 1
    while distance < size:
        for rank in range(0, size, 2 * distance):
            peer = rank + distance
            if peer < size:
                chunk(real(rank), Buffer.input, index).reduce(chunk(real(peer), Buffer.input, index))
        distance *= 2
    distance //= 2
    while distance >= 1:
        for rank in range(0, size, 2 * distance):
            peer = rank + distance
            if peer < size:
                chunk(real(rank), Buffer.input, index).copy(real(peer), Buffer.input, index)
        distance //= 2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("num_gpus", type=int)
    ap.add_argument("trees", type=int, choices=[1, 2])
    ap.add_argument("--protocol", default="Simple", choices=["Simple", "LL", "LL128"])
    a = ap.parse_args()
    coll = AllReduce(a.num_gpus, a.trees, True)
    with MSCCLProgram(f"allreduce_binomial_tree_{a.trees}", fully_connected(a.num_gpus), coll, 1, protocol=a.protocol):
        for t in range(a.trees):
            tree(a.num_gpus, t, mirrored=(t == 1))
        XML()
        Check()


main()
