# Stand-in for argcomplete (shell completion of msccl's own CLI, unused).
def autocomplete(*args, **kwargs):
    pass
