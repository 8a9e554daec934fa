#!/usr/bin/env python3
"""bench_distributed.py - a checkpoint loaded by N ranks at once
(docs/BENCHMARKS.md, "Loading across ranks"): each rank loading the whole
packed checkpoint by itself (what tensor-parallel ranks do without a
process group), wcodec.torch.load_checkpoint with the process group
(replicated) and with the LLaMA tensor-parallel plan, against safetensors:
each rank's load_file of every original shard, and each rank's slices
through safe_open(...).get_slice (what transformers' tensor-parallel load
reads). Files in the page cache.

  bench_distributed.py ORIG PACKED --nproc N [--backend nccl|gloo] [--reps 2]

With --backend nccl rank r uses cuda:r (N GPUs); with gloo every rank uses
cuda:0 (N processes sharing one GPU; the packed bytes move through host
memory). Per method: the wall time from a barrier to the last rank's
return (median of --reps). Every rank's tensor-parallel slices are
compared bit for bit with safetensors'. (The bytes the ranks read are
measured by tests/test_distributed.py on the CPU: here safetensors reads
through mmap, which rchar does not count, and the GPU loader's threads
end with each load.)
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

LLAMA_PLAN = {"*.q_proj.weight": "colwise", "*.k_proj.weight": "colwise", "*.v_proj.weight": "colwise",
              "*.gate_proj.weight": "colwise", "*.up_proj.weight": "colwise", "*embed_tokens.weight": "colwise",
              "lm_head.weight": "colwise", "*.o_proj.weight": "rowwise", "*.down_proj.weight": "rowwise"}


def worker(a, rank, init, out_path):
    import fnmatch
    import torch
    import torch.distributed as dist
    from safetensors import safe_open
    from safetensors.torch import load_file
    import wcodec.torch as wt
    world = a.nproc
    dev = f"cuda:{rank}" if a.backend == "nccl" else "cuda:0"
    torch.cuda.set_device(dev)
    dist.init_process_group(a.backend, init_method=f"file://{init}", rank=rank, world_size=world)
    pg = dist.group.WORLD
    shards = sorted(glob.glob(os.path.join(a.orig, "*.safetensors")))

    def st_slices():
        out = {}
        for s in shards:
            with safe_open(s, framework="pt", device=dev) as f:
                for k in f.keys():
                    mode = next((m for p, m in LLAMA_PLAN.items() if fnmatch.fnmatchcase(k, p)), None)
                    sl = f.get_slice(k)
                    shape = sl.get_shape()
                    if mode is None or not shape:
                        out[k] = f.get_tensor(k)
                        continue
                    dim = 0 if mode == "colwise" else len(shape) - 1
                    n = shape[dim]
                    lo = rank * (n // world) + min(rank, n % world)
                    hi = lo + n // world + (1 if rank < n % world else 0)
                    out[k] = sl[lo:hi] if dim == 0 else sl[..., lo:hi]
        return out

    methods = {
        "safetensors load_file, every rank every shard": lambda: {k: v for s in shards
                                                                   for k, v in load_file(s, device=dev).items()},
        "safetensors get_slice, each rank its slices": st_slices,
        "wcodec load_checkpoint, every rank alone": lambda: wt.load_checkpoint(a.packed, device=dev),
        "wcodec load_checkpoint(process_group), replicated": lambda: wt.load_checkpoint(a.packed, device=dev,
                                                                                         process_group=pg),
        "wcodec load_checkpoint(process_group, tp_plan)": lambda: wt.load_checkpoint(
            a.packed, device=dev, process_group=pg, tp_plan=LLAMA_PLAN),
    }
    res = {}
    ref = None
    for rep in range(a.reps + 1):  # the first round warms up (imports, contexts, the loaders' buffers)
        for name, fn in methods.items():
            torch.cuda.empty_cache()
            dist.barrier(group=pg)
            t0 = time.perf_counter()
            got = fn()
            torch.cuda.synchronize()
            dt = time.perf_counter() - t0
            dist.barrier(group=pg)
            if rep == 0 and name.startswith("safetensors get_slice"):
                ref = got
                got = None
            if rep == 0 and "tp_plan" in name:
                bad = [k for k in ref if not torch.equal(ref[k], got[k])]
                res["tp_unequal"] = bad[:5]
                res["tp_bytes"] = sum(t.numel() * t.element_size() for t in got.values())
                ref = None
            del got
            if rep:
                res.setdefault(name, []).append(dt)
    res["pinned_device"] = list(__import__("wcodec").cuda_loader_memory(torch.cuda.current_device()))
    with open(out_path, "w") as f:
        json.dump(res, f)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("orig")
    ap.add_argument("packed")
    ap.add_argument("--nproc", type=int, default=4)
    ap.add_argument("--backend", choices=["nccl", "gloo"], default="nccl")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--worker", type=int, default=-1)
    ap.add_argument("--init")
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.worker >= 0:
        worker(a, a.worker, a.init, a.out)
        return 0
    tmp = tempfile.mkdtemp()
    init = os.path.join(tmp, "init")
    outs = [os.path.join(tmp, f"r{r}.json") for r in range(a.nproc)]
    procs = [subprocess.Popen([sys.executable, __file__, a.orig, a.packed, "--nproc", str(a.nproc), "--backend",
                               a.backend, "--reps", str(a.reps), "--worker", str(r), "--init", init, "--out", outs[r]])
             for r in range(a.nproc)]
    rc = [p.wait() for p in procs]
    if any(rc):
        sys.exit(f"a rank failed: {rc}")
    res = [json.load(open(o)) for o in outs]
    psize = sum(os.path.getsize(p) for p in glob.glob(os.path.join(a.packed, "*.wcodec")))
    osize = sum(os.path.getsize(p) for p in glob.glob(os.path.join(a.orig, "*.safetensors")))
    print(f"{a.nproc} ranks ({a.backend}); original {osize / 1e9:.2f} GB, packed {psize / 1e9:.2f} GB; "
          f"tp slices equal to safetensors' on every rank: {all(not r['tp_unequal'] for r in res)}; "
          f"per rank after the loads (page-locked, device bytes of the GPU loader): {res[0]['pinned_device']}")
    print("| method | wall time (max over ranks, median) |")
    print("|---|---:|")
    for name in [k for k in res[0] if isinstance(res[0][k], list) and k not in ("tp_unequal", "pinned_device")]:
        walls = [max(r[name][i] for r in res) for i in range(a.reps)]
        print(f"| {name} | {statistics.median(walls):.3f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
