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


def timed(fn, reps=1):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        out = fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / reps, out


def measure(model, a, new, label, ref=None):
    """Prefill and generate figures of a ready model; ref: the plain model's
    (logits, ids per batch) to compare against."""
    g = torch.Generator(device="cpu").manual_seed(0)
    vocab = model.config.vocab_size
    res = {"mode": label}
    with torch.no_grad():
        ids = torch.randint(0, vocab, (1, a.prefill), generator=g).cuda()
        model(ids, use_cache=False)  # warm-up: kernels loaded, the order of units learnt
        model.generate(ids[:, :16], max_new_tokens=4, min_new_tokens=4, do_sample=False, pad_token_id=0)
        t, out = timed(lambda: model(ids, use_cache=False).logits[:, -8:].float(), 2)
        res["prefill_tok_s"] = a.prefill / t
        res["logits"] = out.cpu()
        res["gen"] = {}
        for b in a.batches:
            prompt = torch.randint(0, vocab, (b, a.prompt), generator=g).cuda()
            torch.cuda.reset_peak_memory_stats()
            t, toks = timed(lambda: model.generate(prompt, max_new_tokens=new, min_new_tokens=new, do_sample=False,
                                                   pad_token_id=0))
            res["gen"][b] = {"tok_s": b * new / t, "step_ms": 1e3 * t / new,
                             "peak_gib": torch.cuda.max_memory_allocated() / 2**30, "ids": toks[:, -new:].cpu()}
            print(f"  {label}: batch {b}: {b * new / t:.1f} tokens/s, {1e3 * t / new:.1f} ms/step, peak "
                  f"{res['gen'][b]['peak_gib']:.2f} GiB", flush=True)
    if ref is not None:
        res["logits_equal"] = torch.equal(res["logits"], ref["logits"])
        res["ids_equal"] = all(torch.equal(res["gen"][b]["ids"], ref["gen"][b]["ids"]) for b in a.batches)
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
    results, ref = [], None
    bf16 = None
    if "plain" in a.modes:
        sd = wpt.load_checkpoint(a.orig, device="cuda")
        model = skeleton(cfg, "cuda", sd)
        del sd
        torch.cuda.empty_cache()
        bf16 = weights_bytes(model)
        r = measure(model, a, a.new, "plain")
        r["weights_gib"] = bf16 / 2**30
        results.append(r)
        ref = r
        del model
        torch.cuda.empty_cache()
    budget = None
    if "packed" in a.modes:
        model = skeleton(cfg, "cuda")
        t0 = time.perf_counter()
        packed = wpt.load_packed(model, a.packed, device="cuda", blocks=model.model.layers)
        t_load = time.perf_counter() - t0
        du = packed.device_units
        plain_rest = weights_bytes(model)  # norms
        budget = du.resident_bytes + du.fixed_bytes + plain_rest + 2 * du.scratch_bytes
        # every packed weight decoded once, back to back (the decode part of a token step)
        buf = torch.empty(du.scratch_bytes, dtype=torch.uint8, device="cuda")
        s = torch.cuda.current_stream()
        units = du.units
        for u in units:
            du.decode_into(u, buf, s)
        t_dec, _ = timed(lambda: [du.decode_into(u, buf, s) for u in units], 5)
        del buf
        dec_bytes = sum(du.unit_bytes(u) for u in units)
        r = measure(model, a, a.new, "packed", ref)
        torch.cuda.synchronize()
        du.check()
        r.update(weights_gib=(du.resident_bytes + du.fixed_bytes + plain_rest) / 2**30,
                 scratch_gib=2 * du.scratch_bytes / 2**30, load_s=t_load, decode_ms=1e3 * t_dec,
                 decode_gb_s=dec_bytes / t_dec / 1e9, prefetched=du.prefetched, decoded=du.decoded)
        print(f"  packed: tiles {du.resident_bytes / 2**30:.2f} GiB, scratch 2 x {du.scratch_bytes / 2**20:.0f} MiB, "
              f"decode of all weights {1e3 * t_dec:.1f} ms ({dec_bytes / t_dec / 1e9:.0f} GB/s), load {t_load:.1f} s",
              flush=True)
        results.append(r)
        packed.close()
        del model, packed
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
            r = measure(model, a_off, a.offload_new, "offload (accelerate)")
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
        if r["mode"] == "packed":
            print(f"packed: decode of every weight {r['decode_ms']:.1f} ms ({r['decode_gb_s']:.0f} GB/s); "
                  f"units decoded {r['decoded']}, ahead {r['prefetched']}; load {r['load_s']:.1f} s; "
                  f"logits equal {r.get('logits_equal')}, token ids equal {r.get('ids_equal')}")
            if ref:
                print("packed / plain: prefill %.2f; " % (r["prefill_tok_s"] / ref["prefill_tok_s"]) +
                      ", ".join(f"b={b} {r['gen'][b]['tok_s'] / ref['gen'][b]['tok_s']:.2f} (decode "
                                f"{r['decode_ms'] / r['gen'][b]['step_ms']:.0%} of a step)" for b in a.batches))
                print("weights: %.3f of BF16" % (r["weights_gib"] * 2**30 / bf16))
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
    a = ap.parse_args()
    if a.cmd == "gen":
        gen(a)
        return 0
    return run(a)


if __name__ == "__main__":
    sys.exit(main())
