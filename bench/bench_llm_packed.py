#!/usr/bin/env python3
"""bench_llm_packed.py - a LLaMA-shaped model (transformers'
LlamaForCausalLM) whose BF16 weights stay packed in GPU memory
(wcodec.torch.load_packed(..., device="cuda")) against the plain model and
against offloading to CPU memory at the packed model's GPU memory budget
(docs/BENCHMARKS.md, "Models with packed weights on the GPU"). Needs torch
with CUDA, transformers, safetensors; accelerate for the offload row.

  bench_llm_packed.py gen DIR --shape 7b|13b       # BF16 shards + config.json
  wcodec pack -q --chunk 16384 DIR DIR.packed      # chunks sized for the GPU decoder
  bench_llm_packed.py run DIR DIR.packed [--batches 1 8 64] [--prompt 512]
        [--new 128] [--prefill 2048] [--offload-new 8] [--modes plain packed offload]
        [--units halves|blocks] [--reps 3] [--int8 DIR.int8]

Rows per mode: weights' GPU memory, peak GPU memory of generate() per
batch (torch.cuda.max_memory_allocated), prefill tokens/s at --prefill
tokens (batch 1), generate() tokens/s at each batch (greedy, exactly --new
new tokens after a random --prompt-token prompt). The packed mode also
reports the time to decode every packed weight once (the decode part of a
token step) and checks its logits and token ids against the plain model's.
"""
import argparse
import json
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

SHAPES = {"7b": dict(layers=32, hidden=4096, inter=11008, vocab=32000),
          "13b": dict(layers=40, hidden=5120, inter=13824, vocab=32000)}


def config(d):
    import transformers
    return transformers.LlamaConfig(vocab_size=d["vocab"], hidden_size=d["hidden"],
                                    intermediate_size=d["inter"], num_hidden_layers=d["layers"],
                                    num_attention_heads=d["hidden"] // 128, num_key_value_heads=d["hidden"] // 128,
                                    max_position_embeddings=4096, torch_dtype="bfloat16")


def gen(a):
    import bench_load
    d = SHAPES[a.shape]
    bench_load.gen(a.dir, d["layers"], d["hidden"], d["inter"], d["vocab"])
    with open(os.path.join(a.dir, "shape.json"), "w") as fh:
        json.dump(d, fh)


def skeleton(cfg, device, state=None):
    """The model with its parameters on the meta device, or with state (a
    state dict) copied into parameters of its own on `device` (each
    allocated apart, as a model built there has them); its rotary table
    (a buffer no checkpoint holds) on `device`."""
    import transformers
    with torch.device("meta"):
        m = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16)
    if state is not None:
        m.to_empty(device=device)
        m.load_state_dict(state, strict=False)
    rot = m.model.rotary_emb
    m.model.rotary_emb = type(rot)(config=cfg, device=device)
    m.requires_grad_(False)  # inference, as the packed model's parameters
    return m.eval()


def units(model, how):
    """The modules decoded as one unit each, in their run order: the decoder
    layers ("blocks"), or each layer's attention and MLP ("halves": half
    the scratch memory)."""
    layers = model.model.layers
    return list(layers) if how == "blocks" else [m for layer in layers for m in (layer.self_attn, layer.mlp)]


def timed(fn, reps=1):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        out = fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / reps, out


