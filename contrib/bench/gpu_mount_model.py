#!/usr/bin/env python3
"""gpu_mount_model.py - the Python half of contrib/bench/bench-gpu-mount.sh.

Needs torch, safetensors and transformers (the GPU machine's python3 has
them). Subcommands:

  gen-big FILE [--layers N]
      A transformer-shaped BF16 safetensors file drawn from N(0, 0.02) (the
      scale of trained weights): LLaMA-7B-sized layers (hidden 4096, MLP
      11008), an embedding and an lm_head of 32000 x 4096, norms near 1.
      N=4 gives about 2.14 GB.
  make-model DIR
      A small LlamaForCausalLM (hidden 1024, 12 layers, vocab 32000, about
      205M parameters, random init, bfloat16) written with
      save_pretrained(DIR) (safetensors): about 410 MB.
  load-bench --orig DIR --src MIRROR --mnt MNT --wcodecfs PATH
             [--backend OPTS ...] [--reps N] [--md FILE]
      For the original DIR and for a fresh wcodecfs mount of MIRROR (the
      packed copy of DIR) with each backend option string: (a)
      safetensors.torch.load_file of every *.safetensors, every tensor
      compared with torch.equal against the original's; (b)
      AutoModelForCausalLM.from_pretrained(dtype=bfloat16), the logits of a
      fixed input compared with torch.equal against the original model's.
      Every timed load is cold: a fresh mount and `echo 3 >
      /proc/sys/vm/drop_caches` before it. Median of N. Writes a markdown
      table to --md and stdout; exits 1 if any tensor or logit differs.
"""
import argparse
import gc
import glob
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def gen_big(path, layers):
    from safetensors.torch import save_file
    g = torch.Generator().manual_seed(1)
    hidden, inter, vocab = 4096, 11008, 32000

    def w(*shape):
        return (torch.randn(*shape, generator=g) * 0.02).to(torch.bfloat16)

    t = {"model.embed_tokens.weight": w(vocab, hidden)}
    for i in range(layers):
        p = f"model.layers.{i}."
        for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
            t[p + f"self_attn.{n}.weight"] = w(hidden, hidden)
        t[p + "mlp.gate_proj.weight"] = w(inter, hidden)
        t[p + "mlp.up_proj.weight"] = w(inter, hidden)
        t[p + "mlp.down_proj.weight"] = w(hidden, inter)
        for n in ("input_layernorm", "post_attention_layernorm"):
            t[p + f"{n}.weight"] = (1 + torch.randn(hidden, generator=g) * 0.05).to(torch.bfloat16)
    t["model.norm.weight"] = (1 + torch.randn(hidden, generator=g) * 0.05).to(torch.bfloat16)
    t["lm_head.weight"] = w(vocab, hidden)
    tmp = path + ".tmp"
    save_file(t, tmp, metadata={"format": "pt"})
    os.rename(tmp, path)
    print(f"gen-big: {path}: {len(t)} tensors, {os.path.getsize(path)} bytes")


def make_model(d):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2816,
                      num_hidden_layers=12, num_attention_heads=16, num_key_value_heads=8,
                      max_position_embeddings=2048, tie_word_embeddings=False)
    torch.manual_seed(0)
    m = LlamaForCausalLM(cfg).to(torch.bfloat16)
    # safetensors is save_pretrained's only format in transformers 5 (which
    # dropped the safe_serialization argument) and its default since 4.35
    m.save_pretrained(d)
    if not glob.glob(os.path.join(d, "*.safetensors")):
        sys.exit(f"make-model: save_pretrained wrote no .safetensors in {d}")
    n = sum(p.numel() for p in m.parameters())
    print(f"make-model: {d}: {n} parameters; files: {sorted(os.listdir(d))}")


# ---- mounting ---------------------------------------------------------------

