#!/usr/bin/env python3
"""bench_load.py - loading a checkpoint from Python onto the GPU and the CPU:
wcodec.torch.load_checkpoint of the packed checkpoint against
safetensors.torch.load_file of the original shards and against the
pinned-pread ceiling (bench/pread_ceiling.cu) of both, files in the page
cache and cold (drop_caches), in one run (docs/BENCHMARKS.md, "Loading
from Python"). Needs torch with CUDA, safetensors, root for drop_caches.

  bench_load.py gen DIR [--layers 32]
      A LLaMA-7B-shaped BF16 checkpoint in 2 shards plus an index: hidden
      4096, MLP 11008, vocab 32000, weights N(0, s) with s drawn from
      [0.01, 0.04] per tensor, norms near 1 (13.48 GB with 32 layers).
  bench_load.py run ORIG PACKED --ceiling BIN [--reps 3] [--cold-reps 2]
      Every timed load, median of the reps; every tensor of the wcodec loads
      compared bit for bit with safetensors' load of the original.
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import time

import torch


def gen(out, layers, hidden=4096, inter=11008, vocab=32000):
    """A LLaMA-shaped BF16 checkpoint in two shards and an index (weights
    N(0, s), s drawn in 0.01-0.04 per tensor; norms near 1)."""
    from safetensors.torch import save_file
    os.makedirs(out, exist_ok=True)
    g = torch.Generator(device="cuda").manual_seed(1)
    scales = torch.Generator().manual_seed(2)

    def w(*shape):
        s = 0.01 + 0.03 * torch.rand(1, generator=scales).item()
        return (torch.randn(*shape, generator=g, device="cuda") * s).to(torch.bfloat16).cpu()

    def norm(n):
        return (1.0 + 0.05 * torch.randn(n, generator=g, device="cuda")).to(torch.bfloat16).cpu()

    names = ["model.embed_tokens.weight"]
    for i in range(layers):
        p = f"model.layers.{i}."
        names += [p + f"self_attn.{n}_proj.weight" for n in "qkvo"]
        names += [p + f"mlp.{n}_proj.weight" for n in ("gate", "up", "down")]
        names += [p + "input_layernorm.weight", p + "post_attention_layernorm.weight"]
    names += ["model.norm.weight", "lm_head.weight"]

    def make(name):
        if name.endswith("layernorm.weight") or name == "model.norm.weight":
            return norm(hidden)
        if "embed_tokens" in name or "lm_head" in name:
            return w(vocab, hidden)
        if "gate_proj" in name or "up_proj" in name:
            return w(inter, hidden)
        if "down_proj" in name:
            return w(hidden, inter)
        return w(hidden, hidden)

    half = len(names) // 2
    weight_map = {}
    for k, part in enumerate((names[:half], names[half:])):
        shard = f"model-0000{k + 1}-of-00002.safetensors"
        save_file({n: make(n) for n in part}, os.path.join(out, shard), metadata={"format": "pt"})
        weight_map.update({n: shard for n in part})
    total = sum(os.path.getsize(p) for p in glob.glob(os.path.join(out, "*.safetensors")))
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as fh:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, fh)
    print(f"{out}: {len(names)} tensors, {total / 1e9:.2f} GB")


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as fh:
        fh.write("3\n")


def warm(paths):
    for p in paths:
        with open(p, "rb") as fh:
            while fh.read(64 << 20):
                pass


def timed(fn, cold, paths):
    if cold:
        drop_caches()
    else:
        warm(paths)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0, out


def ceiling(binary, paths, threads):
    r = subprocess.run([binary, str(threads), *paths], check=True, capture_output=True, text=True)
    return float(r.stdout.split()[2])  # "BYTES bytes S s G GB/s"


def disk_speed(paths):
    """Cold sequential read of the files with dd (one reader, 16 MiB blocks), bytes/s."""
    drop_caches()
    t0 = time.perf_counter()
    for p in paths:
        subprocess.run(["dd", f"if={p}", "of=/dev/null", "bs=16M"], check=True, capture_output=True)
    return sum(os.path.getsize(p) for p in paths) / (time.perf_counter() - t0)


def run(a):
    import safetensors.torch
    import wcodec
    import wcodec.torch as wt

    orig = sorted(glob.glob(os.path.join(a.orig, "*.safetensors")))
    packed = sorted(glob.glob(os.path.join(a.packed, "*.wcodec")))
    ob = sum(os.path.getsize(p) for p in orig)
    pb = sum(os.path.getsize(p) for p in packed)
    threads = os.cpu_count()
    print(f"original {ob / 1e9:.2f} GB in {len(orig)} files, packed {pb / 1e9:.2f} GB ({ob / pb:.3f}x), "
          f"{threads} CPUs, {torch.cuda.get_device_name(0)}")
    # one-time costs outside the clock for every method: CUDA context, the
    # loader's ring and lanes, safetensors' import
    torch.zeros(1, device="cuda")
    warmup = wt.load_file(packed[0], device="cuda")
    del warmup
    torch.cuda.empty_cache()

    def st_load():
        sd = {}
        for p in orig:
            sd.update(safetensors.torch.load_file(p, device="cuda:0"))
        return sd

    def wc_gpu():
        return wt.load_checkpoint(a.packed, device="cuda:0")

    def wc_cpu():
        return wt.load_checkpoint(a.packed, device="cpu")

    # correctness first: every tensor, bit for bit
    ref = st_load()
    got = wc_gpu()
    assert sorted(ref) == sorted(got), "tensor names differ"
    bad = [k for k in ref if not torch.equal(ref[k].view(torch.int16), got[k].view(torch.int16))]
    del got
    cpu = wc_cpu()
    bad += [k for k in ref if not torch.equal(ref[k].cpu().view(torch.int16), cpu[k].view(torch.int16))]
    del cpu, ref
    torch.cuda.empty_cache()
    print(f"bit-identical: {'yes' if not bad else 'NO: ' + ', '.join(bad[:5])}")

    res = {}
    for cold, reps in ((False, a.reps), (True, a.cold_reps)):
        kind = "cold" if cold else "warm"
        for r in range(reps):
            for name, fn, paths in (("safetensors", st_load, orig), ("wcodec cuda", wc_gpu, packed)):
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
                dt, sd = timed(fn, cold, paths)
                del sd
                res.setdefault((name, kind), []).append(dt)
            for name, paths in (("ceiling, original files", orig), ("ceiling, packed files", packed)):
                if cold:
                    drop_caches()
                else:
                    warm(paths)
                res.setdefault((name, kind), []).append(ceiling(a.ceiling, paths, threads))
            if not cold:
                torch.cuda.empty_cache()
                dt, sd = timed(wc_cpu, False, packed)
                del sd
                res.setdefault(("wcodec cpu", kind), []).append(dt)
        if cold:
            res[("disk", kind)] = [disk_speed(packed)]
    pinned, device = wcodec.cuda_loader_memory(0)
    print(f"\n| load ({threads} CPUs) | files in page cache | cold |\n|---|---|---|")
    for name in ("safetensors", "wcodec cuda", "ceiling, original files", "ceiling, packed files", "wcodec cpu"):
        cells = []
        for kind in ("warm", "cold"):
            v = res.get((name, kind))
            if not v:
                cells.append("-")
                continue
            s = statistics.median(v)
            cells.append(f"{s:.3f} s ({ob / s / 1e9:.1f} GB/s of weights)")
        print(f"| {name} | {cells[0]} | {cells[1]} |")
    disk = res[("disk", "cold")][0]
    print(f"\ndisk, cold sequential read of the packed files (dd): {disk / 1e9:.2f} GB/s -> "
          f"packed bytes allow {pb / disk:.2f} s")
    st_w, wc_w = statistics.median(res[("safetensors", "warm")]), statistics.median(res[("wcodec cuda", "warm")])
    st_c, wc_c = statistics.median(res[("safetensors", "cold")]), statistics.median(res[("wcodec cuda", "cold")])
    ceil_w = statistics.median(res[("ceiling, original files", "warm")])
    print(f"warm: {st_w / wc_w:.2f}x safetensors, {ceil_w / wc_w:.2f}x the ceiling of the original files")
    print(f"cold: {st_c / wc_c:.2f}x safetensors, {(pb / disk) / wc_c:.2f} of what the disk allows")
    print(f"GPU loader memory beyond the tensors: {pinned / 2**20:.0f} MiB page-locked, "
          f"{device / 2**20:.0f} MiB device")
    print("raw:", {f"{k[0]}/{k[1]}": [round(x, 3) for x in v] for k, v in res.items()})
    return 0 if not bad else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen")
    g.add_argument("dir")
    g.add_argument("--layers", type=int, default=32)
    r = sub.add_parser("run")
    r.add_argument("orig")
    r.add_argument("packed")
    r.add_argument("--ceiling", required=True)
    r.add_argument("--reps", type=int, default=3)
    r.add_argument("--cold-reps", type=int, default=2)
    a = ap.parse_args()
    if a.cmd == "gen":
        gen(a.dir, a.layers)
        return 0
    return run(a)


if __name__ == "__main__":
    sys.exit(main())
