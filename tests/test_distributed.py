"""wcodec.torch.load_checkpoint across the ranks of a torch.distributed
process group (gloo, device="cpu"), 2 and 3 ranks, each rank a process:

- replicated: every rank gets every tensor equal to the original's, and
  the bytes the ranks read (rchar of /proc/PID/task/TID/io around the call,
  over the main thread and libwcodec's threads: the transport's socket
  reads, which rchar also counts, are on torch's threads) add up to at
  most 1.05 times the packed files' size;
- tp_plan: colwise (dim 0) and rowwise (last dim) tensors of 1 to 3
  dimensions give rank r exactly tensor_split(world, dim)[r], the others
  whole; reads bounded the same way;
- a damaged payload raises WcodecError (CORRUPT, naming the tile) on every
  rank; a shard missing on one rank raises FileNotFoundError on every rank;
  neither hangs (each worker has 120 s).
With a GPU and the CUDA plugin, the same onto device="cuda:0" from 2 ranks
sharing it (gloo), and from one rank per GPU through NCCL (up to 4).

The checkpoint: two shards and an index, packed with 16 KiB tiles and
exchanged in rounds of 256 KiB, so units, shares and rows cut by tile
boundaries all occur. Each worker loads once before the measured load
(imports, threads, CPU detection read files too). The reference values are read from the original
shards by the safetensors layout, not by wcodec.

Usage: test_distributed.py SRCDIR WCODEC   (the built `wcodec` tool)
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

SRC, WCODEC = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(SRC, "python"))

PLAN = {"*.embed.weight": "colwise", "*.gate.weight": "colwise", "*.gate.bias": "colwise",
        "*.down.weight": "rowwise", "*.conv.weight": "rowwise", "*.o.weight": "rowwise", "*.vec": "rowwise"}
EXCHANGE = 256 << 10


def tensors_of(seed):
    """name -> (dtype name, torch tensor) of one shard."""
    import torch
    g = torch.Generator().manual_seed(seed)

    def w(*shape, dt=torch.bfloat16, s=0.02):
        return (torch.randn(*shape, generator=g) * s).to(dt)
    p = f"layer{seed}"
    return {
        f"{p}.embed.weight": w(6001, 64),                     # colwise, rows not a multiple of 2 or 3
        f"{p}.gate.weight": w(1300, 64),
        f"{p}.gate.bias": w(1300, dt=torch.float32),
        f"{p}.down.weight": w(1280, 130),                     # rowwise: 130 columns
        f"{p}.o.weight": w(64, 47, dt=torch.float16),         # rowwise, odd width
        f"{p}.conv.weight": w(5, 3, 7, 11),                   # rowwise 4-D
        f"{p}.vec": w(29, dt=torch.float32),                  # rowwise 1-D
        f"{p}.norm.weight": 1 + w(64, s=0.05),                # replicated
        f"{p}.up.weight": w(640, 64),                         # replicated
        f"{p}.ids": torch.arange(37, dtype=torch.int64),      # replicated
        f"{p}.scalar": torch.tensor(3.5, dtype=torch.float32),
        f"{p}.empty": torch.empty(0, 64, dtype=torch.bfloat16),
    }


DT = {"torch.bfloat16": "BF16", "torch.float16": "F16", "torch.float32": "F32", "torch.int64": "I64"}


def write_safetensors(path, tensors):
    import torch
    header, off, blobs = {}, 0, []
    for name, t in tensors.items():
        b = t.contiguous().view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": DT[str(t.dtype)], "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def originals(directory):
    """name -> torch tensor, parsed from the original shards' bytes."""
    import numpy as np
    import torch
    dts = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32, "I64": torch.int64}
    out = {}
    for n in sorted(os.listdir(directory)):
        if not n.endswith(".safetensors"):
            continue
        blob = open(os.path.join(directory, n), "rb").read()
        hl = struct.unpack_from("<Q", blob)[0]
        for k, v in json.loads(blob[8:8 + hl]).items():
            a, b = v["data_offsets"]
            if a == b:
                out[k] = torch.empty(v["shape"], dtype=dts[v["dtype"]])
                continue
            raw = torch.from_numpy(np.frombuffer(blob[8 + hl + a:8 + hl + b], dtype=np.uint8).copy())
            out[k] = raw.view(dts[v["dtype"]]).reshape(v["shape"])
    return out


