#!/usr/bin/env python3
"""qvq_check.py - helpers of the .qvq shell tests (tests/qvq_*.sh).

  make-images DIR          small deterministic images of every input kind:
                           PNG (RGB, RGBA, palette, grey, 16-bit), JPEG (colour,
                           grey), PPM, PGM; odd and even sides; two label dirs
  shown DIR ORIG MIN_PSNR  every ORIG image has DIR/<name>.ppm, readable by PIL,
                           of the same size, within MIN_PSNR dB of the original
  npy DIR N H W            DIR/images.npy loads with np.load(mmap_mode='r') as
                           (N, H, W, 3) uint8 and equals the PPMs, in name order
  labels DIR               DIR/labels.txt has one line per image: its first
                           directory (ImageFolder labels)
  same DIR_A DIR_B         both trees hold the same files with the same bytes
  mmap FILE                the file's bytes through mmap equal those through read
  damage ARCHIVE TILE      flip a byte inside tile TILE's payload (the archive
                           still opens; that tile fails its checksum)
  tile-images ARCHIVE TILE the names of the images of tile TILE, one a line
"""
import mmap
import os
import struct
import sys

import numpy as np
from PIL import Image

EXTS = (".png", ".jpg", ".jpeg", ".ppm", ".pgm")


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def picture(w, h, seed):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    a = np.stack([x * 255 // max(w - 1, 1), y * 255 // max(h - 1, 1),
                  ((x + y) * (seed + 2)) % 256], -1).astype(np.float64)
    a += rng.normal(0, 6, a.shape)
    return np.clip(a, 0, 255).astype(np.uint8)


def make_images(d):
    os.makedirs(os.path.join(d, "cats"), exist_ok=True)
    os.makedirs(os.path.join(d, "dogs", "small"), exist_ok=True)
    j = lambda *p: os.path.join(d, *p)
    Image.fromarray(picture(40, 30, 1)).save(j("cats", "rgb.png"))
    Image.fromarray(picture(33, 21, 2)).convert("RGBA").save(j("cats", "alpha.png"))
    Image.fromarray(picture(26, 26, 3)).convert("P", palette=Image.ADAPTIVE).save(j("cats", "pal.png"))
    Image.fromarray(picture(31, 17, 4)[:, :, 0]).save(j("cats", "grey.png"))
    g16 = (picture(20, 24, 5)[:, :, 1].astype(np.uint16) * 257)
    Image.fromarray(g16).save(j("cats", "grey16.png"))
    Image.fromarray(picture(45, 35, 6)).save(j("dogs", "photo.jpg"), quality=92)
    Image.fromarray(picture(29, 19, 7)[:, :, 2]).save(j("dogs", "grey.JPEG"), quality=92)
    Image.fromarray(picture(23, 27, 8)).save(j("dogs", "small", "p6.ppm"))
    Image.fromarray(picture(18, 13, 9)[:, :, 0]).save(j("dogs", "small", "p5.pgm"))
    with open(j("dogs", "notes.txt"), "w") as f:
        f.write("not an image\n")


def make_cmyk(d):
    """Two small CMYK JPEGs (PIL writes them Adobe-inverted, as Photoshop
    does), few enough distinct 2x2 patches for a codebook of 256 to hold
    every one, so the archive reproduces exactly what the loader decoded."""
    os.makedirs(d, exist_ok=True)
    a = picture(8, 6, 10)
    Image.fromarray(a).convert("CMYK").save(os.path.join(d, "cmyk.jpg"), quality=95)
    k = np.zeros((4, 6, 4), np.uint8)
    k[..., 0], k[..., 1], k[..., 2] = 30, 200, 90
    k[..., 3] = np.arange(24, dtype=np.uint8).reshape(4, 6) * 10  # real black
    Image.fromarray(k, "CMYK").save(os.path.join(d, "black.jpg"), quality=95)


def exact(d, orig):
    """Every image under orig, as PIL's convert("RGB") gives it, equals its
    PPM under d byte for byte."""
    names = originals(orig)
    for rel in names:
        with Image.open(os.path.join(orig, rel)) as im:
            ref = np.asarray(im.convert("RGB"))
        with Image.open(os.path.join(d, shown_name(rel))) as im:
            got = np.asarray(im)
        if got.shape != ref.shape or not np.array_equal(got, ref):
            bad = np.argwhere(got != ref) if got.shape == ref.shape else "shape"
            fail("%s differs from PIL's RGB: %s" % (rel, bad[:4] if len(bad) else bad))
    print("# %d images equal PIL's" % len(names))


def originals(orig):
    out = []
    for root, dirs, files in os.walk(orig):
        dirs[:] = [x for x in dirs if not x.startswith(".")]
        for f in files:
            if f.lower().endswith(EXTS) and not f.startswith("."):
                out.append(os.path.relpath(os.path.join(root, f), orig))
    return sorted(out, key=lambda s: s.encode())


def shown_name(rel):
    head, base = os.path.split(rel)
    dot = base.rfind(".")
    if dot > 0:
        base = base[:dot]
    return os.path.join(head, base + ".ppm")


def psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return 99.0 if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)


