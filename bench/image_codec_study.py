"""image_codec_study.py - what a transform codec for .qvq archives could
reach against JPEG (docs/BENCHMARKS.md, "Image archives"): 224x224 crops of
photographs, JPEG by PIL (libjpeg-turbo) at qualities 50-95, against 8x8
DCT coding of YCbCr 4:2:0 (chroma upsampled by libjpeg's triangle filter)
with JPEG's quantisation tables scaled as libjpeg scales them (the IJG
formula), or with one flat step for every coefficient, whose coefficients
are priced by static tables learnt on other photographs: the archive's case, where one set of
rANS frequency tables serves every image.

    python3 bench/image_codec_study.py PHOTODIR [--crops 8] [--seed 1]

The photographs (contrib/fetch-photos.sh) are split in two by their sorted
order: the even ones train the tables, the odd ones are coded with them
(held out). Each crop is a random square of at least 224 pixels, resized
to 224x224 (bilinear). Figures over the held-out crops: bits per pixel
(file bytes for JPEG; for the DCT coder the cross-entropy of the quantised
coefficients under the learnt tables, in bits, which an rANS coder with
those tables reaches within about 1%) and PSNR over all pixels (one MSE
over every channel of every crop).

Contexts priced (each a static table per context, learnt on the training
half; values beyond +-1023 are an escape priced at 24 bits):
  k:      the component (luma, chroma) and the coefficient's zigzag index
          (DC as the difference to the previous block's DC);
  k+nbr:  also the magnitude of the same coefficient in the block above
          and the block to the left, in 4 buckets (0, 1, 2-3, 4+): a
          decoder must then go block after block within an image (images
          stay independent of each other).
  stream: what a GPU decoder of the existing rANS chunks (docs/FORMAT.md
          4: 12-bit frequencies, 256-symbol alphabets) can decode with every
          symbol's table known from its place alone: every coefficient of
          every block coded (DC as the difference), values of magnitude up
          to 14 as symbols of their own, larger ones as an escape symbol of
          their size class (exp-Golomb: class c for |v| - 15 in
          [2^c - 1, 2^(c+1) - 1)) followed by c raw bits; one table per
          band of zigzag positions per component (--bands: the classes'
          first positions), frequencies normalised to 4096 with every
          symbol at least 1: the bits are those an rANS coder with these
          tables writes, within about 1%.
"""
import argparse
import glob
import io
import os
import random

import numpy as np
from PIL import Image

SIZE = 224
LUMA = np.array([16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55, 14, 13, 16, 24, 40, 57, 69, 56,
                 14, 17, 22, 29, 51, 87, 80, 62, 18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81, 104, 113, 92,
                 49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99], float).reshape(8, 8)
CHROMA = np.array([17, 18, 24, 47, 99, 99, 99, 99, 18, 21, 26, 66, 99, 99, 99, 99, 24, 26, 56, 99, 99, 99, 99, 99,
                   47, 66, 99, 99, 99, 99, 99, 99] + [99] * 32, float).reshape(8, 8)
LIMIT, ESCAPE_BITS = 1023, 24.0


def zigzag():
    order = sorted(((i, j) for i in range(8) for j in range(8)),
                   key=lambda p: (p[0] + p[1], p[1] if (p[0] + p[1]) % 2 else p[0]))
    return np.array([i * 8 + j for i, j in order])


ZZ = zigzag()
C8 = np.array([[np.sqrt((1 if k == 0 else 2) / 8) * np.cos((2 * n + 1) * k * np.pi / 16) for n in range(8)]
               for k in range(8)])


def qtable(base, q):
    """The IJG scaling of a quantisation table to quality q (jcparam.c)."""
    s = 5000 / q if q < 50 else 200 - 2 * q
    return np.clip(np.floor((base * s + 50) / 100), 1, 255)


def crops(files, n, rng):
    out = []
    for f in files:
        im = Image.open(f).convert("RGB")
        w, h = im.size
        for _ in range(n):
            side = rng.randint(SIZE, min(w, h))
            x, y = rng.randint(0, w - side), rng.randint(0, h - side)
            out.append(np.asarray(im.crop((x, y, x + side, y + side)).resize((SIZE, SIZE), Image.BILINEAR)))
    return out


def to_ycc(rgb):
    r, g, b = [rgb[..., i].astype(float) for i in range(3)]
    y = 0.299 * r + 0.587 * g + 0.114 * b
    return y, 128 - 0.168736 * r - 0.331264 * g + 0.5 * b, 128 + 0.5 * r - 0.418688 * g - 0.081312 * b


def to_rgb(y, cb, cr):
    r = y + 1.402 * (cr - 128)
    g = y - 0.344136 * (cb - 128) - 0.714136 * (cr - 128)
    b = y + 1.772 * (cb - 128)
    return np.clip(np.rint(np.stack([r, g, b], -1)), 0, 255).astype(np.uint8)


