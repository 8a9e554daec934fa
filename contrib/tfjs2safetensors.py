#!/usr/bin/env python3
"""tfjs2safetensors - convert TensorFlow.js weights to .safetensors.

Input: a TensorFlow.js graph or layers model (model.json with a
"weightsManifest" list) or a bare weights manifest (*-weights_manifest.json,
a JSON list), as described in the tfjs-converter documentation
("weightsManifest": groups of {"paths": [shard files], "weights": [{"name",
"shape", "dtype", "quantization"?}]}). The shards of one group are one byte
buffer cut into files; the weights of a group lie back to back in it, in
manifest order, each taking numel * (bytes of its stored type) bytes.

Stored types handled:
  float32, int32 (4 bytes), bool (1 byte), and quantized weights whose
  "quantization" is {"dtype": "uint8"|"uint16", "min", "scale"} (value =
  q * scale + min, computed in double and rounded to float32 as tfjs does;
  int32 weights are rounded half up like JavaScript's Math.round) or
  {"dtype": "float16"} (IEEE binary16 bits, float32 weights only).
  "string" and "complex64" weights are refused with a clear error.

Output: a safetensors file (https://huggingface.co/docs/safetensors, format
section): u64 little-endian N, N bytes of JSON header (padded with spaces so
the data starts on an 8-byte boundary), then the data section. Tensors are
laid out contiguously without holes, ordered by element size (largest first)
then name, like the reference serializer, so every tensor is aligned to its
element size. The header carries "__metadata__" with the source.

--dtype picks the float type of floating-point tensors (integers and bools are
never changed); several may be given comma-separated, one file each:
  f32   (default) float32, quantized weights dequantized   -> NAME.safetensors
  keep  like f32, but float16-quantized weights stay F16
        (their exact stored bits)                           -> NAME.keep.safetensors
  bf16  bfloat16, rounded to nearest even from the float32
        value (NaN stays NaN, quieted)                      -> NAME.bf16.safetensors
  f16   IEEE half, rounded to nearest even from the float32
        value (overflow gives +-inf)                        -> NAME.f16.safetensors
NAME is the manifest's name without ".json", "model" or "-weights_manifest".

Every file is written as NAME.tmp.XXXX in the output directory and renamed
over the target only when complete. Exit status: 0 done, 1 bad input or I/O
error (message on stderr), 2 usage error.

Only the Python 3 standard library is required; if numpy is importable the
element conversions use it (identical results; --no-numpy forces the
pure-Python path, which the tests compare against).
"""

import argparse
import array
import json
import math
import os
import struct
import sys
import tempfile

__all__ = ["convert", "load_manifest", "ConvertError"]

# Bytes per element of every stored type a manifest may use.
STORED_SIZE = {"float32": 4, "int32": 4, "bool": 1, "uint8": 1, "uint16": 2, "float16": 2}
# safetensors dtype name and element size of every output dtype we write.
ST_DTYPE = {"F32": 4, "F16": 2, "BF16": 2, "I32": 4, "BOOL": 1}
OUT_CHOICES = ("f32", "keep", "bf16", "f16")
SUFFIX = {"f32": "", "keep": ".keep", "bf16": ".bf16", "f16": ".f16"}

try:  # optional accelerator; never required
    import numpy as _np
except Exception:  # pragma: no cover - depends on the interpreter
    _np = None


class ConvertError(Exception):
    """Bad input: the message says which file/weight and what is wrong."""


# ---------------------------------------------------------------- manifest


