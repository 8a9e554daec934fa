#!/usr/bin/env python3
"""doc_reader_qvq.py - an independent reader of transform-mode .qvq archives
written from docs/FORMAT.md section 6 alone.

Standard library only. It parses the fixed header (6.1), the frequency
tables, image table, tile table and string pool (6.2), decodes each tile
payload of the transform mode (6.8: escapes, the rANS stream of section 4
with a table per plane, symbols to coefficients, the exact integer inverse
DCT, chroma filter and colour) and writes every image as a binary PPM under
OUTDIR with the name the archive shows (6.4). XXH3 is not in the standard
library, so hashes are not checked here (the C reader checks them).

Usage: doc_reader_qvq.py IN.qvq OUTDIR
"""
import os
import struct
import sys

B = [[1448, 1448, 1448, 1448, 1448, 1448, 1448, 1448],
     [2009, 1703, 1138, 400, -400, -1138, -1703, -2009],
     [1892, 784, -784, -1892, -1892, -784, 784, 1892],
     [1703, -400, -2009, -1138, 1138, 2009, 400, -1703],
     [1448, -1448, -1448, 1448, 1448, -1448, -1448, 1448],
     [1138, -2009, 400, 1703, -1703, -400, 2009, -1138],
     [784, -1892, 1892, -784, -784, 1892, -1892, 784],
     [400, -1138, 1703, -2009, 2009, -1703, 1138, -400]]
ZIGZAG = [0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5, 12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13, 6,
          7, 14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51, 58, 59, 52, 45, 38, 31,
          39, 46, 53, 60, 61, 54, 47, 55, 62, 63]
S = [0, 1, 6, 21, 64]


def clamp(x):
    return 0 if x < 0 else 255 if x > 255 else x


def geometry(w, h):
    mw, mh = (w + 15) // 16, (h + 15) // 16
    return mw, mh, 4 * mw * mh, mw * mh


def stream_layout(w, h):
    _, _, nl, nc = geometry(w, h)
    count = [nl * (S[b + 1] - S[b]) for b in range(4)] + [2 * nc * (S[b + 1] - S[b]) for b in range(4)]
    start, end, at = [], [], 0
    for c in count:
        start.append(at)
        at += (c + 31) // 32 * 32
        end.append(at)
    return count, start, end, at


