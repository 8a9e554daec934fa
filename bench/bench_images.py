#!/usr/bin/env python3
"""bench_images.py - image batches from a .qvq archive into a training loop:
wcodec.torch.QVQLoader (batches of 256, shuffled, prefetched) on the CPU
backend and on the CUDA one, in images per second, against reading the
same images as PPM files with numpy (docs/BENCHMARKS.md, "Images from
Python"). Needs torch; a GPU for the cuda rows.

  bench_images.py gen DIR [--images 20000] [--size 224]
      Synthetic photographs-like RGB images (smooth colour fields, edges,
      noise) of size x size as PPM files in DIR/ppm/{0..9}/, packed by
      `wcodec pack-images -k 256` into DIR/set.qvq.
  bench_images.py run DIR [--epochs 2] [--batch 256] [--workers 4] [--only-cuda]
      Every row's pixels of one batch compared with the CPU's first.
"""
import argparse
import glob
import os
import subprocess
import sys
import time

import numpy as np
import torch

import wcodec.torch as wpt

try:
    from PIL import Image
except ImportError:
    Image = None


def gen(d, n, size):
    r = np.random.default_rng(1)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / size
    for i in range(n):
        sub = os.path.join(d, "ppm", str(i % 10))
        os.makedirs(sub, exist_ok=True)
        c = r.random((3, 3)) * 255
        img = np.stack([c[k, 0] * xx + c[k, 1] * yy + c[k, 2] * (1 - xx) for k in range(3)], -1)
        img[(xx - r.random()) ** 2 + (yy - r.random()) ** 2 < r.random() * 0.1] *= 0.4
        img += r.normal(0, 6, img.shape)
        a = np.clip(img, 0, 255).astype(np.uint8)
        with open(os.path.join(sub, "%06d.ppm" % i), "wb") as f:
            f.write(b"P6\n%d %d\n255\n" % (size, size) + a.tobytes())
        if Image is not None:  # the JPEG baseline's copy, quality 90
            jd = os.path.join(d, "jpeg", str(i % 10))
            os.makedirs(jd, exist_ok=True)
            Image.fromarray(a).save(os.path.join(jd, "%06d.jpg" % i), quality=90)
    subprocess.run([os.environ.get("WCODEC", "wcodec"), "pack-images", "-q", "-f", "-k", "256",
                    os.path.join(d, "ppm"), os.path.join(d, "set.qvq")], check=True)


def rate(loader, epochs, sync):
    n = 0
    t0 = time.perf_counter()
    for _ in range(epochs):
        for imgs, labels in loader:
            n += len(labels)
    sync()
    return n / (time.perf_counter() - t0)


def run(d, epochs, batch, workers, only_cuda):
    qvq = os.path.join(d, "set.qvq")
    files = sorted(glob.glob(os.path.join(d, "ppm", "*", "*.ppm")))
    rows = []
    ref, _ = wpt.load_images(qvq, range(batch), device="cpu")
    t0 = time.perf_counter()
    for f in files[:4096]:
        with open(f, "rb") as fh:
            np.frombuffer(fh.read()[-224 * 224 * 3:], dtype=np.uint8)
    rows.append(("PPM files, numpy (page cache)", min(len(files), 4096) / (time.perf_counter() - t0)))
    jpeg = os.path.join(d, "jpeg")
    if os.path.isdir(jpeg):
        try:
            import torchvision
            ds = torchvision.datasets.ImageFolder(jpeg, transform=torchvision.transforms.PILToTensor())
            dl = torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=True, num_workers=16,
                                             persistent_workers=True)
            rate(dl, 1, lambda: None)
            rows.append(("JPEG q=90, torch DataLoader, 16 workers (PIL)", rate(dl, epochs, lambda: None)))
        except ImportError:
            pass
    cases = [] if only_cuda else [("cpu", "cpu", "cpu")]
    if torch.cuda.is_available():
        cases.append(("cuda", "cuda", "cuda"))
    for name, device, backend in cases:
        ld = wpt.QVQLoader(qvq, batch_size=batch, shuffle=True, seed=0, device=device, backend=backend,
                           workers=workers, prefetch=max(4, workers))
        sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        rate(ld, 1, sync)  # warm: the backend starts, the archive is in the page cache
        rows.append((f"QVQLoader, {name} backend, uint8 NCHW on {device}", rate(ld, epochs, sync)))
        f32 = wpt.QVQLoader(qvq, batch_size=batch, shuffle=True, seed=0, device=device, backend=backend,
                            workers=workers, prefetch=max(4, workers),
                            dtype=torch.float32, mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25))
        rows.append((f"QVQLoader, {name} backend, float32 normalised on {device}", rate(f32, epochs, sync)))
        got, _ = wpt.load_images(qvq, range(batch), device=device, backend=backend)
        assert torch.equal(got.cpu(), ref), f"{name}: pixels differ from the CPU's"
    print(f"archive: {qvq}, {len(files)} images, {os.path.getsize(qvq)} bytes; "
          f"CPUs {os.cpu_count()}, GPU {torch.cuda.get_device_name() if torch.cuda.is_available() else '-'}")
    print("| reader | images/s |\n|---|---:|")
    for name, r in rows:
        print(f"| {name} | {r:,.0f} |")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen")
    g.add_argument("dir")
    g.add_argument("--images", type=int, default=20000)
    g.add_argument("--size", type=int, default=224)
    r = sub.add_parser("run")
    r.add_argument("dir")
    r.add_argument("--epochs", type=int, default=2)
    r.add_argument("--batch", type=int, default=256)
    r.add_argument("--workers", type=int, default=4, help="QVQLoader's decoding threads")
    r.add_argument("--only-cuda", action="store_true", help="the GPU rows alone")
    a = p.parse_args()
    if a.cmd == "gen":
        gen(a.dir, a.images, a.size)
    else:
        run(a.dir, a.epochs, a.batch, a.workers, a.only_cuda)


if __name__ == "__main__":
    sys.exit(main())
