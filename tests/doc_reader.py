#!/usr/bin/env python3
"""doc_reader.py - an independent .wcodec reader written from docs/FORMAT.md alone.

Standard library only. It checks that the format document is enough to read
a file: it parses the fixed header (1.2), the prefix, the frequency tables
(1.4) and the tile index (1.5), applies the tiling rule (1.6) with the
layouts of section 2 (taken from the dtypes in the prefix, so it needs no
zstd for the metadata), decodes each payload (section 3: RAW, CONST, RANS
per section 4) and writes the virtual file. XXH3 is not in the standard
library, so hashes are not checked here (the C reader checks them).

A file with dictionaries (flag bit 0, 1.8 and 2.1) needs the metadata to
know which tensors use them: it is decompressed with the `zstd` command;
so does a file with lossy tensors (layout int8, 2.2), whose scales lie in
the dictionary section.

Usage: doc_reader.py IN.wcodec OUT.safetensors
Exit status 3 if a plane uses ZSTD (not in the standard library), or the
file has dictionaries and no `zstd` command is found.
"""
import json
import shutil
import struct
import subprocess
import sys

LAYOUT = {  # dtype -> (layout, element size, planes)
    "BF16": ("bf16", 2, 2), "F32": ("f32", 4, 4),
    "F16": ("shuffle2", 2, 2), "I16": ("shuffle2", 2, 2), "U16": ("shuffle2", 2, 2),
    "I32": ("shuffle4", 4, 4), "U32": ("shuffle4", 4, 4),
    "F64": ("shuffle8", 8, 8), "I64": ("shuffle8", 8, 8), "U64": ("shuffle8", 8, 8), "C64": ("shuffle8", 8, 8),
}


LAYOUTS = [("bytes", 1, 1), ("shuffle", 2, 2), ("shuffle", 4, 4), ("shuffle", 8, 8),  # codes of 1.3.1
           ("bf16", 2, 2), ("f32", 4, 4)]


def layout_of(dtype, nbytes):
    lay = LAYOUT.get(dtype, ("bytes", 1, 1))
    return lay if nbytes % lay[1] == 0 else ("bytes", 1, 1)


def merge(layout, planes, n):
    """Inverse of the plane split of section 2."""
    out = bytearray()
    kind, w, _ = layout
    for i in range(n):
        if kind == "bytes":
            out.append(planes[0][i])
        elif kind == "bf16":
            e, sm = planes[0][i], planes[1][i]
            v = ((sm & 0x80) << 8) | (e << 7) | (sm & 0x7F)
            out += struct.pack("<H", v)
        elif kind == "f32":
            e = planes[0][i]
            r = planes[1][i] | (planes[2][i] << 8) | (planes[3][i] << 16)
            u = ((r >> 23) << 31) | (e << 23) | (r & 0x7FFFFF)
            out += struct.pack("<I", u)
        else:  # shuffle w: plane k holds byte (w - 1 - k)
            out += bytes(planes[w - 1 - b][i] for b in range(w))
    return bytes(out)


def gather(w, k, dictionary, planes, n):
    """Section 2.1: element i is entry x_i of the dictionary."""
    out = bytearray()
    for i in range(n):
        x = planes[0][i] if len(planes) == 1 else (planes[0][i] << 8) | planes[1][i]
        assert x < k, "dictionary index %d >= %d" % (x, k)
        out += dictionary[x * w: (x + 1) * w]
    return bytes(out)


