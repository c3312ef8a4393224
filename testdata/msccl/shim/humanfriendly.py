# Stand-in for humanfriendly: msccl's plan registry parses size strings such
# as "1MB" when it is imported.
_UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}


def parse_size(text, binary=False):
    t = text.strip().upper()
    for unit in sorted(_UNITS, key=len, reverse=True):
        if t.endswith(unit):
            return int(float(t[: -len(unit)]) * _UNITS[unit])
    return int(t)
