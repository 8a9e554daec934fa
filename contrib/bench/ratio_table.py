#!/usr/bin/env python3
"""ratio_table.py - the markdown table of bench-ratio.sh.

Usage: ratio_table.py ROWS.tsv

Each row: path, original bytes, zstd -19 bytes, zstd seconds, .wcodec bytes,
pack seconds, path of `wcodec info --json` output. From the info JSON it
takes, per tensor, the dtype, the byte range (begin/end) and per plane the
order-0 entropy (bits/symbol) and coded bytes, and derives:
  entropy bound = prefix bytes + sum over tensor-planes of entropy * n / 8
                  (n = elements of the tensor; one symbol per element and plane)
  dtype ratio   = tensor bytes of that dtype / coded plane bytes of them
Standard library only.
"""

import json
import os
import sys


def first(d, *keys, default=None):
    for k in keys:
        if isinstance(d, dict) and k in d:
            return d[k]
    return default


def analyse(info):
    """(entropy bound bytes, {dtype: [tensor bytes, coded bytes]}, prefix bytes)."""
    tensors = first(info, "tensors", default=[])
    if isinstance(tensors, dict):  # name -> tensor
        tensors = [dict(v, name=k) for k, v in tensors.items()]
    prefix = first(info, "prefix_bytes", "prefix_len", "prefix", default=None)
    if not isinstance(prefix, int):
        begins = [first(t, "begin", default=None) for t in tensors]
        begins = [b for b in begins if isinstance(b, int)]
        prefix = min(begins) if begins else 0
    bound = float(prefix)
    per = {}
    for t in tensors:
        dt = first(t, "dtype", default="?")
        b, e = first(t, "begin", default=0), first(t, "end", default=0)
        nbytes = e - b
        planes = first(t, "planes", default=[]) or []
        coded = sum(first(p, "coded_bytes", "coded", default=0) or 0 for p in planes)
        coded = first(t, "coded_bytes", default=coded) if not planes else coded
        esize = {"F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4, "F16": 2, "BF16": 2,
                 "I16": 2, "U16": 2}.get(dt, 1)
        n = nbytes // esize if esize else 0
        for p in planes:
            bound += first(p, "entropy_bits", "entropy", default=8.0) * n / 8.0
        a = per.setdefault(dt, [0, 0])
        a[0] += nbytes
        a[1] += coded
    return bound, per, prefix


def fmt_ratio(a, b):
    return "%.3f" % (a / b) if b else "-"


def main():
    rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1]) if line.strip()]
    print("| model file | bytes | zstd -19 | ratio | s | wcodec | ratio | s | entropy bound | bound ratio | ratio per dtype (tensor bytes) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    groups = {}
    for path, size, zs, zt, ws, wt, js in rows:
        size, zs, ws = int(size), int(zs), int(ws)
        zt, wt = float(zt), float(wt)
        info = json.load(open(js))
        bound, per, _ = analyse(info)
        kinds = ", ".join("%s %s (%d)" % (dt, fmt_ratio(a, c), a) for dt, (a, c) in sorted(per.items(), key=lambda kv: -kv[1][0]))
        print("| %s | %d | %d | %.3f | %.2f | %d | %.3f | %.2f | %d | %.3f | %s |" % (
            os.path.basename(path), size, zs, size / zs, zt, ws, size / ws, wt, bound, size / bound, kinds))
        g = "BF16 files" if path.endswith(".bf16.safetensors") else "F32 files (as shipped)"
        t = groups.setdefault(g, {"n": 0, "size": 0, "zs": 0, "zt": 0.0, "ws": 0, "wt": 0.0, "bound": 0.0, "per": {}})
        t["n"] += 1
        t["size"] += size
        t["zs"] += zs
        t["zt"] += zt
        t["ws"] += ws
        t["wt"] += wt
        t["bound"] += bound
        for dt, (a, c) in per.items():
            p = t["per"].setdefault(dt, [0, 0])
            p[0] += a
            p[1] += c
    for g, t in sorted(groups.items()):
        kinds = ", ".join("%s %s (%d)" % (dt, fmt_ratio(a, c), a) for dt, (a, c) in sorted(t["per"].items(), key=lambda kv: -kv[1][0]))
        print("| **all %d %s** | %d | %d | %.3f | %.2f | %d | %.3f | %.2f | %d | %.3f | %s |" % (
            t["n"], g, t["size"], t["zs"], t["size"] / t["zs"], t["zt"], t["ws"], t["size"] / t["ws"], t["wt"],
            t["bound"], t["size"] / t["bound"], kinds))


if __name__ == "__main__":
    main()
