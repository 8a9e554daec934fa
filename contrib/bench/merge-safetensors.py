#!/usr/bin/env python3
"""merge-safetensors.py - one large safetensors file from many small ones.

Usage: merge-safetensors.py [--min-bytes N] OUT.safetensors IN.safetensors...

The sample models are small (the largest face-api file is 22 MB); a
sequential-read benchmark needs a file that takes long enough to read that
timer and mount overheads vanish. This writes every tensor of every input
into OUT, named "<input file stem>/<tensor name>", with the bytes unchanged,
laid out as the safetensors format wants (u64 LE header length, JSON header
padded with spaces to an 8-byte boundary, contiguous data ordered by element
size then name, so every tensor is aligned). Inputs are validated (header
length, offsets inside the file, contiguous). Written via a temporary file
and rename. With --min-bytes N, tensors smaller than N bytes are left out
(a file of only large tensors, as in large language models whose every
tensor is at least a few KiB). Standard library only.
"""

import json
import os
import struct
import sys
import tempfile

SIZES = {"F64": 8, "I64": 8, "U64": 8, "C64": 8, "F32": 4, "I32": 4, "U32": 4,
         "F16": 2, "BF16": 2, "I16": 2, "U16": 2, "BOOL": 1, "U8": 1, "I8": 1,
         "F8_E4M3": 1, "F8_E5M2": 1}


def fail(msg):
    print("merge-safetensors: error: " + msg, file=sys.stderr)
    sys.exit(1)


def read_header(path):
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            fail("%s: shorter than 8 bytes" % path)
        (n,) = struct.unpack("<Q", raw)
        if n > size - 8 or n > 100 << 20:
            fail("%s: header length %d does not fit the file" % (path, n))
        try:
            hdr = json.loads(f.read(n).decode("utf-8"))
        except ValueError as e:
            fail("%s: bad JSON header: %s" % (path, e))
    base = 8 + n
    hdr.pop("__metadata__", None)
    spans = []
    for name, v in hdr.items():
        b, e = v["data_offsets"]
        if v["dtype"] not in SIZES or not 0 <= b <= e or base + e > size:
            fail("%s: tensor %s has a bad dtype or offsets" % (path, name))
        spans.append((b, e, name, v))
    spans.sort()
    pos = 0
    for b, e, name, _ in spans:
        if b != pos:
            fail("%s: hole or overlap before %s" % (path, name))
        pos = e
    if base + pos != size:
        fail("%s: file length is not 8 + N + data" % path)
    return base, spans


def main():
    args = sys.argv[1:]
    min_bytes = 0
    if len(args) >= 2 and args[0] == "--min-bytes":
        try:
            min_bytes = int(args[1])
        except ValueError:
            fail("--min-bytes needs an integer")
        args = args[2:]
    if len(args) < 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    out, inputs = args[0], args[1:]
    items = []  # (elem size, name, dtype, shape, path, abs begin, nbytes)
    for p in inputs:
        stem = os.path.basename(p)
        if stem.endswith(".safetensors"):
            stem = stem[: -len(".safetensors")]
        base, spans = read_header(p)
        for b, e, name, v in spans:
            if e - b < min_bytes:
                continue
            items.append((SIZES[v["dtype"]], stem + "/" + name, v["dtype"], v["shape"], p, base + b, e - b))
    items.sort(key=lambda t: (-t[0], t[1]))
    names = [t[1] for t in items]
    if len(set(names)) != len(names):
        fail("two inputs give the same tensor name")
    hdr = {"__metadata__": {"format": "pt", "merged_from": str(len(inputs)) + " files"}}
    off = 0
    for _, name, dt, shape, _, _, nb in items:
        hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + nb]}
        off += nb
    js = json.dumps(hdr, separators=(",", ":")).encode()
    js += b" " * ((-(8 + len(js))) % 8)
    d = os.path.dirname(os.path.abspath(out))
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(out) + ".tmp.", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(struct.pack("<Q", len(js)) + js)
            for _, _, _, _, p, b, nb in items:
                with open(p, "rb") as src:
                    src.seek(b)
                    data = src.read(nb)
                if len(data) != nb:
                    fail("%s: changed while reading" % p)
                f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    print("%s: %d tensors from %d files, %d bytes" % (out, len(items), len(inputs), 8 + len(js) + off))
    return 0


if __name__ == "__main__":
    sys.exit(main())