def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def cpu_seconds(pid):
    """utime + stime of process pid (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Mount:
    def __init__(self, wcodecfs, src, mnt, opts, log):
        self.mnt = mnt
        self.logf = open(log, "a")
        self.logf.write(f"=== wcodecfs -f {src} {mnt} -o {opts}\n")
        self.logf.flush()
        self.p = subprocess.Popen([wcodecfs, "-f", src, mnt, "-o", opts],
                                  stdout=self.logf, stderr=self.logf)
        for _ in range(600):
            if os.path.ismount(mnt):
                return
            if self.p.poll() is not None:
                raise RuntimeError(f"wcodecfs exited with {self.p.returncode} (see {log})")
            time.sleep(0.05)
        raise RuntimeError(f"{mnt}: not mounted after 30 s")

    def cpu(self):
        return cpu_seconds(self.p.pid)

    def close(self):
        gc.collect()
        ok = False
        for cmd in (["fusermount3", "-u", self.mnt], ["umount", self.mnt]):
            try:
                if subprocess.run(cmd, stderr=subprocess.DEVNULL).returncode == 0:
                    ok = True
                    break
            except FileNotFoundError:
                pass
        if not ok:
            print(f"WARNING: {self.mnt} busy: lazy unmount", flush=True)
            subprocess.run(["umount", "-l", self.mnt])
        try:
            self.p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.p.terminate()
            self.p.wait(timeout=20)
        self.logf.close()


# ---- load benchmark ---------------------------------------------------------

def st_files(d):
    return sorted(os.path.basename(f) for f in glob.glob(os.path.join(d, "*.safetensors")))


def load_all(d, names):
    """load_file of every file, each tensor copied into process memory:
    load_file returns views of a private mmap of the file (safetensors'
    torch.UntypedStorage.from_file), read only when touched; the copy reads
    every byte and lets the mapping go (else the mount stays busy and
    drop_caches cannot drop the mapped pages)."""
    from safetensors.torch import load_file
    sd = {}
    for n in names:
        sd.update({k: v.clone() for k, v in load_file(os.path.join(d, n)).items()})
    gc.collect()
    return sd


def same_tensors(a, b):
    if a.keys() != b.keys():
        return f"tensor names differ: {sorted(a.keys() ^ b.keys())[:5]}"
    for k in a:
        if a[k].dtype != b[k].dtype or a[k].shape != b[k].shape or not torch.equal(a[k], b[k]):
            return f"tensor {k} differs"
    return None


def from_pretrained(d):
    """from_pretrained(d, bfloat16), then .to(DEVICE): the parameters may be
    views of the file's mmap until copied, so the copy to the GPU (or a
    clone on the CPU) is what reads every byte, as a user's first step
    after loading would."""
    from transformers import AutoModelForCausalLM
    try:
        m = AutoModelForCausalLM.from_pretrained(d, dtype=torch.bfloat16)
    except TypeError:
        m = AutoModelForCausalLM.from_pretrained(d, torch_dtype=torch.bfloat16)
    if DEVICE == "cpu":
        for p in m.parameters():
            p.data = p.data.clone()
    else:
        m.to(DEVICE)
        torch.cuda.synchronize()
    gc.collect()
    return m


def logits(model, ids):
    model.eval()
    with torch.no_grad():
        return model(ids.to(next(model.parameters()).device)).logits


def load_bench(a):
    names = st_files(a.orig)
    nbytes = sum(os.path.getsize(os.path.join(a.orig, n)) for n in names)
    ids = torch.randint(0, 32000, (1, 32), generator=torch.Generator().manual_seed(0))
    log = a.log
    bad = []
    # Warm-up outside the timings: imports, lazy modules, the reference.
    ref_sd = load_all(a.orig, names)
    ref_model = from_pretrained(a.orig)
    ref_logits = logits(ref_model, ids)
    del ref_model
    sources = [("original files", None)] + [(f"wcodecfs -o {b}", b) for b in a.backend]
    res = {s: {"load_file": [], "from_pretrained": [], "cpu_lf": [], "cpu_fp": [], "line": ""}
           for s, _ in sources}

    def timed(what, label, opts, fn):
        m = Mount(a.wcodecfs, a.src, a.mnt, opts, log) if opts else None
        try:
            d = a.mnt if m else a.orig
            drop_caches()
            c0 = m.cpu() if m else 0.0
            t0 = time.perf_counter()
            out = fn(d)
            dt = time.perf_counter() - t0
            c1 = m.cpu() if m else 0.0
        finally:
            if m:
                m.close()
        if m and not res[label]["line"]:
            with open(log) as f:
                lines = [x for x in f.read().splitlines() if "mounted" in x and "backend" in x]
            # "wcodecfs: info: mounted SRC on MNT: backend cuda, cache ..." -> "backend cuda"
            res[label]["line"] = lines[-1].split(": ")[-1].split(",")[0] if lines else "?"
        res[label][what].append(dt)
        res[label]["cpu_lf" if what == "load_file" else "cpu_fp"].append(c1 - c0)
        print(f"{label}: {what} {dt:.3f} s, daemon CPU {c1 - c0:.2f} s", flush=True)
        return out

    for rep in range(a.reps):
        for label, opts in sources:
            sd = timed("load_file", label, opts, lambda d: load_all(d, names))
            why = same_tensors(ref_sd, sd)
            if why:
                bad.append(f"{label} rep {rep}: load_file: {why}")
            del sd
            model = timed("from_pretrained", label, opts, from_pretrained)
            lg = logits(model, ids)
            if not torch.equal(lg, ref_logits):
                bad.append(f"{label} rep {rep}: from_pretrained: logits differ "
                           f"(max abs diff {(lg.float() - ref_logits.float()).abs().max().item()})")
            sd2 = model.state_dict()
            for k, v in ref_sd.items():
                if k in sd2 and not torch.equal(sd2[k].cpu(), v):
                    bad.append(f"{label} rep {rep}: from_pretrained: parameter {k} differs")
                    break
            del model, sd2

    md = [f"Model: {', '.join(names)} in {a.orig}, {nbytes} bytes, {len(ref_sd)} tensors; "
          f"median of {a.reps} cold runs (fresh mount, page cache dropped). load_file = "
          f"safetensors.torch.load_file of every file + a copy of each tensor (load_file maps the "
          f"file; the copy reads it); from_pretrained = AutoModelForCausalLM.from_pretrained("
          f"dtype=bfloat16) + .to('{DEVICE}'); logits of one fixed 32-token input on {DEVICE}.",
          "",
          "| source | daemon log | load_file s | MB/s | daemon CPU s | from_pretrained s | daemon CPU s | tensors equal | logits equal |",
          "|---|---|---:|---:|---:|---:|---:|---|---|"]
    for label, opts in sources:
        r = res[label]
        lf, fp = statistics.median(r["load_file"]), statistics.median(r["from_pretrained"])
        te = "yes" if not any(b.startswith(label) and "load_file" in b for b in bad) else "NO"
        le = "yes" if not any(b.startswith(label) and "from_pretrained" in b for b in bad) else "NO"
        cpu_lf = f"{statistics.median(r['cpu_lf']):.2f}" if opts else "-"
        cpu_fp = f"{statistics.median(r['cpu_fp']):.2f}" if opts else "-"
        md.append(f"| {label} | {r['line'] or '-'} | {lf:.3f} | {nbytes / lf / 1e6:.0f} | {cpu_lf} | "
                  f"{fp:.3f} | {cpu_fp} | {te} | {le} |")
    md.append("")
    md.append("runs (s): " + "; ".join(
        f"{label}: load_file {[round(x, 3) for x in res[label]['load_file']]}, "
        f"from_pretrained {[round(x, 3) for x in res[label]['from_pretrained']]}" for label, _ in sources))
    for b in bad:
        md.append(f"MISMATCH: {b}")
    text = "\n".join(md) + "\n"
    sys.stdout.write(text)
    if a.md:
        with open(a.md, "w") as f:
            f.write(text)
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen-big")
    g.add_argument("file")
    g.add_argument("--layers", type=int, default=4)
    m = sub.add_parser("make-model")
    m.add_argument("dir")
    b = sub.add_parser("load-bench")
    b.add_argument("--orig", required=True)
    b.add_argument("--src", required=True)
    b.add_argument("--mnt", required=True)
    b.add_argument("--wcodecfs", required=True)
    b.add_argument("--backend", action="append", default=[])
    b.add_argument("--reps", type=int, default=3)
    b.add_argument("--md")
    b.add_argument("--log", default="/dev/null")
    a = ap.parse_args()
    if a.cmd == "gen-big":
        gen_big(a.file, a.layers)
    elif a.cmd == "make-model":
        make_model(a.dir)
    else:
        return load_bench(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
