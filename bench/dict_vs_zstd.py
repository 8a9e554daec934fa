#!/usr/bin/env python3
"""dict_vs_zstd.py - wcodec against zstd -19 on real model files, and what the
dictionary layout (docs/FORMAT.md 2.1) changes.

For each safetensors FILE: its size, `zstd -19 -T2` of it (cached in
--cache, it is slow), the .wcodec packed by the wcodec under test (in
--work), optionally the one packed by an older build (--before DIR holding
NAME.wcodec), how close the coded data comes to the order-0 entropy bound of
the planes coded (all tensors, and tensors of at least 64 KiB), and the
single-thread decode rate (`wcodec cat -b cpu -j 1`, CPU time) with --speed.
Prints a Markdown table. Standard library only.

Usage: dict_vs_zstd.py --wcodec PATH --work DIR --cache DIR [--before DIR] [--speed] FILE...
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time


def zstd_size(path, cache):
    key = os.path.join(cache, "%s.%d" % (os.path.basename(path), os.path.getsize(path)))
    if os.path.exists(key):
        return int(open(key).read().split()[0])
    p = subprocess.run(["zstd", "-19", "-T2", "-c", path], stdout=subprocess.PIPE, check=True)
    open(key, "w").write("%d\n" % len(p.stdout))
    return len(p.stdout)


def cpu_rate(wcodec, wc, nbytes):
    """MB/s of decoded output per CPU second, best of two runs."""
    best = None
    for _ in range(2):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([wcodec, "cat", "-b", "cpu", "-j", "1", wc], stdout=subprocess.DEVNULL, check=True)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
        best = cpu if best is None else min(best, cpu)
    return nbytes / best / 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--wcodec", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--cache", required=True)
    ap.add_argument("--before")
    ap.add_argument("--speed", action="store_true")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    os.makedirs(a.cache, exist_ok=True)
    print("| file | bytes | zstd -19 | wcodec before | wcodec | wcodec / zstd | dict tensors "
          "| coded / bound | same, tensors >= 64 KiB | coded / byte-plane bound | decode MB/s before | decode MB/s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for f in a.files:
        name = os.path.basename(f)
        if name.endswith(".safetensors"):
            name = name[: -len(".safetensors")]
        wc = os.path.join(a.work, name + ".wcodec")
        if not os.path.exists(wc) or os.path.getmtime(wc) < os.path.getmtime(a.wcodec):
            subprocess.run([a.wcodec, "pack", "-q", "-f", f, wc], check=True)
        size = os.path.getsize(f)
        z = zstd_size(f, a.cache)
        info = json.loads(subprocess.run([a.wcodec, "info", "-J", wc], stdout=subprocess.PIPE, check=True).stdout)
        big = [t for t in info["tensors"] if t["bytes"] >= 65536]
        big_ratio = (sum(t["coded_bytes"] for t in big) / sum(t["entropy_bound_bytes"] for t in big)) if big else 0
        ndict = sum(1 for t in info["tensors"] if t["layout"] == "dict")
        before = os.path.join(a.before, name + ".wcodec") if a.before else None
        bsize = os.path.getsize(before) if before and os.path.exists(before) else 0
        rb = cpu_rate(a.wcodec, before, size) if a.speed and bsize else 0
        rn = cpu_rate(a.wcodec, wc, size) if a.speed else 0
        print("| %s | %d | %d | %s | %d | %.3f | %d / %d | %.4f | %s | %.3f | %s | %s |" % (
            name, size, z, bsize or "", os.path.getsize(wc), os.path.getsize(wc) / z, ndict, info["ntensors"],
            info["coded_over_bound"], "%.4f" % big_ratio if big else "-", info["coded_over_plain_bound"],
            "%.0f" % rb if rb else "", "%.0f" % rn if rn else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
