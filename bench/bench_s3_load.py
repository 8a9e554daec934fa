"""bench_s3_load.py - seconds for wcodec.torch.load_checkpoint of
checkpoints under S3 prefixes onto a device (docs/BENCHMARKS.md, "Object
stores"; the GPU machine's figure), the configuration from the AWS_*
variables as for any s3:// name.

    python3 bench/bench_s3_load.py --device cuda s3://models/packed/ s3://models/orig/ [--repeat 3]

Prints, per prefix, the median and each time, the bytes of its objects and
the rate in those bytes; the first load of each prefix is a warm-up (the
server's own caches), not counted. The tensors of the prefixes are compared
(bit for bit) so a faster load cannot be a wrong one."""
import argparse
import statistics
import time

import torch

import wcodec.torch as wt
from wcodec._file import list_objects


def same(a, b):
    """Bit for bit (torch.equal fails on NaN)."""
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(
        a.contiguous().view(-1).view(torch.uint8), b.contiguous().view(-1).view(torch.uint8))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("prefixes", nargs="+")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    first = None
    for prefix in args.prefixes:
        size = sum(n for k, n in list_objects(prefix) if k.endswith((".wcodec", ".safetensors")))
        out = wt.load_checkpoint(prefix, device=args.device)
        if first is None:
            first = out
        else:
            assert set(out) == set(first) and all(same(out[k], first[k]) for k in out), prefix
        del out
        times = []
        for _ in range(args.repeat):
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            out = wt.load_checkpoint(prefix, device=args.device)
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
            del out
        med = statistics.median(times)
        print(f"{prefix}: {med:.3f} s median ({', '.join(f'{t:.3f}' for t in times)}), "
              f"{size / 1e6:.1f} MB of objects, {size / med / 1e6:.0f} MB/s", flush=True)


if __name__ == "__main__":
    main()
