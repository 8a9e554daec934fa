#!/usr/bin/env python3
"""bench_resident.py - decode throughput of packed tensors held in GPU
memory (wcodec_cuda_resident_*, the path of models with packed weights and
of lossy tensors on the GPU): every tensor of a .wcodec file decoded into
one device buffer, back to back, timed with CUDA events
(docs/BENCHMARKS.md, "Packed tensors decoded in GPU memory").

  bench_resident.py FILE.wcodec [--reps 20] [--min-bytes 65536] [--by-block]

Prints the decoded bytes, the time of one decode of all of them and the
output rate (GB/s of decoded bytes), and checks the bytes against the CPU
decoder once. --by-block: also one set per transformer block (tensors named
PREFIX.layers.N.*; as wcodec.torch.load_packed decodes a model's weights),
each decoded alone: the rate of one block's decode (a block's rANS chunks
against the GPU's concurrent warps).
"""
import argparse
import re
import sys

import numpy as np
import torch

import wcodec
from wcodec import _lib
from wcodec._file import load_host
from wcodec.packed_cuda import _Resident


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--min-bytes", type=int, default=1 << 16)
    ap.add_argument("--by-block", action="store_true")
    a = ap.parse_args()
    P = _lib.cuda()
    if P is None:
        sys.exit(_lib.cuda_error())
    tf = wcodec.TensorFile(a.file)
    names = [n for n in tf.tensors if tf.info(n).nbytes >= a.min_bytes]
    r = _Resident(P, tf, names, torch.cuda.current_device(), verify=True)
    buf = torch.empty(r.out_bytes, dtype=torch.uint8, device="cuda")
    ms = timed_decode(r, buf, a.reps)
    out = sum(tf.info(n).nbytes for n in names)
    host = buf.cpu().numpy()
    want = np.empty(r.out_bytes, dtype=np.uint8)
    load_host([tf], [(0, tf.info(n).begin, tf.info(n).nbytes, want.ctypes.data + r.offsets[k])
                     for k, n in enumerate(names)])
    for k, n in enumerate(names):
        o, nb = r.offsets[k], tf.info(n).nbytes
        if not np.array_equal(host[o:o + nb], want[o:o + nb]):
            sys.exit(f"{n}: GPU bytes differ from the CPU decoder's")
    print(f"{a.file}: {len(names)} tensors, {out / 1e9:.3f} GB decoded (equal to the CPU decoder's), tiles "
          f"{r.device_bytes() / 1e9:.3f} GB on the device; one decode {ms:.2f} ms = {out / ms / 1e6:.0f} GB/s "
          f"of output ({torch.cuda.get_device_name()})")
    r.close()
    if a.by_block:
        by_block(P, tf, names, a.reps)
    tf.close()


def timed_decode(r, buf, reps):
    """Milliseconds of one decode of resident set r into buf: a warm-up,
    then the mean of reps back to back (CUDA events); the stream checks
    read after."""
    s = torch.cuda.current_stream()
    r.decode(buf.data_ptr(), s.cuda_stream)
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(reps):
        r.decode(buf.data_ptr(), s.cuda_stream)
    e1.record()
    torch.cuda.synchronize()
    r.check()
    return e0.elapsed_time(e1) / reps


def by_block(P, tf, names, reps):
    blocks = {}
    for n in names:
        m = re.match(r"(.*\.layers\.\d+)\.", n)
        if m:
            blocks.setdefault(m.group(1), []).append(n)
    if not blocks:
        print("no tensors named *.layers.N.*")
        return
    times, nbytes = [], 0
    for group in blocks.values():
        r = _Resident(P, tf, group, torch.cuda.current_device(), verify=False)
        times.append(timed_decode(r, torch.empty(r.out_bytes, dtype=torch.uint8, device="cuda"), reps))
        nbytes = sum(tf.info(n).nbytes for n in group)
        r.close()
    ms = sorted(times)[len(times) // 2]
    print(f"{len(blocks)} blocks of {len(blocks[next(iter(blocks))])} tensors, {nbytes / 1e6:.1f} MB each: one "
          f"block's decode {ms:.3f} ms (median) = {nbytes / ms / 1e6:.0f} GB/s")


if __name__ == "__main__":
    sys.exit(main())