def rans_decode(body, n, tables, end, chunk):
    """Section 4 with the table of the plane holding each symbol (6.8)."""
    dec = []
    for freq in tables:
        cum = [0] * 257
        for s in range(256):
            cum[s + 1] = cum[s] + freq[s]
        sym = bytearray(4096)
        for s in range(256):
            for t in range(cum[s], cum[s + 1]):
                sym[t] = s
        dec.append((freq, cum, sym))
    plane_of = []
    p = 0
    for j in range(0, n, 32):
        while end[p] <= j:
            p += 1
        plane_of.append(p)
    nchunks = (n + chunk - 1) // chunk
    ends = struct.unpack_from("<%dI" % nchunks, body, 0)
    base, start, out = 4 * nchunks, 0, bytearray()
    for k in range(nchunks):
        m = min(chunk, n - k * chunk)
        data = body[base + start: base + ends[k]]
        x = list(struct.unpack_from("<32I", data, 0))
        nwords = (len(data) - 128) // 2
        words = struct.unpack_from("<%dH" % nwords, data, 128)
        w = 0
        for r in range((m + 31) // 32):
            freq, cum, sym = dec[plane_of[(k * chunk + 32 * r) // 32]]
            for lane in range(min(32, m - 32 * r)):
                t = x[lane] & 4095
                s = sym[t]
                out.append(s)
                x[lane] = freq[s] * (x[lane] >> 12) + t - cum[s]
                if x[lane] < (1 << 16):
                    x[lane] = ((x[lane] << 16) | words[w]) & 0xFFFFFFFF
                    w += 1
        assert all(v == 1 << 16 for v in x), "chunk %d: final states wrong" % k
        assert w == nwords or (w == nwords - 1 and words[-1] == 0), "chunk %d: words left" % k
        start = ends[k]
    return out


def coefficients(sym, esc, w, h):
    """Blocks of 64 coefficients in natural order, luma then Cb then Cr."""
    count, start, _, _ = stream_layout(w, h)
    _, _, nl, nc = geometry(w, h)
    comps = [(0, nl), (1, nc), (1, nc)]
    blocks, pos, used = [], list(start), set()
    for cls, nb in comps:
        prev = 0
        for _ in range(nb):
            q = [0] * 64
            for b in range(4):
                p = 4 * cls + b
                for z in range(S[b], S[b + 1]):
                    s = sym[pos[p]]
                    if s == 255:
                        d = esc[pos[p]]
                        used.add(pos[p])
                    else:
                        assert s <= 252, "symbol %d" % s
                        d = -((s + 1) // 2) if s & 1 else s // 2
                    pos[p] += 1
                    if z == 0:
                        d += prev
                        assert -32767 <= d <= 32767
                        prev = d
                    q[ZIGZAG[z]] = d
            blocks.append(q)
    assert used == set(esc), "escapes without an escape symbol"
    return blocks


def idct(q, step):
    X = [max(-32768, min(32767, v * step)) for v in q]
    t = [[(2048 + sum(B[k][n] * X[v * 8 + k] for k in range(8))) >> 12 for n in range(8)] for v in range(8)]
    return [[clamp(((16384 + sum(B[k][m] * t[k][n] for k in range(8))) >> 15) + 128) for n in range(8)]
            for m in range(8)]


def image(blocks, w, h, sl, sc):
    mw, mh, nl, nc = geometry(w, h)
    pw, ph, cw, ch = 16 * mw, 16 * mh, 8 * mw, 8 * mh
    planes = [[[0] * pw for _ in range(ph)], [[0] * cw for _ in range(ch)], [[0] * cw for _ in range(ch)]]
    k = 0
    for c, (bw, bh, step) in enumerate([(2 * mw, 2 * mh, sl), (mw, mh, sc), (mw, mh, sc)]):
        for by in range(bh):
            for bx in range(bw):
                s = idct(blocks[k], step)
                k += 1
                for m in range(8):
                    for n in range(8):
                        planes[c][by * 8 + m][bx * 8 + n] = s[m][n]

    def chroma(c, y, x):
        i, j = y // 2, x // 2
        o = min(max(i - 1 if y % 2 == 0 else i + 1, 0), ch - 1)
        p = min(max(j - 1 if x % 2 == 0 else j + 1, 0), cw - 1)
        v = [3 * c[i][jj] + c[o][jj] for jj in (j, p)]
        return (3 * v[0] + v[1] + 8) >> 4

    out = bytearray()
    for y in range(h):
        for x in range(w):
            Y = planes[0][y][x]
            b, r = chroma(planes[1], y, x) - 128, chroma(planes[2], y, x) - 128
            out += bytes([clamp(Y + ((91881 * r + 32768) >> 16)),
                          clamp(Y + ((-22554 * b - 46802 * r + 32768) >> 16)),
                          clamp(Y + ((116130 * b + 32768) >> 16))])
    return out


def main():
    data = open(sys.argv[1], "rb").read()
    outdir = sys.argv[2]
    assert data[:8] == b"WCQVQ\r\n\x1a", "not a .qvq archive"
    version, = struct.unpack_from("<I", data, 8)
    assert version == 2 and data[152] == 1, "not a transform-mode archive (version 2, mode 1)"
    nimages, ntiles, chunk, ntables = struct.unpack_from("<4I", data, 24)
    tables_off, images_off, tiles_off, strings_off = struct.unpack_from("<4Q", data, 72)
    sl, sc = struct.unpack_from("<2H", data, 154)
    tables = [struct.unpack_from("<256H", data, tables_off + 512 * t) for t in range(ntables)]
    images = [struct.unpack_from("<5I", data, images_off + 24 * i) for i in range(nimages)]
    for t in range(ntiles):
        coff, csize, dsize, first, count = struct.unpack_from("<QIIII", data, tiles_off + 48 * t)
        payload = data[coff:coff + csize]
        ends = struct.unpack_from("<%dI" % count, payload, 0)
        prev = 0
        for k in range(count):
            w, h, _, noff, nlen = images[first + k]
            part = payload[4 * count + prev: 4 * count + ends[k]]
            nesc, = struct.unpack_from("<I", part, 0)
            places = struct.unpack_from("<%dI" % nesc, part, 4)
            values = struct.unpack_from("<%dh" % nesc, part, 4 + 4 * nesc)
            body = part[4 + 6 * nesc + 2 * (nesc & 1):]
            count_p, start, end, nsym = stream_layout(w, h)
            for pl in places:
                assert any(start[p] <= pl < start[p] + count_p[p] for p in range(8)), "escape place %d" % pl
            sym = rans_decode(body, nsym, tables, end, chunk)
            rgb = image(coefficients(sym, dict(zip(places, values)), w, h), w, h, sl, sc)
            name = data[strings_off + noff: strings_off + noff + nlen].decode()
            d, base = os.path.split(name)
            shown = os.path.join(d, (base.rsplit(".", 1)[0] if "." in base[1:] else base) + ".ppm")
            path = os.path.join(outdir, shown)
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            with open(path, "wb") as f:
                f.write(b"P6\n%d %d\n255\n" % (w, h) + rgb)
            prev = ends[k]


if __name__ == "__main__":
    main()