def rchar():
    """Bytes read by read calls of this process's own threads: the main
    thread and libwcodec's (named wcodec-*), not torch.distributed's, whose
    socket reads rchar counts too."""
    total, pid = 0, os.getpid()
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            if int(tid) != pid and not name.startswith("wcodec"):
                continue
            with open(f"/proc/{pid}/task/{tid}/io") as f:
                total += int(next(x for x in f if x.startswith("rchar:")).split()[1])
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def worker(rank, world, init, scenario, directory, orig_dir, result, backend, device):
    import torch
    import torch.distributed as dist
    from datetime import timedelta
    import wcodec.torch as wt
    from wcodec import WcodecError
    device = device.replace("RANK", str(rank))
    if device.startswith("cuda"):
        torch.cuda.set_device(torch.device(device))
    dist.init_process_group(backend, init_method=f"file://{init}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=60))
    out = {"rank": rank}
    try:
        want = originals(orig_dir)
        plan = PLAN if scenario in ("tp", "tp-damaged") else None
        d = directory if scenario != "missing" or rank != world - 1 else directory + "-missing"
        if scenario in ("replicated", "tp"):  # imports, the pool's threads, CPU detection: not the files
            wt.load_checkpoint(d, device=device, process_group=dist.group.WORLD, tp_plan=plan, exchange_bytes=EXCHANGE)
        b1 = rchar()
        before = rchar()
        cost = before - b1  # what reading the counters reads
        t0 = time.monotonic()
        try:
            got = wt.load_checkpoint(d, device=device, process_group=dist.group.WORLD, tp_plan=plan,
                                     exchange_bytes=EXCHANGE)
            out["read"] = rchar() - before - cost
        except (WcodecError, FileNotFoundError) as e:
            out["raised"] = [type(e).__name__, getattr(e, "code", None), str(e), time.monotonic() - t0]
            got = None
        if got is not None:
            bad = []
            for name, t in want.items():
                mode = next((m for p, m in PLAN.items() if __import__("fnmatch").fnmatchcase(name, p)),
                            None) if plan and t.dim() else None
                ref = t if mode is None else t.tensor_split(world, 0 if mode == "colwise" else -1)[rank]
                g = got.get(name)
                g = g.cpu() if g is not None else None
                if g is None or g.dtype != ref.dtype or g.shape != ref.shape or not torch.equal(
                        g.view(-1).view(torch.uint8) if g.numel() else g, ref.contiguous().view(-1).view(torch.uint8)
                        if ref.numel() else ref):
                    bad.append(name)
            out["bad"] = bad
            out["n"] = len(got)
    finally:
        with open(result, "w") as f:
            json.dump(out, f)
        # every rank done before any tears the group down: a peer closing
        # its connections under another's gloo threads can abort that one
        dist.barrier()
        dist.destroy_process_group()


def run(world, scenario, directory, orig_dir, tmp, backend="gloo", device="cpu"):
    init = os.path.join(tmp, f"init-{scenario}-{world}")
    procs, results = [], []
    for r in range(world):
        res = os.path.join(tmp, f"res-{scenario}-{world}-{r}.json")
        results.append(res)
        procs.append(subprocess.Popen([sys.executable, __file__, SRC, WCODEC, "--worker", str(r), str(world), init,
                                       scenario, directory, orig_dir, res, backend, device]))
    for p in procs:
        try:
            p.wait(timeout=120)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise AssertionError(f"{scenario}, {world} ranks: a rank hung")
    outs = []
    for p, res in zip(procs, results):
        assert p.returncode == 0, f"{scenario}, {world} ranks: a worker exited {p.returncode}"
        outs.append(json.load(open(res)))
    if os.path.exists(init):
        os.unlink(init)
    return outs


def main():
    if "--worker" in sys.argv:
        i = sys.argv.index("--worker")
        a = sys.argv[i + 1:]
        worker(int(a[0]), int(a[1]), a[2], a[3], a[4], a[5], a[6], a[7], a[8])
        return 0
    try:
        import torch
        import torch.distributed as dist
        if not dist.is_available() or not dist.is_gloo_available():
            print("SKIP: torch has no gloo backend")
            return 77
    except ImportError:
        print("SKIP: no torch")
        return 77
    tmp = tempfile.mkdtemp(prefix="wc_distributed.")
    fails = []
    try:
        orig, packed = os.path.join(tmp, "orig"), os.path.join(tmp, "packed")
        os.makedirs(orig)
        shards = {"model-00001-of-00002.safetensors": tensors_of(1), "model-00002-of-00002.safetensors": tensors_of(2)}
        wmap = {}
        for n, ts in shards.items():
            write_safetensors(os.path.join(orig, n), ts)
            wmap.update({k: n for k in ts})
        with open(os.path.join(orig, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": wmap}, f)
        subprocess.run([WCODEC, "pack", "-q", "--tile-size", "16K", "-u", orig, packed], check=True)
        psize = sum(os.path.getsize(os.path.join(packed, n)) for n in os.listdir(packed) if n.endswith(".wcodec"))
        # a copy whose second shard is missing (for one rank), and one with a damaged payload
        shutil.copytree(packed, packed + "-missing")
        os.unlink(os.path.join(packed + "-missing", "model-00002-of-00002.wcodec"))
        damaged = os.path.join(tmp, "damaged")
        shutil.copytree(packed, damaged)
        victim = os.path.join(damaged, "model-00002-of-00002.wcodec")
        blob = bytearray(open(victim, "rb").read())
        payload_off = struct.unpack_from("<Q", blob, 64)[0]
        blob[payload_off + 100] ^= 0x10
        open(victim, "wb").write(bytes(blob))

        def check(ok, what):
            print(("PASS: " if ok else "FAIL: ") + what)
            if not ok:
                fails.append(what)

        configs = [(2, "gloo", "cpu"), (3, "gloo", "cpu")]
        if torch.cuda.is_available() and os.path.exists(os.path.join(os.environ.get("WCODEC_PLUGIN_DIR", "/nonexistent"),
                                                                      "wcodec-cuda.so")):
            # ranks sharing GPU 0 (gloo moves the packed bytes), and one rank a GPU through NCCL
            configs += [(2, "gloo", "cuda:0"), (min(torch.cuda.device_count(), 4), "nccl", "cuda:RANK")]
        else:
            print("# no GPU or no CUDA plugin: device='cuda' not checked")
        for world, backend, device in configs:
            on = f"{world} ranks ({backend}, {device.replace('RANK', 'r')})"
            for scenario in ("replicated", "tp"):
                outs = run(world, scenario, packed, orig, tmp, backend, device)
                bad = [(o["rank"], o.get("bad"), o.get("raised")) for o in outs if o.get("bad") or "raised" in o]
                check(not bad, f"{on}, {scenario}: every rank's {outs[0].get('n')} tensors equal the "
                               f"original's{' tensor_split' if scenario == 'tp' else ''}" + (f": {bad}" if bad else ""))
                read = sum(o.get("read", 0) for o in outs)
                if device == "cpu":  # the GPU loader's reader threads are not counted
                    check(read <= 1.05 * psize, f"{on}, {scenario}: the ranks read {read} bytes, "
                                                f"{read / psize:.3f} of the packed {psize}")
            for scenario, d, kind in (("damaged", damaged, "WcodecError"), ("tp-damaged", damaged, "WcodecError"),
                                      ("missing", packed, "FileNotFoundError")):
                outs = run(world, scenario, d, orig, tmp, backend, device)
                raised = [o.get("raised") for o in outs]
                ok = all(r and r[0] == kind for r in raised)
                if kind == "WcodecError":
                    ok = ok and all(r[1] == "CORRUPT" and "tile" in r[2] and "model-00002" in r[2] for r in raised)
                check(ok, f"{on}, {scenario}: every rank raised {kind} "
                          f"({raised[0][2][:120] if raised[0] else raised})")
    finally:
        shutil.rmtree(tmp)
    print(f"{'FAIL' if fails else 'PASS'}: test_distributed.py ({len(fails)} failures)")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
