# Stand-in for the z3 solver: msccl-tools imports it for synthesis, which
# generating XML from the MSCCLang examples never calls.
