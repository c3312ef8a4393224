# Ring reduce-scatter in MSCCLang, for kernbench's MSCCL import tests
# (msccl-tools ships no reduce_scatter example). In place: chunk c of every
# rank's input ends, summed over ranks, in chunk c of rank c's input.
# Chunk c travels the ring from rank c + 1, each rank adding its own.
#
#   python3 reduce_scatter_ring.py NUM_GPUS > file.xml
import argparse

from msccl.language import *  # noqa: F401,F403
from msccl.language.collectives import ReduceScatter
from msccl.topologies import fully_connected


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("num_gpus", type=int)
    ap.add_argument("--protocol", default="Simple", choices=["Simple", "LL", "LL128"])
    a = ap.parse_args()
    n = a.num_gpus
    coll = ReduceScatter(n, 1, True)
    with MSCCLProgram("reduce_scatter_ring", fully_connected(n), coll, 1, protocol=a.protocol):
        for c in range(n):
            for step in range(1, n):
                src, dst = (c + step) % n, (c + step + 1) % n
                chunk(dst, Buffer.input, c).reduce(chunk(src, Buffer.input, c))
        XML()
        Check()


main()
