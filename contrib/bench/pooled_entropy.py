#!/usr/bin/env python3
"""pooled_entropy.py - the conventional order-0 bound of a safetensors file.

For every dtype, split its tensors into the byte planes of docs/FORMAT.md
section 2 (BF16: exponent, sign+mantissa; F32: exponent + 3; F16/I16/U16:
2 bytes; others: bytes), pool each plane over the WHOLE data section, and sum
n * H(plane) / 8 bytes (Shannon, order 0). This is "the order-0 entropy of
the byte planes" that ZipNN/DFloat11-style results are compared with.
`wcodec info` reports a stricter bound: the same entropy per tensor-plane
(each tensor gets its own distribution, as wcodec's per-tensor frequency
tables do). Needs numpy.

Usage: pooled_entropy.py FILE.safetensors [FILE.wcodec]
Prints the bound; with the .wcodec, also its coded data bytes over the bound.
"""
import json
import struct
import subprocess
import sys

import numpy as np


def planes(a, dtype):
    if dtype == "BF16":
        u = a.view("<u2")
        return [((u >> 7) & 0xFF), (((u >> 8) & 0x80) | (u & 0x7F))]
    if dtype == "F32":
        u = a.view("<u4")
        r = (u & 0x7FFFFF) | ((u >> 31) << 23)
        return [(u >> 23) & 0xFF, r & 0xFF, (r >> 8) & 0xFF, r >> 16]
    if dtype in ("F16", "I16", "U16"):
        u = a.view("<u2")
        return [u >> 8, u & 0xFF]
    return [a]


def bound(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = np.frombuffer(f.read(), np.uint8)
    hist = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        s, e = t["data_offsets"]
        a = data[s:e]
        for i, p in enumerate(planes(a, t["dtype"])):
            h = hist.setdefault((t["dtype"], i), np.zeros(256, np.int64))
            h += np.bincount(p.astype(np.uint8), minlength=256)
    total = 0.0
    for h in hist.values():
        c = h[h > 0].astype(np.float64)
        total += float(-(c * np.log2(c / c.sum())).sum()) / 8
    return total


def main():
    b = bound(sys.argv[1])
    line = "%s: pooled byte-plane order-0 bound %.0f bytes" % (sys.argv[1], b)
    if len(sys.argv) > 2:
        wcodec = __import__("os").environ.get("WCODEC", "wcodec")
        info = json.loads(subprocess.check_output([wcodec, "info", "--json", sys.argv[2]]))
        coded = info.get("coded_data_bytes")
        if coded is not None:
            line += "; wcodec coded data %d bytes = %.2f%% of it" % (coded, 100.0 * coded / b)
    print(line)


if __name__ == "__main__":
    main()
