#!/usr/bin/env python3
"""bench_install.py - the Python package as users install it (a wheel
pip-installed into an environment) against the build tree: where each
finds libwcodec and the CUDA plugin, whether a packed checkpoint loads
onto the device equal to the original, and the load's speed
(docs/BENCHMARKS.md, "Installed from a wheel").

  bench_install.py ORIG PACKED --tree SRC:LIBDIR:PLUGINDIR [--device cuda] [--rounds 3] [--reps 3]

ORIG: the original checkpoint directory (safetensors shards), PACKED: the
same packed by `wcodec pack -u`. "installed" is the package this Python
imports from its site directory, run from / with no WCODEC_* variables;
"tree" is SRC/python with WCODEC_LIBRARY=LIBDIR/libwcodec.so.0 and
WCODEC_PLUGIN_DIR=PLUGINDIR. Each round runs both, alternately, each in a
fresh process: a warm-up load, then --reps timed loads of
wcodec.torch.load_checkpoint(PACKED, device); the median over every
timed load is reported. The installed package's tensors are compared byte
for byte with ORIG's shards (their data read by the safetensors layout).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import glob, json, os, sys, time, torch
import wcodec, wcodec._lib as L
from wcodec.torch import load_checkpoint
orig, packed, device, reps, compare = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5] == "1"
def sync():
    if device.startswith("cuda"):
        torch.cuda.synchronize()
sd = load_checkpoint(packed, device=device); sync()
out = {"package": os.path.dirname(wcodec.__file__), "library": L.lib()._name,
       "plugin": getattr(L.cuda(), "_name", None) if device.startswith("cuda") else None, "times": []}
if compare:  # against the original shards' bytes, read by the format's definition (docs/FORMAT.md)
    import mmap, struct
    n = bad = 0
    for shard in sorted(glob.glob(os.path.join(orig, "*.safetensors"))):
        with open(shard, "rb") as f:
            m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        hl = struct.unpack_from("<Q", m, 0)[0]
        for k, v in json.loads(m[8:8 + hl]).items():
            if k == "__metadata__":
                continue
            n += 1
            a, b = v["data_offsets"]
            t = sd.get(k)
            ok = t is not None and list(t.shape) == v["shape"]
            bad += not (ok and t.contiguous().view(-1).view(torch.uint8).cpu().numpy().tobytes() == m[8 + hl + a:8 + hl + b])
    out["tensors"], out["unequal"] = n, bad
    out["bytes"] = sum(t.numel() * t.element_size() for t in sd.values())
del sd
for _ in range(reps):
    torch.cuda.empty_cache() if device.startswith("cuda") else None
    t0 = time.perf_counter(); sd = load_checkpoint(packed, device=device); sync()
    out["times"].append(time.perf_counter() - t0)
    del sd
print("RESULT " + json.dumps(out))
"""


def run(env, args, compare):
    r = subprocess.run([sys.executable, "-c", CHILD, os.path.abspath(args.orig), os.path.abspath(args.packed),
                        args.device, str(args.reps), "1" if compare else "0"],
                       cwd="/", env=env, capture_output=True, text=True)
    line = [x for x in r.stdout.splitlines() if x.startswith("RESULT ")]
    if r.returncode or not line:
        sys.exit(f"load failed (exit {r.returncode}):\n{r.stdout}\n{r.stderr}")
    return json.loads(line[-1][7:])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("orig")
    ap.add_argument("packed")
    ap.add_argument("--tree", required=True, help="SRC:LIBDIR:PLUGINDIR of the build tree")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    src, libdir, plugindir = a.tree.split(":")
    base = {k: v for k, v in os.environ.items() if not k.startswith("WCODEC_") and k != "PYTHONPATH"}
    tree = dict(base, PYTHONPATH=os.path.join(os.path.abspath(src), "python"),
                WCODEC_LIBRARY=os.path.join(os.path.abspath(libdir), "libwcodec.so.0"),
                WCODEC_PLUGIN_DIR=os.path.abspath(plugindir))
    res = {"installed": [], "tree": []}
    for r in range(a.rounds):
        res["installed"].append(run(base, a, compare=(r == 0)))
        res["tree"].append(run(tree, a, compare=False))
    first = res["installed"][0]
    gb = first["bytes"] / 1e9
    print(f"tensors: {first['tensors']}, unequal to the original: {first['unequal']}, "
          f"{gb:.2f} GB")
    med = {}
    for name, runs in res.items():
        times = [t for x in runs for t in x["times"]]
        med[name] = statistics.median(times)
        print(f"{name:9s} library {runs[0]['library']}\n          plugin  {runs[0]['plugin']}\n"
              f"          load_checkpoint(device={a.device!r}): median {med[name]:.3f} s of {len(times)} "
              f"({gb / med[name]:.1f} GB/s), min {min(times):.3f}, max {max(times):.3f}")
    print(f"installed / tree: {med['installed'] / med['tree']:.3f}")
    return 1 if first["unequal"] else 0


if __name__ == "__main__":
    sys.exit(main())
