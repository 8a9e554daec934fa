#!/usr/bin/env python3
"""lossy_study.py - what int8 and int4 codes of real weights cost after
entropy coding, and what prediction and a transform would save
(docs/BENCHMARKS.md, "Lossy codes of real weights"). Needs numpy.

  lossy_study.py FILE.safetensors... [--min-elems 4096]

Every tensor of two or more dimensions with at least --min-elems elements
is read as a matrix [output channels, rest], the output channels being its
first axis (PyTorch, ONNX) or its last (TensorFlow), whichever gives the
smaller int8 error, and quantized:
  int8: symmetric codes in [-127, 127], one scale per output channel (row);
  int4: codes in [-7, 7], one scale per row and group of 128 columns;
each scale chosen to minimise the squared error (the clipping level
searched over 0.50-1.00 of the row's or group's largest magnitude), not
only absmax. Bits per weight are the order-0 entropy of the tensor's codes
(what the rANS coder reaches within 1%) plus 16 bits per scale. Predictors
code the residual of each code against its left, top, average of both, or
planar (left + top - top-left) neighbour; "dct" quantizes the orthonormal
8x8 DCT-II coefficients of the weights with one step per tensor set to give
the int8 codes' squared error. Prints one row per file and the totals.
"""
import argparse
import json
import struct
import sys

import numpy as np

DT = {"F32": np.float32, "F16": np.float16, "BF16": None, "F64": np.float64}


def tensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
        base = 8 + n
        for name, t in hdr.items():
            if name == "__metadata__" or t["dtype"] not in DT:
                continue
            a, b = t["data_offsets"]
            f.seek(base + a)
            raw = f.read(b - a)
            if t["dtype"] == "BF16":
                x = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
            else:
                x = np.frombuffer(raw, DT[t["dtype"]]).astype(np.float32)
            yield name, t["dtype"], x.reshape(t["shape"]) if t["shape"] else x


def entropy(codes):
    _, c = np.unique(codes, return_counts=True)
    p = c / c.sum()
    return float(-(p * np.log2(p)).sum())


def quantize(w, qmax, group):
    """Codes and dequantized weights of w [rows, cols], one MSE-optimal scale
    per row (group 0) or per row and group of `group` columns."""
    rows, cols = w.shape
    g = cols if group == 0 else group
    pad = (-cols) % g
    wp = np.pad(w, ((0, 0), (0, pad))).reshape(rows, -1, g)
    amax = np.abs(wp).max(axis=2, keepdims=True)
    amax[amax == 0] = 1
    best_err = np.full(amax.shape, np.inf, np.float32)
    best_s = amax / qmax
    for r in np.linspace(0.5, 1.0, 26):
        s = amax * r / qmax
        q = np.clip(np.rint(wp / s), -qmax, qmax)
        err = ((q * s - wp) ** 2).sum(axis=2, keepdims=True)
        better = err < best_err
        best_err = np.where(better, err, best_err)
        best_s = np.where(better, s, best_s)
    q = np.clip(np.rint(wp / best_s), -qmax, qmax)
    deq = (q * best_s).reshape(rows, -1)[:, :cols]
    return q.reshape(rows, -1)[:, :cols].astype(np.int16), deq, best_s.size