class Weight:
    """One manifest entry resolved to a byte range of its group buffer."""

    def __init__(self, group, offset, entry, where):
        self.group = group
        self.offset = offset  # bytes from the start of the group buffer
        self.where = where
        if not isinstance(entry, dict):
            raise ConvertError("%s: weight entry is not an object" % where)
        self.name = entry.get("name")
        if not isinstance(self.name, str) or not self.name:
            raise ConvertError("%s: missing or empty \"name\"" % where)
        self.where = where = "%s (%s)" % (where, self.name)
        shape = entry.get("shape")
        if not isinstance(shape, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
        ):
            raise ConvertError("%s: \"shape\" must be a list of non-negative integers" % where)
        self.shape = shape
        self.numel = 1
        for d in shape:
            self.numel *= d
        self.dtype = entry.get("dtype")
        if self.dtype in ("string", "complex64"):
            raise ConvertError("%s: dtype %s cannot be stored in safetensors" % (where, self.dtype))
        if self.dtype not in ("float32", "int32", "bool"):
            raise ConvertError("%s: unknown dtype %r" % (where, self.dtype))
        q = entry.get("quantization")
        self.qdtype = None
        self.qmin = self.qscale = None
        if q is not None:
            if not isinstance(q, dict):
                raise ConvertError("%s: \"quantization\" is not an object" % where)
            self.qdtype = q.get("dtype")
            orig = q.get("original_dtype", self.dtype)
            if orig != self.dtype:
                raise ConvertError(
                    "%s: quantization original_dtype %r differs from dtype %r" % (where, orig, self.dtype)
                )
            if self.qdtype in ("uint8", "uint16"):
                if self.dtype not in ("float32", "int32"):
                    raise ConvertError("%s: %s quantization of a %s weight" % (where, self.qdtype, self.dtype))
                for k in ("min", "scale"):
                    v = q.get(k)
                    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                        raise ConvertError("%s: quantization needs a finite number %r" % (where, k))
                self.qmin, self.qscale = float(q["min"]), float(q["scale"])
            elif self.qdtype == "float16":
                if self.dtype != "float32":
                    raise ConvertError("%s: float16 quantization of a %s weight" % (where, self.dtype))
            else:
                raise ConvertError("%s: unknown quantization dtype %r" % (where, self.qdtype))
        self.stored = self.qdtype or self.dtype
        self.nbytes = self.numel * STORED_SIZE[self.stored]

    def out_dtype(self, mode):
        """safetensors dtype this weight becomes under --dtype mode."""
        if self.dtype == "int32":
            return "I32"
        if self.dtype == "bool":
            return "BOOL"
        if mode == "bf16":
            return "BF16"
        if mode == "f16":
            return "F16"
        if mode == "keep" and self.qdtype == "float16":
            return "F16"
        return "F32"


class Group:
    """A weight group: shard files that concatenate to one buffer."""

    def __init__(self, base_dir, paths, where):
        if not isinstance(paths, list) or not paths or not all(isinstance(p, str) and p for p in paths):
            raise ConvertError("%s: \"paths\" must be a non-empty list of file names" % where)
        self.where = where
        self.files = []  # (path, start offset in the group buffer, size)
        total = 0
        for p in paths:
            parts = p.replace("\\", "/").split("/")
            if os.path.isabs(p) or ".." in parts or "://" in p:
                raise ConvertError("%s: shard path %r must be relative to the manifest, without '..'" % (where, p))
            full = os.path.join(base_dir, *parts)
            try:
                size = os.stat(full).st_size
            except OSError as e:
                raise ConvertError("%s: shard %s: %s" % (where, full, e.strerror))
            self.files.append((full, total, size))
            total += size
        self.size = total

    def read(self, offset, length):
        """Bytes [offset, offset+length) of the group buffer (may span shards)."""
        out = bytearray()
        end = offset + length
        for path, start, size in self.files:
            lo, hi = max(offset, start), min(end, start + size)
            if lo >= hi:
                continue
            with open(path, "rb") as f:
                f.seek(lo - start)
                chunk = f.read(hi - lo)
            if len(chunk) != hi - lo:
                raise ConvertError("%s: shard %s shrank while reading" % (self.where, path))
            out += chunk
        if len(out) != length:
            raise ConvertError("%s: read past the end of the group buffer" % self.where)
        return bytes(out)


def load_manifest(path):
    """Parse a model.json or weights manifest; returns the list of Weight,
    in manifest order, after checking every group's shard sizes."""
    try:
        with open(path, "rb") as f:
            doc = json.loads(f.read().decode("utf-8"))
    except OSError as e:
        raise ConvertError("%s: %s" % (path, e.strerror))
    except (UnicodeDecodeError, ValueError) as e:
        raise ConvertError("%s: not valid JSON: %s" % (path, e))
    if isinstance(doc, dict):
        groups = doc.get("weightsManifest")
        if groups is None:
            raise ConvertError("%s: no \"weightsManifest\" (not a TensorFlow.js model.json)" % path)
    else:
        groups = doc
    if not isinstance(groups, list):
        raise ConvertError("%s: weights manifest must be a list of groups" % path)
    base = os.path.dirname(os.path.abspath(path))
    weights, seen = [], set()
    for gi, g in enumerate(groups):
        where = "%s: group %d" % (path, gi)
        if not isinstance(g, dict) or not isinstance(g.get("weights"), list):
            raise ConvertError("%s: group needs \"paths\" and a \"weights\" list" % where)
        group = Group(base, g.get("paths"), where)
        off = 0
        for wi, e in enumerate(g["weights"]):
            w = Weight(group, off, e, "%s weight %d" % (where, wi))
            if w.name in seen:
                raise ConvertError("%s: duplicate weight name %r" % (where, w.name))
            seen.add(w.name)
            off += w.nbytes
            weights.append(w)
        if off != group.size:
            raise ConvertError(
                "%s: shards hold %d bytes but the manifest's weights need %d" % (where, group.size, off)
            )
    if not weights:
        raise ConvertError("%s: the manifest lists no weights" % path)
    return weights


