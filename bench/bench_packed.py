#!/usr/bin/env python3
"""bench_packed.py - a model run with its weights kept packed
(wcodec.torch.pack_module) against the plain model: forward time per
batch and the weights' bytes held (docs/BENCHMARKS.md, "Models with packed
weights"). Needs torch.

  bench_packed.py [--layers 8] [--hidden 2048] [--mlp 5504] [--tokens 64]
                  [--dtype bf16] [--device cpu] [--reps 5]

The model: `layers` blocks of a transformer's linear layers (q, k, v, o of
hidden x hidden; gate and up of hidden x mlp, down of mlp x hidden), each
block x + down(silu(gate(h)) * up(h)) + o(q(h) + k(h) + v(h)), h the RMS
normalised x, weights
N(0, 0.02) in the dtype; input `tokens` rows of `hidden`. Rows: the plain
model; packed, decoding per Linear module; packed in blocks (the next
block decoded on a thread while one runs). Outputs are checked equal.
"""
import argparse
import os
import sys
import time

import torch

import wcodec.torch as wpt


class Block(torch.nn.Module):
    def __init__(self, h, m):
        super().__init__()
        self.q, self.k, self.v, self.o = (torch.nn.Linear(h, h, bias=False) for _ in range(4))
        self.gate, self.up = torch.nn.Linear(h, m, bias=False), torch.nn.Linear(h, m, bias=False)
        self.down = torch.nn.Linear(m, h, bias=False)

    def forward(self, x):
        h = (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype)  # RMS norm
        a = self.o(self.q(h) + self.k(h) + self.v(h))
        return x + a + self.down(torch.nn.functional.silu(self.gate(h)) * self.up(h))


class Stack(torch.nn.Module):
    def __init__(self, n, h, m):
        super().__init__()
        self.layers = torch.nn.ModuleList(Block(h, m) for _ in range(n))

    def forward(self, x):
        for b in self.layers:
            x = b(x)
        return x


def timed(model, x, reps, sync):
    with torch.no_grad():
        model(x)
        sync()
        t0 = time.perf_counter()
        for _ in range(reps):
            y = model(x)
        sync()
    return (time.perf_counter() - t0) / reps, y


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--mlp", type=int, default=5504)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--dtype", default="bf16", choices=["bf16", "f16", "f32"])
    p.add_argument("--device", default="cpu")
    p.add_argument("--reps", type=int, default=5)
    a = p.parse_args()
    dt = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[a.dtype]

    def build():  # the same weights each time
        torch.manual_seed(0)
        m = Stack(a.layers, a.hidden, a.mlp)
        with torch.no_grad():
            for prm in m.parameters():
                prm.normal_(0, 0.02)
        return m.to(dt).to(a.device).eval()

    model = build()
    x = torch.randn(a.tokens, a.hidden, dtype=dt, device=a.device)
    sync = torch.cuda.synchronize if a.device.startswith("cuda") else (lambda: None)
    weights = sum(prm.numel() * prm.element_size() for prm in model.parameters())
    t_plain, want = timed(model, x, a.reps, sync)
    rows = [("plain", t_plain, weights)]
    for name, in_blocks in (("packed, per module", False), ("packed, blocks decoded ahead", True)):
        model = build()
        packed = wpt.pack_module(model, blocks=model.layers if in_blocks else None)
        t, got = timed(model, x, a.reps, sync)
        assert torch.equal(got, want), name
        held = weights // a.layers * (packed.max_live if in_blocks else 1)  # decoded at once, at most
        rows.append((f"{name} (file {packed.packed_bytes / 1e6:.1f} MB)", t, held))
        packed.close()
    print(f"{a.layers} blocks, hidden {a.hidden}, MLP {a.mlp}, {a.dtype}, {weights / 1e6:.1f} MB of weights; "
          f"{a.tokens} tokens on {a.device}, {os.cpu_count()} CPUs")
    print("| model | ms per forward | weights decoded and held at most |\n|---|---:|---:|")
    for name, t, held in rows:
        print(f"| {name} | {1e3 * t:.1f} | {held / 1e6:.1f} MB |")


if __name__ == "__main__":
    sys.exit(main())