def predicted(q):
    """Residuals of the codes q [rows, cols] against each predictor."""
    left = np.zeros_like(q)
    left[:, 1:] = q[:, :-1]
    top = np.zeros_like(q)
    top[1:, :] = q[:-1, :]
    tl = np.zeros_like(q)
    tl[1:, 1:] = q[:-1, :-1]
    return {"left": q - left, "top": q - top, "average": q - (left + top) // 2, "planar": q - (left + top - tl)}


def dct_bits(w, mse):
    """Bits per weight of 8x8 DCT-II coefficients of w quantized with one
    step giving squared error mse per weight (orthonormal: the same in both
    domains)."""
    rows, cols = w.shape
    r8, c8 = rows - rows % 8, cols - cols % 8
    if r8 == 0 or c8 == 0:
        return None
    k = np.arange(8)
    D = np.sqrt(2 / 8) * np.cos(np.pi * (2 * k[None, :] + 1) * k[:, None] / 16)
    D[0] /= np.sqrt(2)
    blocks = w[:r8, :c8].reshape(r8 // 8, 8, c8 // 8, 8).transpose(0, 2, 1, 3)
    coef = D @ blocks @ D.T
    lo, hi = 1e-9, float(np.abs(coef).max()) * 2 + 1e-9
    for _ in range(30):  # the step whose error matches
        step = (lo + hi) / 2
        e = float(((np.rint(coef / step) * step - coef) ** 2).mean())
        lo, hi = (step, hi) if e < mse else (lo, step)
    return entropy(np.rint(coef / lo).astype(np.int64)) + 32 / w.size


def study(path, min_elems):
    acc = dict(n=0, orig_bits=0, i8=0, i8best=0, dct=0, i4=0, sig=0, e8=0, e4=0)
    pred_tot = {}
    for name, dtype, x in tensors(path):
        if x.ndim < 2 or x.size < min_elems:
            continue
        # the output channels: the first axis (PyTorch, ONNX) or the last
        # (TensorFlow): whichever gives the smaller int8 error
        best = None
        for w in (x.reshape(x.shape[0], -1), x.reshape(-1, x.shape[-1]).T):
            w = np.ascontiguousarray(w, dtype=np.float32)
            q8, d8, ns8 = quantize(w, 127, 0)
            err = float(((d8 - w) ** 2).sum())
            if best is None or err < best[0]:
                best = (err, w, q8, d8, ns8)
        _, w, q8, d8, ns8 = best
        q4, d4, ns4 = quantize(w, 7, 128)
        n = w.size
        b8 = entropy(q8) + 16 * ns8 / n
        res = {k: entropy(v) + 16 * ns8 / n for k, v in predicted(q8).items()}
        mse8 = float(((d8 - w) ** 2).mean())
        bd = dct_bits(w, mse8) if mse8 > 0 else None
        acc["n"] += n
        acc["orig_bits"] += n * (32 if dtype == "F32" else 16)
        acc["i8"] += b8 * n
        acc["i8best"] += min([b8] + list(res.values())) * n
        acc["dct"] += (bd if bd is not None else b8) * n
        acc["i4"] += (entropy(q4) + 16 * ns4 / n) * n
        acc["sig"] += float((w.astype(np.float64) ** 2).sum())
        acc["e8"] += float(((d8 - w).astype(np.float64) ** 2).sum())
        acc["e4"] += float(((d4 - w).astype(np.float64) ** 2).sum())
        for k, v in res.items():
            pred_tot[k] = pred_tot.get(k, 0) + v * n
    return acc, pred_tot


def main():
    p = argparse.ArgumentParser()
    p.add_argument("files", nargs="+")
    p.add_argument("--min-elems", type=int, default=4096)
    a = p.parse_args()
    print("| file | weights quantized | int8 bits/weight | best predictor | 8x8 DCT, same error | int4 g128 | "
          "int8 SNR | int4 SNR |\n|---|---:|---:|---:|---:|---:|---:|---:|")
    tot, ptot = None, {}
    for f in a.files:
        acc, pt = study(f, a.min_elems)
        if not acc["n"]:
            continue
        n = acc["n"]
        best = min(pt, key=pt.get)
        print(f"| {f.split('/')[-1]} | {n:,} | {acc['i8'] / n:.2f} | {best} {pt[best] / n:.2f} | "
              f"{acc['dct'] / n:.2f} | {acc['i4'] / n:.2f} | {10 * np.log10(acc['sig'] / acc['e8']):.1f} dB | "
              f"{10 * np.log10(acc['sig'] / acc['e4']):.1f} dB |", flush=True)
        tot = {k: (tot or {}).get(k, 0) + v for k, v in acc.items()}
        for k, v in pt.items():
            ptot[k] = ptot.get(k, 0) + v
    if tot:
        n = tot["n"]
        print(f"\ntotal: {n:,} weights; int8 {tot['i8'] / n:.2f} bits/weight "
              f"({16 / (tot['i8'] / n):.2f}x against BF16, {32 / (tot['i8'] / n):.2f}x against F32); "
              f"predictors: " + ", ".join(f"{k} {v / n:.2f}" for k, v in sorted(ptot.items())) +
              f"; DCT {tot['dct'] / n:.2f}; int4 g128 {tot['i4'] / n:.2f} ({16 / (tot['i4'] / n):.2f}x BF16)")


if __name__ == "__main__":
    sys.exit(main())
