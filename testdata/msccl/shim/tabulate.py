# Stand-in for tabulate: only msccl's plan listing (never used here) calls it.
def tabulate(*args, **kwargs):
    raise NotImplementedError("tabulate is a stand-in (testdata/msccl/shim)")
