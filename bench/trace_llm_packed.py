#!/usr/bin/env python3
"""trace_llm_packed.py - where the milliseconds of a generate() step go, for
the plain model and for the same model with its weights packed in GPU
memory (bench_llm_packed.py's models; docs/BENCHMARKS.md, "Models with
packed weights on the GPU").

  trace_llm_packed.py DIR DIR.packed [--batch 1] [--steps 16] [--trace OUT] [--units halves|blocks]

For each mode, `--steps` decode steps of generate() (after a warm-up) run
under torch.profiler, and the CUDA kernels of the trace are summed:
  step      wall time per token step (ms)
  gpu busy  the union of all kernels' intervals, per step
  forward   kernels that are not the packed decoder's (rANS, merge), summed
  decode    the packed decoder's kernels, summed
  overlap   time the decoder's kernels ran while a forward kernel ran
  fwd wait  forward kernels' total time beyond the plain model's (slowed or
            delayed by the decode sharing the GPU)
  hooks     host time in the packed module's pre- and post-forward hooks
--trace OUT writes each mode's Chrome trace (OUT/plain.json.gz, ...).
"""
import argparse
import gzip
import json
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

DECODER = ("rans", "merge")  # kernel-name parts of the packed decoder (cuda/wcc_kernels.cu)


def kernels(prof):
    """[(start_us, end_us, name)] of the CUDA kernels in a profile."""
    out = []
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and e.time_range.elapsed_us() > 0:
            out.append((e.time_range.start, e.time_range.end, e.name))
    return sorted(out)


def union(iv):
    tot, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(iv):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                tot += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        tot += cur_e - cur_s
    return tot


def intersect(a, b):
    """Total length of union(a) intersected with union(b)."""
    return union(a) + union(b) - union(a + b)


def summary(prof, steps, wall):
    ks = kernels(prof)
    dec = [(s, e) for s, e, n in ks if any(p in n.lower() for p in DECODER)]
    fwd = [(s, e) for s, e, n in ks if not any(p in n.lower() for p in DECODER)]
    return {"step_ms": 1e3 * wall / steps, "busy_ms": union(dec + fwd) / 1e3 / steps,
            "forward_ms": sum(e - s for s, e in fwd) / 1e3 / steps, "decode_ms": sum(e - s for s, e in dec) / 1e3 / steps,
            "overlap_ms": intersect(dec, fwd) / 1e3 / steps, "kernels": len(ks) / steps}


def run_mode(model, prompt, steps, label, trace_dir, hook_s=None):
    """Step figures of one mode; hook_s: a one-element list the hooks add
    their host seconds to (per step: the hooks of a steps+1 token run less
    those of a 1 token run)."""
    hook_s = hook_s if hook_s is not None else [0.0]
    kw = dict(do_sample=False, pad_token_id=0)
    with torch.no_grad():
        model.generate(prompt, max_new_tokens=steps, min_new_tokens=steps, **kw)  # warm-up
        torch.cuda.synchronize()
        # the profiled run and a timed run without the profiler
        hook_s[0] = 0.0
        t0 = time.perf_counter()
        model.generate(prompt, max_new_tokens=steps + 1, min_new_tokens=steps + 1, **kw)
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        h1 = hook_s[0]
        model.generate(prompt, max_new_tokens=1, min_new_tokens=1, **kw)
        torch.cuda.synchronize()
        h_step = (h1 - (hook_s[0] - h1)) / steps
        wall = (t1 - t0) - (time.perf_counter() - t1)  # steps beyond the prefill step
        acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=acts) as prof:
            model.generate(prompt, max_new_tokens=steps + 1, min_new_tokens=steps + 1, **kw)
            torch.cuda.synchronize()
    if trace_dir:
        os.makedirs(trace_dir, exist_ok=True)
        tmp = os.path.join(trace_dir, f"{label}.json")
        prof.export_chrome_trace(tmp)
        with open(tmp, "rb") as fi, gzip.open(tmp + ".gz", "wb") as fo:
            fo.write(fi.read())
        os.remove(tmp)
    s = summary(prof, steps + 1, wall * (steps + 1) / steps)
    s["step_ms"] = 1e3 * wall / steps
    s["hooks_ms"] = 1e3 * h_step
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("orig")
    ap.add_argument("packed")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--trace")
    ap.add_argument("--units", choices=["blocks", "halves"], default="halves")
    a = ap.parse_args()
    import bench_llm_packed as blp
    import wcodec.torch as wpt
    torch.backends.cuda.enable_cudnn_sdp(False)
    with open(os.path.join(a.orig, "shape.json")) as fh:
        cfg = blp.config(json.load(fh))
    g = torch.Generator(device="cpu").manual_seed(0)
    prompt = torch.randint(0, cfg.vocab_size, (a.batch, a.prompt), generator=g).cuda()
    rows = {}
    sd = wpt.load_checkpoint(a.orig, device="cuda")
    model = blp.skeleton(cfg, "cuda", sd)
    del sd
    rows["plain"] = run_mode(model, prompt, a.steps, "plain", a.trace)
    del model
    torch.cuda.empty_cache()
    model = blp.skeleton(cfg, "cuda")
    packed = wpt.load_packed(model, a.packed, device="cuda", blocks=blp.units(model, a.units))
    hook_s = [0.0]
    pb, pa = packed._before, packed._after
    for h in packed._hooks:
        h.remove()
    packed._hooks = []

    def before(root, args):
        t0 = time.perf_counter()
        pb(root, args)
        hook_s[0] += time.perf_counter() - t0

    def after(root, args, out):
        t0 = time.perf_counter()
        pa(root, args, out)
        hook_s[0] += time.perf_counter() - t0
    for root in packed._units:
        packed._hooks += [root.register_forward_pre_hook(before), root.register_forward_hook(after)]
    rows["packed"] = run_mode(model, prompt, a.steps, "packed", a.trace, hook_s)
    packed.close()
    p, q = rows["plain"], rows["packed"]
    q["fwd_wait_ms"] = q["forward_ms"] - p["forward_ms"]
    print(f"batch {a.batch}, {a.steps} steps, {torch.cuda.get_device_name()}")
    print("| mode | step ms | GPU busy | forward kernels | decode kernels | decode beside forward | "
          "forward beyond plain | hooks (host) | kernels/step |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for k, r in rows.items():
        print(f"| {k} | {r['step_ms']:.2f} | {r['busy_ms']:.2f} | {r['forward_ms']:.2f} | {r['decode_ms']:.2f} | "
              f"{r['overlap_ms']:.2f} | {r.get('fwd_wait_ms', 0):.2f} | {r.get('hooks_ms', 0):.2f} | "
              f"{r['kernels']:.0f} |")
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