def measure(models, a, new, own):
    """Prefill and generate figures of ready models ({label: model}), each
    figure the median of --reps runs taken in turn, model after model (the
    host's speed drifts between runs by up to a third on a shared machine:
    only figures taken side by side compare). own: {label: bytes of its
    weights}, for peak memory (the increase over what was allocated before
    the run, plus the model's own weights). Token ids and logits are those
    of the first run."""
    import statistics
    g = torch.Generator(device="cpu").manual_seed(0)
    vocab = next(iter(models.values())).config.vocab_size
    res = {k: {"mode": k, "gen": {}} for k in models}
    kw = dict(do_sample=False, pad_token_id=0)
    with torch.no_grad():
        ids = torch.randint(0, vocab, (1, a.prefill), generator=g).cuda()
        for m in models.values():
            m(ids, use_cache=False)  # warm-up: kernels loaded, the order of units learnt
            m.generate(ids[:, :16], max_new_tokens=4, min_new_tokens=4, **kw)
        times = {k: [] for k in models}
        for _ in range(a.reps):
            for k, m in models.items():
                t, out = timed(lambda: m(ids, use_cache=False).logits[:, -8:].float())
                times[k].append(t)
                res[k].setdefault("logits", out.cpu())
        for k in models:
            res[k]["prefill_tok_s"] = a.prefill / statistics.median(times[k])
        for b in a.batches:
            prompt = torch.randint(0, vocab, (b, a.prompt), generator=g).cuda()
            times = {k: [] for k in models}
            for _ in range(a.reps):
                for k, m in models.items():
                    base = torch.cuda.memory_allocated()
                    torch.cuda.reset_peak_memory_stats()
                    t, toks = timed(lambda: m.generate(prompt, max_new_tokens=new, min_new_tokens=new, **kw))
                    times[k].append(t)
                    peak = (torch.cuda.max_memory_allocated() - base + own[k]) / 2**30
                    r = res[k]["gen"].setdefault(b, {"ids": toks[:, -new:].cpu(), "peak_gib": peak})
                    r["peak_gib"] = max(r["peak_gib"], peak)
            for k in models:
                t = statistics.median(times[k])
                r = res[k]["gen"][b]
                r.update(tok_s=b * new / t, step_ms=1e3 * t / new)
                print(f"  {k}: batch {b}: {r['tok_s']:.1f} tokens/s, {r['step_ms']:.1f} ms/step (runs: "
                      + ", ".join(f"{1e3 * x / new:.1f}" for x in times[k]) + f"), peak {r['peak_gib']:.2f} GiB",
                      flush=True)
    # packed against plain (lossless: equal), int8 kept packed against its
    # weights decoded once by load_checkpoint (equal: the GPU decode of
    # lossy tiles is bit-exact)
    for k, want in (("packed", "plain"), ("int8", "int8 decoded")):
        ref = res.get(want)
        if k in res and ref is not None:
            res[k]["logits_equal"] = torch.equal(res[k]["logits"], ref["logits"])
            res[k]["ids_equal"] = all(torch.equal(res[k]["gen"][b]["ids"], ref["gen"][b]["ids"]) for b in a.batches)
    return res


def weights_bytes(model):
    return sum(p.numel() * p.element_size() for p in model.parameters() if p.device.type == "cuda")


