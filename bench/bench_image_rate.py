#!/usr/bin/env python3
"""bench_image_rate.py - bits per pixel against PSNR of .qvq archives and of
JPEG on the same 224x224 crops (docs/BENCHMARKS.md, "Image archives: size
and quality"). Needs numpy and PIL.

  bench_image_rate.py crops PHOTODIR DIR [--per 16] [--seed 1]
      --per random squares of each photograph under PHOTODIR (JPEG and PNG,
      recursively; 1/2 to all of its shorter side, resized to 224x224,
      bilinear) as PPM files in DIR.
  bench_image_rate.py run DIR [--qualities 50,75,85,90,95] [--codebook 4096]
      For each JPEG quality q (PIL, libjpeg-turbo; plain and optimized
      Huffman tables): its bits/pixel and PSNR over all pixels; then
      `wcodec pack-images --psnr P` with P JPEG's PSNR at q (one image a
      tile, as loaders read them) and `--quality q`: bits/pixel (file
      bytes, tables and names included) and PSNR of the archive's own
      decode (`wcodec unpack`, images.npy). With --codebook K > 0 the
      codebook mode's row (K entries) too. Prints a markdown table.
Environment: WCODEC (default: wcodec from PATH).
"""
import argparse
import glob
import io
import os
import subprocess
import sys
import tempfile

import numpy as np
from PIL import Image

SIZE = 224


def crops(photos, out, per, seed):
    files = sorted(f for f in glob.glob(os.path.join(photos, "**", "*"), recursive=True)
                   if f.lower().endswith((".jpg", ".jpeg", ".png")))
    if not files:
        sys.exit(f"no JPEG or PNG under {photos}")
    os.makedirs(out, exist_ok=True)
    r = np.random.default_rng(seed)
    n = 0
    for f in files:
        im = Image.open(f).convert("RGB")
        w, h = im.size
        for _ in range(per):
            side = int(min(w, h) * r.uniform(0.5, 1.0))
            x, y = int(r.integers(0, w - side + 1)), int(r.integers(0, h - side + 1))
            c = im.crop((x, y, x + side, y + side)).resize((SIZE, SIZE), Image.BILINEAR)
            c.save(os.path.join(out, "crop%05d.ppm" % n))
            n += 1
    print(f"{n} crops of {len(files)} photographs in {out}")


def psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return 10 * np.log10(255.0 ** 2 / mse)


def archive(wcodec, d, src, args, tmp):
    out = os.path.join(tmp, "a.qvq")
    subprocess.run([wcodec, "pack-images", "-q", "-f", "--tile-size", str(SIZE * SIZE * 3)] + args + [d, out],
                   check=True, stdout=subprocess.DEVNULL)
    un = os.path.join(tmp, "un")
    subprocess.run(["rm", "-rf", un], check=True)
    subprocess.run([wcodec, "unpack", "-q", out, un], check=True)
    dec = np.load(os.path.join(un, "images.npy"))
    return 8.0 * os.path.getsize(out) / (src.shape[0] * SIZE * SIZE), psnr(dec, src)


def run(d, qualities, k):
    wcodec = os.environ.get("WCODEC", "wcodec")
    names = sorted(glob.glob(os.path.join(d, "*.ppm")))
    src = np.stack([np.asarray(Image.open(f).convert("RGB")) for f in names])
    px = src.shape[0] * SIZE * SIZE
    print(f"{len(names)} crops of {SIZE}x{SIZE}\n")
    print("| JPEG q | JPEG bits/pixel (optimized) | JPEG PSNR dB | `--psnr` JPEG's: bits/pixel | PSNR dB | "
          "ratio to JPEG (optimized) | `--quality q`: bits/pixel | PSNR dB |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for q in qualities:
            jb, jo, dec = 0, 0, []
            for a in src:
                for opt in (False, True):
                    buf = io.BytesIO()
                    Image.fromarray(a).save(buf, "JPEG", quality=q, optimize=opt)
                    if opt:
                        jo += buf.tell()
                    else:
                        jb += buf.tell()
                        dec.append(np.asarray(Image.open(io.BytesIO(buf.getvalue())).convert("RGB")))
            jbpp, jobpp, jdb = 8.0 * jb / px, 8.0 * jo / px, psnr(np.stack(dec), src)
            pb, pdb = archive(wcodec, d, src, ["--psnr", "%.4f" % jdb], tmp)
            qb, qdb = archive(wcodec, d, src, ["--quality", str(q)], tmp)
            print(f"| {q} | {jbpp:.3f} ({jobpp:.3f}) | {jdb:.2f} | {pb:.3f} | {pdb:.2f} | {pb / jbpp:.3f} "
                  f"({pb / jobpp:.3f}) | {qb:.3f} | {qdb:.2f} |", flush=True)
        if k:
            b, db = archive(wcodec, d, src, ["--codebook", str(k), "--seed", "1"], tmp)
            print(f"\ncodebook mode, K={k}: {b:.3f} bits/pixel, {db:.2f} dB")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("crops")
    c.add_argument("photos")
    c.add_argument("dir")
    c.add_argument("--per", type=int, default=16)
    c.add_argument("--seed", type=int, default=1)
    r = sub.add_parser("run")
    r.add_argument("dir")
    r.add_argument("--qualities", default="50,75,85,90,95")
    r.add_argument("--codebook", type=int, default=4096)
    a = ap.parse_args()
    if a.cmd == "crops":
        crops(a.photos, a.dir, a.per, a.seed)
    else:
        run(a.dir, [int(q) for q in a.qualities.split(",")], a.codebook)


if __name__ == "__main__":
    main()