def dequant(codes, first, lossy):
    """Section 2.2: element e = first + i, at position k of channel c, is
    float32(code * scale[c * groups + k // group]), then the dtype rounded
    to nearest even."""
    dtype, axis, ch, group, scales, nelem = lossy
    per = nelem // ch
    groups = (per + group - 1) // group if group else 1
    out = bytearray()
    for i, c in enumerate(codes):
        e = first + i
        chan, k = (e % ch, e // ch) if axis else (e // per, e % per)
        s = scales[chan * groups + (k // group if group else 0)]
        c = c - 256 if c > 127 else c
        f = struct.pack("<f", c * s)  # exact in binary64, one rounding to binary32
        if dtype == 0:
            out += f
        elif dtype == 2:
            out += struct.pack("<e", struct.unpack("<f", f)[0])
        else:
            u = struct.unpack("<I", f)[0]
            out += struct.pack("<H", (u + 0x7FFF + ((u >> 16) & 1)) >> 16)
    return bytes(out)


def rans_decode(body, n, freq, chunk):
    cum = [0] * 257
    for s in range(256):
        cum[s + 1] = cum[s] + freq[s]
    sym = bytearray(4096)
    for s in range(256):
        for t in range(cum[s], cum[s + 1]):
            sym[t] = s
    nchunks = (n + chunk - 1) // chunk
    ends = struct.unpack_from("<%dI" % nchunks, body, 0)
    base = 4 * nchunks
    out = bytearray()
    start = 0
    for k in range(nchunks):
        m = min(chunk, n - k * chunk)
        data = body[base + start: base + ends[k]]
        x = list(struct.unpack_from("<32I", data, 0))
        nwords = (len(data) - 128) // 2
        words = struct.unpack_from("<%dH" % nwords, data, 128)
        p = 0
        for r in range((m + 31) // 32):
            for lane in range(32):
                j = 32 * r + lane
                if j >= m:
                    break
                t = x[lane] & 4095
                s = sym[t]
                out.append(s)
                x[lane] = freq[s] * (x[lane] >> 12) + t - cum[s]
                if x[lane] < (1 << 16):
                    x[lane] = ((x[lane] << 16) | words[p]) & 0xFFFFFFFF
                    p += 1
        assert all(v == 1 << 16 for v in x), "chunk %d: final states wrong" % k
        assert p == nwords or (p == nwords - 1 and words[-1] == 0), "chunk %d: words left" % k
        start = ends[k]
    return bytes(out)


def main():
    src, dst = sys.argv[1], sys.argv[2]
    b = open(src, "rb").read()
    assert b[:8] == b"WCODEC\r\n", "magic"
    version, flags, header_size, tile_size, chunk, ntensors, ntiles, ntables = struct.unpack_from("<8I", b, 8)
    assert version in (1, 2, 3) and header_size == 160 and flags in (0, 1)
    (vsize, prefix_off, prefix_len, payload_off, payload_len, tables_off, tables_len,
     index_off, index_len, meta_off, meta_len, file_size, dicts_off, dicts_len) = struct.unpack_from("<14Q", b, 40)
    assert file_size == len(b) and meta_off + meta_len == len(b)
    assert index_off == tables_off + tables_len + dicts_len
    prefix = b[prefix_off: prefix_off + prefix_len]

    # Tensors in data order from the prefix (section 1.3: sorted by begin, end, name).
    n = struct.unpack_from("<Q", prefix, 0)[0]
    hdr = json.loads(prefix[8: 8 + n])
    tensors = sorted(((v["data_offsets"][0], v["data_offsets"][1], k.encode(), v["dtype"])
                      for k, v in hdr.items() if k != "__metadata__"))
    assert len(tensors) == ntensors

    # Dictionaries (1.8), named by the metadata (1.3): tensor index -> (K, bytes).
    dicts, lossy = {}, {}
    if flags & 1:
        assert dicts_off == tables_off + tables_len and dicts_len > 0
        if not shutil.which("zstd"):
            print("dictionaries need the metadata: no zstd command", file=sys.stderr)
            sys.exit(3)
        meta = subprocess.run(["zstd", "-dc"], input=b[meta_off: meta_off + meta_len],
                              stdout=subprocess.PIPE, check=True).stdout
        if version >= 3:  # the tensor table (1.3.1): (index, K, w) of each dict tensor
            entries, pos = [], 0
            for i in range(ntensors):
                code, _, plain, _, nbytes = struct.unpack_from("<BBBBQ", meta, pos)
                assert nbytes == tensors[i][1] - tensors[i][0]
                pos += 12
                if code == 6:
                    lay = LAYOUTS[plain]
                    k = struct.unpack_from("<I", meta, pos)[0]
                    entries.append((i, k, lay[1]))
                    pos += 4 + 4 * lay[2]
                    nplanes = 1 if k <= 256 else 2
                elif code in (7, 8):  # int8, int4 (2.2): their scales follow in the dictionary section
                    dt, axis, group, ch = struct.unpack_from("<BBHI", meta, pos)
                    w = LAYOUTS[plain][1]
                    per = nbytes // w // ch
                    ns = ch * ((per + group - 1) // group if group else 1)
                    lossy[i] = (dt, axis, ch, group, None, nbytes // w)
                    entries.append((i, ns, 4))
                    pos += 24
                    nplanes = 1
                else:
                    nplanes = LAYOUTS[code][2]
                pos += 16 * nplanes
            assert pos == len(meta)
        else:  # JSON (1.3.2)
            entries = [(i, t["dict"]["entries"], layout_of(t["dtype"], t["end"] - t["begin"])[1])
                       for i, t in enumerate(json.loads(meta)["tensors"]) if t["layout"] == "dict"]
        cursor = 0
        for i, k, w in entries:
            d = b[dicts_off + cursor: dicts_off + cursor + k * w]
            cursor += k * w
            if i in lossy:
                dt, axis, ch, group, _, nelem = lossy[i]
                lossy[i] = (dt, axis, ch, group, struct.unpack("<%df" % k, d), nelem)
                continue
            assert 1 <= k <= 65536
            vals = [int.from_bytes(d[j * w: (j + 1) * w], "little") for j in range(k)]
            assert all(vals[j] < vals[j + 1] for j in range(k - 1)), "dictionary not ascending"
            dicts[i] = (k, d)
        assert cursor == dicts_len
    else:
        assert dicts_off == 0 and dicts_len == 0

    # Frequency tables (1.4).
    tables, pos = [], tables_off
    for _ in range(ntables):
        bitmap = b[pos: pos + 32]
        pos += 32
        freq = [0] * 256
        for s in range(256):
            if bitmap[s >> 3] >> (s & 7) & 1:
                freq[s] = struct.unpack_from("<H", b, pos)[0]
                pos += 2
        assert sum(freq) == 4096
        tables.append(freq)
    assert pos == tables_off + tables_len

    # Tiles in index order (1.5, 1.6): each decodes the virtual bytes that
    # follow the previous one's, with its tensor's layout; a version-2 tile
    # may run on over whole following tensors of the same dtype (shared).
    out = bytearray(prefix)
    t_index = 0
    for t_index in range(ntiles):
        voff, coff, csize, dsize, tensor, tflags, _, _ = struct.unpack_from("<QQIIIIQQ", b, index_off + 48 * t_index)
        begin, end, name, dtype = tensors[tensor]
        assert voff == len(out) and prefix_len + begin <= voff < prefix_len + end, "index entry %d" % t_index
        assert tflags == 0 and 0 < dsize <= tile_size
        tile_end = voff + dsize
        if tile_end > prefix_len + end:  # a shared tile (version 2 on)
            assert version >= 2 and voff == prefix_len + begin, "shared tile %d" % t_index
            u = tensor + 1
            while u < len(tensors) and prefix_len + tensors[u][0] < tile_end:
                assert tensors[u][3] == dtype and tensors[u][1] > tensors[u][0], "shared tile %d" % t_index
                u += 1
            assert prefix_len + tensors[u - 1][1] == tile_end, "shared tile %d ends inside a tensor" % t_index
        else:
            assert dsize == min(tile_size, prefix_len + end - voff)
        layout = layout_of(dtype, end - begin)
        dictionary = dicts.get(tensor)
        if dictionary:
            layout = ("dict", layout[1], 1 if dictionary[0] <= 256 else 2)
        nsym = dsize // layout[1]
        if tensor in lossy:  # one plane of int8 codes, one per element
            layout = ("int8", 1, 1)
        payload = b[coff: coff + csize]
        assert payload[0] == layout[2], "plane count"
        planes, body_at = [], (4 + 12 * layout[2] + 3) & ~3
        for p in range(layout[2]):
            mode, value, _, table, bsize = struct.unpack_from("<BBHII", payload, 4 + 12 * p)
            body = payload[body_at: body_at + bsize]
            if mode == 0:
                planes.append(body)
            elif mode == 1:
                planes.append(bytes([value]) * nsym)
            elif mode == 2:
                planes.append(rans_decode(body, nsym, tables[table], chunk))
            else:
                print("plane coded with zstd: not in the standard library", file=sys.stderr)
                sys.exit(3)
            body_at = (body_at + bsize + 3) & ~3
        if dictionary:
            out += gather(layout[1], dictionary[0], dictionary[1], planes, nsym)
        elif tensor in lossy:
            w = LAYOUT[dtype][1]
            out += dequant(planes[0], (voff - prefix_len - begin) // w, lossy[tensor])
        else:
            out += merge(layout, planes, nsym)
    t_index = ntiles
    assert t_index == ntiles and len(out) == vsize
    open(dst, "wb").write(out)


if __name__ == "__main__":
    main()