# ------------------------------------------------------ element conversion


def _le(arr):
    """array in little-endian byte order, as bytes."""
    if sys.byteorder == "big":
        arr.byteswap()
    return arr.tobytes()


def _from_le(code, raw):
    a = array.array(code)
    a.frombytes(raw)
    if sys.byteorder == "big":
        a.byteswap()
    return a


def _round_half_up(x):
    return int(math.floor(x + 0.5))


def _f16_bits_to_f32_bytes(raw, use_np):
    if use_np:
        return _np.frombuffer(raw, "<f2").astype("<f4").tobytes()
    n = len(raw) // 2
    vals = struct.unpack("<%de" % n, raw)
    return _le(array.array("f", vals))


def _dequant_bytes(w, raw, use_np):
    """Stored bytes of w -> little-endian F32 (or I32) bytes."""
    if w.qdtype is None:
        return raw
    if w.qdtype == "float16":
        return _f16_bits_to_f32_bytes(raw, use_np)
    code = "<u1" if w.qdtype == "uint8" else "<u2"
    if use_np:
        q = _np.frombuffer(raw, code).astype(_np.float64)
        v = q * w.qscale + w.qmin
        if w.dtype == "int32":
            return _np.floor(v + 0.5).astype("<i4").tobytes()
        return v.astype("<f4").tobytes()
    q = _from_le("B" if w.qdtype == "uint8" else "H", raw)
    s, m = w.qscale, w.qmin
    if w.dtype == "int32":
        return _le(array.array("i", [_round_half_up(x * s + m) for x in q]))
    return _le(array.array("f", [x * s + m for x in q]))


def f32_to_bf16_bits(u):
    """bfloat16 bits of the float32 with bits u: round to nearest, ties to
    even; NaN stays NaN (quiet bit set so a payload in the low half cannot
    turn it into infinity)."""
    if (u & 0x7F800000) == 0x7F800000 and (u & 0x007FFFFF):
        return ((u >> 16) | 0x0040) & 0xFFFF
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


def _f32_to_bf16_bytes(raw, use_np):
    if use_np:
        u = _np.frombuffer(raw, "<u4").astype(_np.uint64)
        nan = ((u & 0x7F800000) == 0x7F800000) & ((u & 0x007FFFFF) != 0)
        r = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
        r = _np.where(nan, (u >> 16) | 0x0040, r) & 0xFFFF
        return r.astype("<u2").tobytes()
    u = _from_le("I", raw)
    return _le(array.array("H", [f32_to_bf16_bits(x) for x in u]))


def _f32_to_f16_one(u, x):
    """IEEE half bytes of the float32 x (bits u): round to nearest even,
    overflow to infinity; a NaN keeps its sign and top payload bits (as
    numpy's conversion does), never becoming infinity."""
    if (u & 0x7F800000) == 0x7F800000 and (u & 0x007FFFFF):
        h = 0x7C00 + ((u & 0x007FFFFF) >> 13)
        if h == 0x7C00:
            h += 1
        return struct.pack("<H", ((u >> 16) & 0x8000) | h)
    try:
        return struct.pack("<e", x)
    except OverflowError:  # |x| rounds past 65504: IEEE gives infinity
        return struct.pack("<e", math.copysign(math.inf, x))


def _f32_to_f16_bytes(raw, use_np):
    if use_np:
        with _np.errstate(over="ignore", invalid="ignore"):
            return _np.frombuffer(raw, "<f4").astype("<f2").tobytes()
    bits = _from_le("I", raw)
    vals = _from_le("f", raw)
    return b"".join(_f32_to_f16_one(u, x) for u, x in zip(bits, vals))


def tensor_bytes(w, mode, use_np):
    """Little-endian bytes of weight w as out_dtype(mode)."""
    raw = w.group.read(w.offset, w.nbytes)
    out = w.out_dtype(mode)
    if out in ("I32", "BOOL"):
        return _dequant_bytes(w, raw, use_np)
    if out == "F16" and w.qdtype == "float16":
        return raw  # stored half bits, exact
    f32 = _dequant_bytes(w, raw, use_np)
    if out == "F32":
        return f32
    if out == "BF16":
        return _f32_to_bf16_bytes(f32, use_np)
    return _f32_to_f16_bytes(f32, use_np)


# ------------------------------------------------------------ safetensors