def shown(d, orig, min_psnr):
    names = originals(orig)
    if not names:
        fail("no original images under " + orig)
    for rel in names:
        p = os.path.join(d, shown_name(rel))
        if not os.path.exists(p):
            fail("missing " + p)
        with Image.open(p) as im:
            if im.format != "PPM" or im.mode != "RGB":
                fail("%s: %s %s, not an RGB PPM" % (p, im.format, im.mode))
            got = np.asarray(im)
        with Image.open(os.path.join(orig, rel)) as im:
            if im.mode == "I;16" or im.mode == "I":
                ref = (np.asarray(im).astype(np.float64) / 257.0).round().astype(np.uint8)
                ref = np.stack([ref] * 3, -1)
            else:
                ref = np.asarray(im.convert("RGB"))
        if got.shape != ref.shape:
            fail("%s: shape %s, original %s" % (p, got.shape, ref.shape))
        q = psnr(got, ref)
        if q < min_psnr:
            fail("%s: PSNR %.2f dB below %s" % (p, q, min_psnr))
        size = os.path.getsize(p)
        hdr = b"P6\n%d %d\n255\n" % (ref.shape[1], ref.shape[0])
        if size != len(hdr) + ref.size:
            fail("%s: %d bytes, expected %d" % (p, size, len(hdr) + ref.size))
        with open(p, "rb") as f:
            if f.read(len(hdr)) != hdr:
                fail(p + ": PPM header")
    print("# %d images shown, PSNR >= %s dB" % (len(names), min_psnr))


def ppm_files(d):
    out = []
    for root, _, files in os.walk(d):
        for f in files:
            if f.endswith(".ppm"):
                out.append(os.path.relpath(os.path.join(root, f), d))
    return out


def npy(d, n, h, w):
    a = np.load(os.path.join(d, "images.npy"), mmap_mode="r")
    if not isinstance(a, np.memmap):
        fail("images.npy was not memory-mapped")
    if a.shape != (n, h, w, 3) or a.dtype != np.uint8:
        fail("images.npy: %s %s" % (a.shape, a.dtype))
    # Archive order: sorted original names; the PPM names sort the same way
    # here (no two differ only by extension).
    ppms = sorted(ppm_files(d), key=lambda s: s.encode())
    if len(ppms) != n:
        fail("%d PPM files, images.npy holds %d" % (len(ppms), n))
    for i, rel in enumerate(ppms):
        with Image.open(os.path.join(d, rel)) as im:
            if not np.array_equal(np.asarray(im), a[i]):
                fail("images.npy[%d] differs from %s" % (i, rel))
    print("# images.npy (%d, %d, %d, 3) mmapped, equals the PPMs" % (n, h, w))


def labels(d):
    ppms = sorted(ppm_files(d), key=lambda s: s.encode())
    with open(os.path.join(d, "labels.txt")) as f:
        lines = f.read().split("\n")
    if lines[-1] != "" or len(lines) - 1 != len(ppms):
        fail("labels.txt: %d lines for %d images" % (len(lines) - 1, len(ppms)))
    for rel, lab in zip(ppms, lines):
        if rel.split("/")[0] != lab:
            fail("labels.txt: %s labelled %r" % (rel, lab))
    print("# labels.txt: %d labels" % len(ppms))


def tree(d):
    out = {}
    for root, _, files in os.walk(d):
        for f in files:
            p = os.path.join(root, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, d)] = fh.read()
    return out


def same(a, b):
    ta, tb = tree(a), tree(b)
    if sorted(ta) != sorted(tb):
        fail("file lists differ: %s vs %s" % (sorted(ta), sorted(tb)))
    for k in ta:
        if ta[k] != tb[k]:
            fail(k + ": bytes differ")
    print("# %d files identical" % len(ta))


def mmap_check(path):
    with open(path, "rb") as f:
        data = f.read()
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        if m[:] != data:
            fail(path + ": mmap bytes differ from read bytes")
        m.close()
    print("# mmap of %s: %d bytes equal" % (path, len(data)))


def header(b):
    if b[:8] != b"WCQVQ\r\n\x1a":
        fail("not a .qvq archive")
    return struct.unpack_from("<IIIIII", b, 20)  # entries, nimages, ntiles, chunk, ntables, ...


def tile_record(b, t):
    nimages, ntiles = struct.unpack_from("<II", b, 24)
    tiles_off = struct.unpack_from("<Q", b, 88)[0]
    if t >= ntiles:
        fail("tile %d of %d" % (t, ntiles))
    return struct.unpack_from("<QIIIII", b, tiles_off + 48 * t)


def damage(path, t):
    b = bytearray(open(path, "rb").read())
    header(b)
    coff, csize = tile_record(b, t)[:2]
    b[coff + csize - 1] ^= 0x5A
    open(path, "wb").write(bytes(b))


def tile_images(path, t):
    b = open(path, "rb").read()
    header(b)
    first, count = tile_record(b, t)[3:5]
    images_off = struct.unpack_from("<Q", b, 80)[0]
    strings_off = struct.unpack_from("<Q", b, 96)[0]
    for i in range(first, first + count):
        noff, nlen = struct.unpack_from("<II", b, images_off + 24 * i + 12)
        print(shown_name(b[strings_off + noff:strings_off + noff + nlen].decode()))


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "make-images":
        make_images(args[0])
    elif cmd == "make-cmyk":
        make_cmyk(args[0])
    elif cmd == "exact":
        exact(args[0], args[1])
    elif cmd == "shown":
        shown(args[0], args[1], float(args[2]))
    elif cmd == "npy":
        npy(args[0], int(args[1]), int(args[2]), int(args[3]))
    elif cmd == "labels":
        labels(args[0])
    elif cmd == "same":
        same(args[0], args[1])
    elif cmd == "mmap":
        mmap_check(args[0])
    elif cmd == "damage":
        damage(args[0], int(args[1]))
    elif cmd == "tile-images":
        tile_images(args[0], int(args[1]))
    else:
        fail("unknown command " + cmd)


if __name__ == "__main__":
    sys.dont_write_bytecode = True
    main()