def run(a):
    import wcodec.torch as wpt
    # cuDNN's attention builds a plan per new sequence length on first sight
    # (the first model measured paid for every KV-cache length: 60.7 against
    # 34.5 ms per step) and may pick other kernels run to run: flash
    # attention instead, the same for every mode
    torch.backends.cuda.enable_cudnn_sdp(False)
    with open(os.path.join(a.orig, "shape.json")) as fh:
        d = json.load(fh)
    cfg = config(d)
    results, models, own, bf16 = [], {}, {}, None
    if "plain" in a.modes:
        sd = wpt.load_checkpoint(a.orig, device="cuda")
        models["plain"] = skeleton(cfg, "cuda", sd)
        del sd
        torch.cuda.empty_cache()
        bf16 = own["plain"] = weights_bytes(models["plain"])
    if a.int8:
        sd = wpt.load_checkpoint(a.int8, device="cuda")
        models["int8 decoded"] = skeleton(cfg, "cuda", sd)
        del sd
        own["int8 decoded"] = weights_bytes(models["int8 decoded"])
    budget, packs, extras = None, {}, {}
    todo = [("packed", a.packed)] if "packed" in a.modes else []
    todo += [("int8", a.int8)] if a.int8 else []
    for label, path in todo:
        model = skeleton(cfg, "cuda")
        t0 = time.perf_counter()
        packs[label] = wpt.load_packed(model, path, device="cuda", blocks=units(model, a.units))
        t_load = time.perf_counter() - t0
        du = packs[label].device_units
        plain_rest = weights_bytes(model)  # norms
        # every packed weight decoded once, back to back (the decode part of a token step)
        buf = torch.empty(du.scratch_bytes, dtype=torch.uint8, device="cuda")
        s = torch.cuda.current_stream()
        every = du.units
        for u in every:
            du.decode_into(u, buf, s)
        t_dec, _ = timed(lambda: [du.decode_into(u, buf, s) for u in every], 5)
        del buf
        dec_bytes = sum(du.unit_bytes(u) for u in every)
        models[label] = model
        own[label] = du.resident_bytes + du.fixed_bytes + plain_rest + du.scratch_total
        budget = own["packed"] if label == "packed" else budget
        extras[label] = dict(weights_gib=(du.resident_bytes + du.fixed_bytes + plain_rest) / 2**30,
                             load_s=t_load, decode_ms=1e3 * t_dec, decode_gb_s=dec_bytes / t_dec / 1e9)
        print(f"  {label}: tiles {du.resident_bytes / 2**30:.2f} GiB, scratch {du.scratch_total / 2**20:.0f} MiB, "
              f"decode of all weights {1e3 * t_dec:.1f} ms ({dec_bytes / t_dec / 1e9:.0f} GB/s), load {t_load:.3f} s",
              flush=True)
    if models:
        res = measure(models, a, a.new, own)
        if "plain" in res:
            res["plain"]["weights_gib"] = bf16 / 2**30
            results.append(res["plain"])
        if "int8 decoded" in res:
            res["int8 decoded"]["weights_gib"] = own["int8 decoded"] / 2**30
            results.append(res["int8 decoded"])
        torch.cuda.synchronize()
        for label, pk in packs.items():
            du = pk.device_units
            du.check()
            res[label].update(extras[label], scratch_gib=du.scratch_total / 2**30, prefetched=du.prefetched,
                              decoded=du.decoded)
            results.append(res[label])
    ref = next((r for r in results if r["mode"] == "plain"), None)
    for pk in packs.values():
        pk.close()
    models = model = packs = None
    torch.cuda.empty_cache()
    if "offload" in a.modes:
        try:
            import accelerate
        except ImportError:
            accelerate = None
        if accelerate is None or budget is None:
            print("  offload: skipped (needs accelerate and the packed mode's budget)")
        else:
            sd = wpt.load_checkpoint(a.orig, device="cpu")
            model = skeleton(cfg, "cpu", sd)
            del sd
            dmap = accelerate.infer_auto_device_map(model, max_memory={0: int(budget), "cpu": 400 * 2**30},
                                                    no_split_module_classes=["LlamaDecoderLayer"])
            model = accelerate.dispatch_model(model, device_map=dmap, main_device=0)
            model.model.rotary_emb.to("cuda")
            a_off = argparse.Namespace(**vars(a))
            a_off.prefill = min(a.prefill, 2048)
            r = measure({"offload (accelerate)": model}, a_off, a.offload_new,
                        {"offload (accelerate)": weights_bytes(model)})["offload (accelerate)"]
            r["weights_gib"] = weights_bytes(model) / 2**30
            r["on_cpu"] = sum(1 for v in dmap.values() if v == "cpu")
            results.append(r)
            del model
    print(f"\nLLaMA-shaped {d}, BF16 {bf16 / 1e9 if bf16 else float('nan'):.2f} GB of weights; "
          f"{torch.cuda.get_device_name()}")
    print("| mode | weights' GPU memory | prefill tok/s (%d) | " % a.prefill +
          " | ".join(f"generate b={b} tok/s (peak GiB)" for b in a.batches) + " |")
    print("|---|---:|---:|" + "---:|" * len(a.batches))
    for r in results:
        w = f"{r['weights_gib']:.2f} GiB" + (f" + {r['scratch_gib']:.2f} scratch" if "scratch_gib" in r else "")
        gens = " | ".join(f"{r['gen'][b]['tok_s']:.1f} ({r['gen'][b]['peak_gib']:.1f})" for b in a.batches)
        print(f"| {r['mode']} | {w} | {r['prefill_tok_s']:.0f} | {gens} |")
    for r in results:
        if r["mode"] in ("packed", "int8"):
            print(f"{r['mode']}: decode of every weight {r['decode_ms']:.1f} ms ({r['decode_gb_s']:.0f} GB/s); "
                  f"units decoded {r['decoded']}, ahead {r['prefetched']}; load {r['load_s']:.3f} s; "
                  f"logits equal {r.get('logits_equal')}, token ids equal {r.get('ids_equal')}")
            if ref:
                print(f"{r['mode']} / plain: " + "prefill %.2f; " % (r["prefill_tok_s"] / ref["prefill_tok_s"]) +
                      ", ".join(f"b={b} {r['gen'][b]['tok_s'] / ref['gen'][b]['tok_s']:.2f} (decode "
                                f"{r['decode_ms'] / r['gen'][b]['step_ms']:.0%} of a step)" for b in a.batches))
                print("weights: %.3f of BF16, %.3f with the scratch buffers" % (
                    r["weights_gib"] * 2**30 / bf16, (r["weights_gib"] + r["scratch_gib"]) * 2**30 / bf16))
        if r["mode"].startswith("offload"):
            print(f"offload: {r['on_cpu']} modules on the CPU; {a.offload_new} new tokens per generate()")
    bad = any(r.get("logits_equal") is False or r.get("ids_equal") is False for r in results)
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen")
    g.add_argument("dir")
    g.add_argument("--shape", choices=sorted(SHAPES), default="7b")
    r = sub.add_parser("run")
    r.add_argument("orig")
    r.add_argument("packed")
    r.add_argument("--batches", type=int, nargs="+", default=[1, 8, 64])
    r.add_argument("--prompt", type=int, default=512)
    r.add_argument("--new", type=int, default=128)
    r.add_argument("--prefill", type=int, default=2048)
    r.add_argument("--offload-new", type=int, default=8)
    r.add_argument("--modes", nargs="+", default=["plain", "packed", "offload"])
    r.add_argument("--units", choices=["blocks", "halves"], default="halves")
    r.add_argument("--reps", type=int, default=3)
    r.add_argument("--int8", help="also a model packed with --lossy int8 (its outputs differ from plain's)")
    a = ap.parse_args()
    if a.cmd == "gen":
        gen(a)
        return 0
    return run(a)


if __name__ == "__main__":
    sys.exit(main())