def blocks(plane):
    h, w = plane.shape
    return plane.reshape(h // 8, 8, w // 8, 8).transpose(0, 2, 1, 3)


def unblocks(b):
    bh, bw = b.shape[:2]
    return b.transpose(0, 2, 1, 3).reshape(bh * 8, bw * 8)


def code_plane(plane, qt):
    """Quantised DCT coefficients (bh, bw, 64 in zigzag order) and the plane decoded from them."""
    b = blocks(plane - 128)
    coef = C8 @ b @ C8.T
    q = np.rint(coef / qt).astype(np.int64)
    rec = unblocks(C8.T @ (q * qt) @ C8) + 128
    return q.reshape(q.shape[0], q.shape[1], 64)[..., ZZ], rec


def upsample(p):
    """2x chroma upsampling, each output sample 3/4 of its nearest input and
    1/4 of the next one in each direction (libjpeg's "fancy" triangle
    filter), edges replicated."""
    def one(a, axis):
        prev = np.concatenate([np.take(a, [0], axis), np.take(a, range(a.shape[axis] - 1), axis)], axis)
        nxt = np.concatenate([np.take(a, range(1, a.shape[axis]), axis), np.take(a, [-1], axis)], axis)
        even, odd = 0.75 * a + 0.25 * prev, 0.75 * a + 0.25 * nxt
        return np.stack([even, odd], axis + 1).reshape(*a.shape[:axis], -1, *a.shape[axis + 1:])
    return one(one(p, 0), 1)


def encode(rgb, q, mode="jpeg"):
    """(coefficient arrays per component, decoded RGB) of one crop: mode
    "jpeg": JPEG's tables at quality q, chroma upsampled as libjpeg does;
    "flat": one quantisation step q for every luma coefficient, 1.5 q for
    chroma (the MSE-optimal shape at high rate: the DCT is orthonormal)."""
    y, cb, cr = to_ycc(rgb)
    sub = lambda p: p.reshape(SIZE // 2, 2, SIZE // 2, 2).mean((1, 3))
    tl, tc = (qtable(LUMA, q), qtable(CHROMA, q)) if mode == "jpeg" else (np.full((8, 8), q), np.full((8, 8), 1.5 * q))
    qy, ry = code_plane(y, tl)
    qb, rb = code_plane(sub(cb), tc)
    qr, rr = code_plane(sub(cr), tc)
    return [(0, qy), (1, qb), (1, qr)], to_rgb(ry, upsample(rb), upsample(rr))


def symbols(comps, nbr):
    """(context id, value) arrays of a crop's coefficients."""
    ctx, val = [], []
    for cls, q in comps:
        q = q.copy()
        dc = q[..., 0].reshape(-1)
        q.reshape(-1, 64)[:, 0] = np.diff(dc, prepend=0)  # DC as a difference, in raster order
        k = np.broadcast_to(np.arange(64), q.shape)
        c = cls * 64 + k
        if nbr:
            a = np.abs(q)
            up = np.zeros_like(a)
            left = np.zeros_like(a)
            up[1:] = a[:-1]
            left[:, 1:] = a[:, :-1]
            s = up + left
            bucket = np.select([s == 0, s == 1, s <= 3], [0, 1, 2], 3)
            c = c * 4 + bucket
        ctx.append(c.reshape(-1))
        val.append(q.reshape(-1))
    return np.concatenate(ctx), np.concatenate(val)


def price(train, test, nctx):
    """Bits of test's symbols under tables learnt on train (each context's
    counts plus one for every value seen anywhere in it, so no symbol has
    probability 0), escapes at ESCAPE_BITS."""
    tc, tv = train
    width = 2 * LIMIT + 1
    counts = np.zeros((nctx, width))
    np.add.at(counts, (tc, np.clip(tv, -LIMIT, LIMIT) + LIMIT), 1)
    counts += 1e-3 + (counts.sum(0, keepdims=True) > 0)  # add-one over values seen at all
    logp = np.log2(counts / counts.sum(1, keepdims=True))
    c, v = test
    esc = np.abs(v) > LIMIT
    return float(-logp[c, np.clip(v, -LIMIT, LIMIT) + LIMIT].sum() + esc.sum() * ESCAPE_BITS)


def stream_symbols(comps, bands):
    """(table id, symbol, raw bits) arrays of a crop's coefficients for the
    "stream" coding (see the module's docstring)."""
    tab, sym, raw = [], [], []
    band_of = np.searchsorted(np.array(bands), np.arange(64), side="right") - 1
    for cls, q in comps:
        q = q.copy()
        dc = q[..., 0].reshape(-1)
        q.reshape(-1, 64)[:, 0] = np.diff(dc, prepend=0)
        v = q.reshape(-1, 64)
        t = np.broadcast_to(cls * len(bands) + band_of, v.shape)
        a = np.abs(v)
        small = a <= 14
        s_small = np.where(v == 0, 0, 2 * a - (v < 0))
        m = np.maximum(a - 15, 0)
        c = np.floor(np.log2(m + 1)).astype(np.int64)
        s_big = 29 + 2 * c + (v < 0)
        tab.append(t.reshape(-1))
        sym.append(np.where(small, s_small, s_big).reshape(-1))
        raw.append(np.where(small, 0, c).reshape(-1))
    return np.concatenate(tab), np.concatenate(sym), np.concatenate(raw)


def normalise(counts, total=4096):
    """12-bit frequencies of each row of counts, every symbol at least 1."""
    n = counts.shape[1]
    f = 1 + np.floor(counts / np.maximum(counts.sum(1, keepdims=True), 1) * (total - n)).astype(np.int64)
    short = total - f.sum(1)
    f[np.arange(len(f)), counts.argmax(1)] += short
    return f


def stream_price(train, test, ntab, nsym=64, total=4096):
    tt, ts, _ = train
    counts = np.zeros((ntab, nsym))
    np.add.at(counts, (tt, ts), 1)
    f = normalise(counts, total)
    t, sy, raw = test
    return float(np.log2(total / f[t, sy]).sum() + raw.sum())


def psnr(a, b):
    mse = np.mean((np.stack(a).astype(float) - np.stack(b).astype(float)) ** 2)
    return 10 * np.log10(255 ** 2 / mse)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("photos")
    ap.add_argument("--crops", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--bands", type=int, nargs="+", default=[0, 1, 3, 6, 10, 15, 21, 28, 36, 45],
                    help="first zigzag position of each table's band (stream coding)")
    ap.add_argument("--steps", type=float, nargs="+", default=[4, 6, 8, 10, 12, 14, 16, 20, 24])
    ap.add_argument("--only-stream", action="store_true", help="JPEG and the stream coding only")
    ap.add_argument("--dump", help="write the held-out crops here as PPM (for bench/qvq_tx_bench)")
    ap.add_argument("--prob-bits", type=int, nargs="+", default=[12],
                    help="frequency precisions of the stream coding's tables (12: the format's)")
    a = ap.parse_args()
    files = sorted(glob.glob(os.path.join(a.photos, "**", "*.jp*g"), recursive=True))
    rng = random.Random(a.seed)
    train, test = crops(files[0::2], a.crops, rng), crops(files[1::2], a.crops, rng)
    px = len(test) * SIZE * SIZE
    if a.dump:
        os.makedirs(a.dump, exist_ok=True)
        for i, im in enumerate(test):
            Image.fromarray(im).save(os.path.join(a.dump, f"crop{i:04d}.ppm"))
    print(f"{len(files)} photographs: {len(train)} training crops, {len(test)} held-out crops of {SIZE}x{SIZE}")
    print("| coder | quality | bits/pixel | PSNR (dB) |")
    print("|---|---:|---:|---:|")
    jpeg = {}
    for q in (50, 75, 85, 90, 95):
        for opt in (False, True):
            bits, dec = 0, []
            for im in test:
                buf = io.BytesIO()
                Image.fromarray(im).save(buf, "JPEG", quality=q, optimize=opt)
                bits += 8 * buf.tell()
                dec.append(np.asarray(Image.open(io.BytesIO(buf.getvalue())).convert("RGB")))
            jpeg[(q, opt)] = (bits / px, psnr(test, dec))
            print(f"| JPEG{' optimized' if opt else ''} | {q} | {bits / px:.3f} | {jpeg[(q, opt)][1]:.2f} |",
                  flush=True)
    runs = [("jpeg", q) for q in (50, 75, 90, 95)] + [("flat", q) for q in a.steps]
    ntab = 2 * len(a.bands)
    for q in a.steps:
        tr = [stream_symbols(encode(im, q, "flat")[0], a.bands) for im in train]
        tr = tuple(np.concatenate([t[i] for t in tr]) for i in range(3))
        enc = [encode(im, q, "flat") for im in test]
        te = [stream_symbols(e[0], a.bands) for e in enc]
        te = tuple(np.concatenate([t[i] for t in te]) for i in range(3))
        for pbits in a.prob_bits:
            bits = stream_price(tr, te, ntab, total=1 << pbits)
            print(f"| DCT, flat step, stream ({ntab} tables of {pbits}-bit frequencies, {len(te[0]) // len(test)} "
                  f"symbols an image) | {q} | {bits / px:.3f} | {psnr(test, [e[1] for e in enc]):.2f} |", flush=True)
    for nbr in (() if a.only_stream else (False, True)):
        nctx = 128 * (4 if nbr else 1)
        for mode, q in runs:
            tr = [symbols(encode(im, q, mode)[0], nbr) for im in train]
            tr = (np.concatenate([t[0] for t in tr]), np.concatenate([t[1] for t in tr]))
            enc = [encode(im, q, mode) for im in test]
            te = [symbols(e[0], nbr) for e in enc]
            te = (np.concatenate([t[0] for t in te]), np.concatenate([t[1] for t in te]))
            bits = price(tr, te, nctx)
            what = "JPEG's tables" if mode == "jpeg" else "flat step"
            print(f"| DCT, {what}, contexts {'k+nbr' if nbr else 'k'} | {q} | {bits / px:.3f} | "
                  f"{psnr(test, [e[1] for e in enc]):.2f} |", flush=True)


if __name__ == "__main__":
    main()