def build_header(weights, mode, metadata):
    """(header bytes including the u64 length and padding, ordered weights)."""
    order = sorted(weights, key=lambda w: (-ST_DTYPE[w.out_dtype(mode)], w.name))
    hdr = {"__metadata__": metadata}
    off = 0
    for w in order:
        dt = w.out_dtype(mode)
        n = w.numel * ST_DTYPE[dt]
        hdr[w.name] = {"dtype": dt, "shape": w.shape, "data_offsets": [off, off + n]}
        off += n
    js = json.dumps(hdr, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    js += b" " * ((-(8 + len(js))) % 8)
    return struct.pack("<Q", len(js)) + js, order, off


def write_safetensors(weights, mode, out_path, metadata, use_np):
    """Write one safetensors file via a temporary file + rename.
    Returns (bytes written, number of tensors)."""
    header, order, data_len = build_header(weights, mode, metadata)
    out_dir = os.path.dirname(os.path.abspath(out_path))
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(out_path) + ".tmp.", dir=out_dir)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(header)
            done = 0
            for w in order:
                b = tensor_bytes(w, mode, use_np)
                if len(b) != w.numel * ST_DTYPE[w.out_dtype(mode)]:
                    raise ConvertError("%s: converted to %d bytes, expected %d" % (w.where, len(b), w.numel))
                f.write(b)
                done += len(b)
            if done != data_len:
                raise ConvertError("%s: wrote %d data bytes, header says %d" % (out_path, done, data_len))
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, out_path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return len(header) + data_len, len(order)


def model_stem(manifest_path):
    """Output base name for a manifest: model.json -> its directory's name
    is not used; 'model.json' -> 'model', 'x-weights_manifest.json' -> 'x',
    'x.json' -> 'x'."""
    b = os.path.basename(manifest_path)
    if b.endswith(".json"):
        b = b[: -len(".json")]
    for suf in ("-weights_manifest", "_weights_manifest", ".weights_manifest"):
        if b.endswith(suf) and len(b) > len(suf):
            b = b[: -len(suf)]
    return b


def convert(manifest_path, modes=("f32",), out_dir=None, output=None, use_np=None, log=None):
    """Convert one manifest; returns a list of (path, bytes, ntensors)."""
    if use_np is None:
        use_np = _np is not None
    if use_np and _np is None:
        raise ConvertError("numpy requested but not importable")
    weights = load_manifest(manifest_path)
    if output is not None and len(modes) != 1:
        raise ConvertError("-o names one file: give a single --dtype")
    if out_dir is None:
        out_dir = os.path.dirname(os.path.abspath(manifest_path))
    os.makedirs(out_dir, exist_ok=True)
    stem = model_stem(manifest_path)
    made = []
    for mode in modes:
        path = output or os.path.join(out_dir, stem + SUFFIX[mode] + ".safetensors")
        if output:
            os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
        meta = {
            "format": "pt",
            "source": "tfjs:" + os.path.basename(manifest_path),
            "converter": "wcodecfs contrib/tfjs2safetensors.py --dtype " + mode,
        }
        size, n = write_safetensors(weights, mode, path, meta, use_np)
        made.append((path, size, n))
        if log:
            log("%s: %d tensors, %d bytes (%s)" % (path, n, size, mode))
    return made


def _parse_modes(s):
    modes = [m.strip() for m in s.split(",") if m.strip()]
    bad = [m for m in modes if m not in OUT_CHOICES]
    if not modes or bad:
        raise argparse.ArgumentTypeError(
            "--dtype takes a comma-separated list of %s (got %r)" % ("|".join(OUT_CHOICES), s)
        )
    return list(dict.fromkeys(modes))


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="tfjs2safetensors.py",
        description="Convert TensorFlow.js weights (model.json or *-weights_manifest.json + .bin shards) "
        "to .safetensors.",
    )
    ap.add_argument("manifest", nargs="+", help="model.json or weights manifest JSON")
    ap.add_argument("-o", "--output", help="output file (one manifest, one --dtype)")
    ap.add_argument("-d", "--out-dir", help="directory for the outputs (default: next to each manifest)")
    ap.add_argument("--dtype", type=_parse_modes, default=["f32"],
                    help="float output dtype(s), comma-separated: f32 (default), keep, bf16, f16")
    ap.add_argument("--no-numpy", action="store_true", help="use the pure-Python conversion path")
    ap.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    args = ap.parse_args(argv)
    if args.output and len(args.manifest) > 1:
        ap.error("-o needs exactly one manifest")
    use_np = False if args.no_numpy else None
    log = None if args.quiet else (lambda m: print(m, flush=True))
    try:
        for m in args.manifest:
            convert(m, args.dtype, args.out_dir, args.output, use_np, log)
    except ConvertError as e:
        print("tfjs2safetensors: error: %s" % e, file=sys.stderr)
        return 1
    except OSError as e:
        print("tfjs2safetensors: error: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
