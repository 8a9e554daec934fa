"""bench_tp_transformers.py - transformers' tensor parallelism fed by
wcodec (docs/BENCHMARKS.md, "Loads across ranks"): under torchrun, every
rank loads a LLaMA-shaped model with tp_plan="auto" twice, by transformers'
own from_pretrained of the original safetensors and by
wcodec.transformers.from_pretrained of the packed copy, and compares every
rank's parameter shards and the logits of a fixed input.

    torchrun --nproc-per-node N bench/bench_tp_transformers.py WORKDIR \
        [--hidden 1024 --layers 8 --inter 2816 --heads 16 --kv-heads 4 --vocab 32000] [--repeat 2]

WORKDIR/orig (save_pretrained, random weights, BF16) and WORKDIR/packed
(`wcodec pack -u`) are made by rank 0 when missing; the files are read once
before timing (page cache warm). Each rank prints one JSON line: the load
times (the best of --repeat), whether the shards and the logits are equal.
Exit status 1 when any rank's shards or logits differ. CPU ranks (gloo)
where CUDA_VISIBLE_DEVICES is empty, else one GPU per rank (NCCL).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import torch
import torch.distributed as dist


def make_model(args, orig, packed):
    from transformers import AutoModelForCausalLM, LlamaConfig

    if not os.path.isdir(orig):
        cfg = LlamaConfig(hidden_size=args.hidden, intermediate_size=args.inter, num_hidden_layers=args.layers,
                          num_attention_heads=args.heads, num_key_value_heads=args.kv_heads, vocab_size=args.vocab,
                          tie_word_embeddings=False)
        torch.manual_seed(0)
        m = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
        with torch.no_grad():
            for p in m.parameters():
                p.normal_(0, 0.02)
        m.save_pretrained(orig + ".tmp", max_shard_size="1GB")
        os.rename(orig + ".tmp", orig)
    if not os.path.isdir(packed):
        wcodec = shutil.which("wcodec") or "wcodec"
        subprocess.run([wcodec, "pack", "-q", "-u", orig, packed + ".tmp"], check=True)
        os.rename(packed + ".tmp", packed)
    for d in (orig, packed):  # warm the page cache
        for f in os.listdir(d):
            with open(os.path.join(d, f), "rb") as fh:
                while fh.read(1 << 24):
                    pass


def local(t):
    return t.to_local() if hasattr(t, "to_local") else t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("workdir")
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--inter", type=int, default=2816)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    from transformers import AutoModelForCausalLM

    import wcodec.transformers

    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    orig, packed = os.path.join(args.workdir, "orig"), os.path.join(args.workdir, "packed")
    if rank == 0:
        make_model(args, orig, packed)
    dist.barrier()

    def timed(fn):
        dist.barrier()
        t0 = time.perf_counter()
        m = fn()
        if cuda:
            torch.cuda.synchronize()
        dist.barrier()
        return m, time.perf_counter() - t0

    t_theirs, t_ours = [], []
    for _ in range(args.repeat):
        theirs, t = timed(lambda: AutoModelForCausalLM.from_pretrained(orig, tp_plan="auto", dtype=torch.bfloat16))
        t_theirs.append(t)
        del theirs
        ours, t = timed(lambda: wcodec.transformers.from_pretrained(AutoModelForCausalLM, packed, tp_plan="auto",
                                                                    dtype=torch.bfloat16))
        t_ours.append(t)
        del ours
    theirs = AutoModelForCausalLM.from_pretrained(orig, tp_plan="auto", dtype=torch.bfloat16)
    ours = wcodec.transformers.from_pretrained(AutoModelForCausalLM, packed, tp_plan="auto", dtype=torch.bfloat16)
    mine = dict(ours.named_parameters())
    differ = [n for n, p in theirs.named_parameters()
              if n not in mine or type(p) is not type(mine[n]) or not torch.equal(local(p), local(mine[n]))]
    dev = next(theirs.parameters()).device
    ids = torch.arange(1, 65, device=dev).reshape(2, 32) % args.vocab
    with torch.no_grad():
        a, b = local(theirs(ids).logits), local(ours(ids).logits)
    out = {"rank": rank, "world": world, "device": str(dev), "params": sum(p.numel() for p in theirs.parameters()),
           "transformers_s": round(min(t_theirs), 3), "wcodec_s": round(min(t_ours), 3),
           "wcodec_over_transformers": round(min(t_ours) / min(t_theirs), 3),
           "shards_equal": not differ, "shards_differ": differ[:5], "logits_equal": bool(torch.equal(a, b)),
           "logits_shape": list(a.shape)}
    print(json.dumps(out), flush=True)
    ok = torch.tensor([int(not differ and torch.equal(a, b))], device=dev if cuda else "cpu")
    dist.all_reduce(ok, op=dist.ReduceOp.MIN)
    dist.destroy_process_group()
    return 0 if ok.item() else 1


if __name__ == "__main__":
    sys.exit(main())
