#!/usr/bin/env python3
"""gen_safetensors.py - write deterministic safetensors files for tests and benchmarks.

Standard library only (runs with any python3). The file format follows the
safetensors specification (github.com/huggingface/safetensors): an 8-byte
little-endian header length N, N bytes of JSON (padded with spaces to a
multiple of 8, as the reference writer does), then the data section.

Profiles:
  all      every safetensors dtype, including zero-size and one-element
           tensors, constant and random data, and small realistic BF16/F16/F32
           weights (the round-trip test set).
  weights  a transformer-like model of realistic weights in one dtype
           (--dtype BF16|F16|F32), about --params parameters: Gaussian
           matrices with per-tensor scales and a few outliers, norm weights
           near 1.0, small biases.
  many     thousands of tensors of every dtype, mostly small (0 to 70 KiB,
           most under 1 KiB, in runs of one dtype as converted vision
           models have them) among a few large BF16 weights: the shared-tile
           test set (docs/FORMAT.md 1.6).
  quantized  what TF.js models hold: weights quantized to 8 bits (256
           levels) or to float16 and stored back as F32, BF16 or F16 (each
           tensor has at most 65536 distinct values), plus a few genuine F32
           tensors and small I32 tensors (the dictionary layout's test set).

--malform KIND writes a deliberately broken file instead (see MALFORMS) so
tests can check that readers reject it with a message naming the problem.

Same arguments and seed -> the same bytes, on every platform.
"""
import argparse
import json
import math
import random
import struct
import sys
from array import array

# dtype -> element size in bytes (safetensors names).
DTYPE_SIZE = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1,
    "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4,
    "I64": 8, "U64": 8, "F64": 8,
}

MALFORMS = [
    "truncated",        # data section shorter than the header says
    "trailing",         # extra bytes after the last tensor
    "overlap",          # two tensors share bytes
    "hole",             # bytes of the data section belong to no tensor
    "badjson",          # header is not valid JSON
    "notobject",        # header is a JSON array
    "shape-mismatch",   # nbytes != prod(shape) * element size
    "end-before-begin", # data_offsets [b, e] with e < b
    "missing-dtype",    # a tensor entry without "dtype"
    "negative-shape",   # a negative dimension
    "header-too-long",  # N larger than the file
    "bad-metadata",     # __metadata__ value is not a string
]


def f32_bits(values):
    """IEEE binary32 bit patterns (as ints) of Python floats, little-endian safe."""
    a = array("f", values)
    b = array("I")
    b.frombytes(a.tobytes())
    return b


def to_bf16_bytes(values):
    """Round-to-nearest-even F32 -> BF16, as PyTorch does, little-endian."""
    out = array("H")
    for u in f32_bits(values):
        if (u & 0x7F800000) == 0x7F800000 and (u & 0x7FFFFF):
            out.append((u >> 16) | 0x40)  # quiet NaN
            continue
        u += 0x7FFF + ((u >> 16) & 1)
        out.append((u >> 16) & 0xFFFF)
    if sys.byteorder == "big":
        out.byteswap()
    return out.tobytes()


def to_f16_bytes(values):
    """IEEE binary16 via struct's 'e' format (round to nearest even)."""
    big = 65504.0
    return b"".join(struct.pack("<e", max(-big, min(big, v))) for v in values)


def to_f32_bytes(values):
    return struct.pack("<%df" % len(values), *values)


def to_f64_bytes(values):
    return struct.pack("<%dd" % len(values), *values)


def float_bytes(dtype, values):
    return {"BF16": to_bf16_bytes, "F16": to_f16_bytes,
            "F32": to_f32_bytes, "F64": to_f64_bytes}[dtype](values)


def weight_values(rng, n, std, outlier_rate=1e-4):
    """Gaussian weights with a few large outliers, as trained LLM matrices have."""
    g = rng.gauss
    vals = [g(0.0, std) for _ in range(n)]
    for _ in range(int(n * outlier_rate)):
        vals[rng.randrange(n)] = g(0.0, std * 20)
    return vals


def int_bytes(dtype, rng, n, mode):
    size = DTYPE_SIZE[dtype]
    if mode == "const":
        return bytes([0x5A] * size) * n
    if dtype == "BOOL":
        return bytes(rng.random() < 0.3 for _ in range(n))
    if mode == "small":  # small non-negative integers (token ids, indices)
        fmt = {1: "B", 2: "H", 4: "I", 8: "Q"}[size]
        return struct.pack("<%d%s" % (n, fmt), *(rng.randrange(1000 if size > 1 else 200) for _ in range(n)))
    return bytes(rng.getrandbits(8) for _ in range(n * size))


def tensor_bytes(dtype, rng, n, mode):
    """n elements of dtype; mode: random | const | small | weights."""
    if dtype in ("BF16", "F16", "F32", "F64"):
        if mode == "const":
            return float_bytes(dtype, [0.125] * n)
        if mode == "weights":
            return float_bytes(dtype, weight_values(rng, n, 0.02))
        return float_bytes(dtype, [rng.uniform(-4.0, 4.0) for _ in range(n)])
    return int_bytes(dtype, rng, n, mode)


def profile_all(rng):
    """Every dtype in several shapes: [(name, dtype, shape, bytes)]."""
    tensors = []
    for dtype in sorted(DTYPE_SIZE):
        shapes = [("empty", [0]), ("empty2d", [3, 0]), ("scalar", []), ("one", [1]),
                  ("vec", [257]), ("mat", [33, 65])]
        for label, shape in shapes:
            n = math.prod(shape)
            mode = "random" if label != "mat" else "small"
            tensors.append(("%s.%s" % (dtype.lower(), label), dtype, shape,
                            tensor_bytes(dtype, rng, n, mode)))
        tensors.append(("%s.const" % dtype.lower(), dtype, [100],
                        tensor_bytes(dtype, rng, 100, "const")))
    # Realistic weights large enough to span several 4 KiB tiles.
    for dtype in ("BF16", "F16", "F32"):
        tensors.append(("model.%s.weight" % dtype.lower(), dtype, [96, 160],
                        tensor_bytes(dtype, rng, 96 * 160, "weights")))
    # A dtype this generator does not know the size of still round-trips as bytes.
    tensors.append(("opaque.f8e8m0", "F8_E8M0", [64], bytes(rng.getrandbits(8) for _ in range(64))))
    # Sub-byte dtypes: prod(shape) * bits / 8 packed bytes.
    for name, dtype, shape, nbytes in (("packed.f4", "F4", [6, 43], 129), ("packed.f4.one", "F4", [2], 1),
                                       ("packed.f6e2m3", "F6_E2M3", [4, 8], 24),
                                       ("packed.f6e3m2", "F6_E3M2", [16], 12)):
        tensors.append((name, dtype, shape, bytes(rng.getrandbits(8) for _ in range(nbytes))))
    return tensors


def profile_many(rng, count=2400):
    """[(name, dtype, shape, bytes)]: count tensors in runs of one dtype."""
    dtypes = sorted(DTYPE_SIZE)
    tensors, i = [], 0
    while i < count:
        dtype = rng.choice(dtypes)
        for _ in range(rng.randint(1, 30)):
            r = rng.random()
            nbytes = (rng.randint(0, 1024) if r < 0.7 else rng.randint(1024, 16384) if r < 0.95
                      else rng.randint(16384, 70 * 1024))
            n = nbytes // DTYPE_SIZE[dtype]
            shape = [n] if n % 4 or n < 8 else [4, n // 4]
            mode = "weights" if dtype in ("BF16", "F16", "F32") and rng.random() < 0.8 else "small"
            if rng.random() < 0.05:
                mode = "const"
            tensors.append(("t%05d.%s" % (i, dtype.lower()), dtype, shape, tensor_bytes(dtype, rng, n, mode)))
            i += 1
        if rng.random() < 0.03:  # a large weight among them
            tensors.append(("w%05d.bf16" % i, "BF16", [128, 1024], tensor_bytes("BF16", rng, 128 * 1024, "weights")))
            i += 1
    return tensors


def profile_weights(rng, dtype, params):
    """A transformer-like layer stack of about `params` parameters."""
    hidden = 64
    while hidden * hidden * 12 * 4 < params and hidden < 4096:
        hidden *= 2
    vocab = max(256, min(32000, params // (hidden * 8)))
    per_layer = 12 * hidden * hidden + 4 * hidden
    layers = max(1, (params - vocab * hidden) // per_layer)
    tensors = [("model.embed_tokens.weight", dtype, [vocab, hidden], None, 0.02)]
    for i in range(layers):
        p = "model.layers.%d." % i
        std = 0.02 / math.sqrt(1 + i * 0.1)
        for name, shape in (("self_attn.q_proj.weight", [hidden, hidden]),
                            ("self_attn.k_proj.weight", [hidden, hidden]),
                            ("self_attn.v_proj.weight", [hidden, hidden]),
                            ("self_attn.o_proj.weight", [hidden, hidden]),
                            ("mlp.gate_proj.weight", [4 * hidden, hidden // 2]),
                            ("mlp.up_proj.weight", [4 * hidden, hidden // 2]),
                            ("mlp.down_proj.weight", [hidden // 2, 4 * hidden])):
            tensors.append((p + name, dtype, shape, None, std))
        tensors.append((p + "input_layernorm.weight", dtype, [hidden], "norm", 0))
        tensors.append((p + "self_attn.q_proj.bias", dtype, [hidden], None, 0.002))
    tensors.append(("model.norm.weight", dtype, [hidden], "norm", 0))
    out = []
    for name, dt, shape, kind, std in tensors:
        n = math.prod(shape)
        if kind == "norm":
            vals = [1.0 + rng.gauss(0.0, 0.05) for _ in range(n)]
        else:
            vals = weight_values(rng, n, std * rng.uniform(0.7, 1.3))
        out.append((name, dt, shape, float_bytes(dt, vals)))
    return out


def profile_quantized(rng):
    """[(name, dtype, shape, bytes)]: u8- and f16-quantized tensors of several dtypes."""
    out = []

    def u8quant(n, std):
        vals = weight_values(rng, n, std)
        lo, hi = min(vals), max(vals)
        scale = (hi - lo) / 255.0
        return [lo + round((v - lo) / scale) * scale for v in vals]

    def f16quant(n, std):
        return [struct.unpack("<e", struct.pack("<e", v))[0] for v in weight_values(rng, n, std)]

    for i, (rows, cols) in enumerate(((64, 96), (128, 64), (30, 31), (8, 8))):
        n = rows * cols
        out.append(("u8q.%d.f32" % i, "F32", [rows, cols], to_f32_bytes(u8quant(n, 0.05))))
        out.append(("u8q.%d.bf16" % i, "BF16", [rows, cols], to_bf16_bytes(u8quant(n, 0.05))))
        out.append(("f16q.%d.f32" % i, "F32", [rows, cols], to_f32_bytes(f16quant(n, 0.02))))
        out.append(("f16q.%d.f16" % i, "F16", [rows, cols], to_f16_bytes(f16quant(n, 0.02))))
    out.append(("u8q.f64", "F64", [2000], to_f64_bytes(u8quant(2000, 0.1))))
    out.append(("genuine.f32", "F32", [96, 64], to_f32_bytes(weight_values(rng, 96 * 64, 0.02))))
    out.append(("const.f32", "F32", [4096], to_f32_bytes([0.5] * 4096)))
    for i in range(5):
        out.append(("shape.%d.i32" % i, "I32", [2], struct.pack("<2i", rng.randrange(100), -1)))
    return out


def build(tensors, metadata, pad=True):
    """Header bytes and data bytes of a well-formed file; tensors in the given order."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    data = bytearray()
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    js = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        js += b" " * (-len(js) % 8)
    return header, js, bytes(data)


def malform(kind, header, js, data):
    """Return (js, data, trailer_len_override) broken in the way `kind` names."""
    names = [k for k in header if k != "__metadata__"]
    big = [k for k in names if header[k]["data_offsets"][1] > header[k]["data_offsets"][0]]
    a, b = big[0], big[1]
    hlen = None
    if kind == "truncated":
        data = data[:-7]
    elif kind == "trailing":
        data = data + b"\0" * 8
    elif kind == "overlap":
        header[b]["data_offsets"][0] -= 1
        header[b]["shape"] = None
    elif kind == "hole":
        # open an 8-byte gap after tensor `a`: shift every later tensor
        cut = header[a]["data_offsets"][1]
        for k in names:
            off = header[k]["data_offsets"]
            if k != a and off[0] >= cut:
                off[0] += 8
                off[1] += 8
        data = data[:cut] + b"\0" * 8 + data[cut:]
    elif kind == "badjson":
        js = js.replace(b"{", b"[", 1)
    elif kind == "notobject":
        js = b"[1,2,3]"
    elif kind == "shape-mismatch":
        header[a]["shape"] = [x + 1 for x in header[a]["shape"]] or [2]
    elif kind == "end-before-begin":
        off = header[a]["data_offsets"]
        header[a]["data_offsets"] = [off[1], off[0]]
    elif kind == "missing-dtype":
        del header[a]["dtype"]
    elif kind == "negative-shape":
        header[a]["shape"] = [-1] + header[a]["shape"][1:]
    elif kind == "header-too-long":
        hlen = len(js) + len(data) + 100
    elif kind == "bad-metadata":
        header["__metadata__"] = {"format": 7}
    if kind in ("overlap",):
        # keep shape consistent with the new byte count where possible
        off = header[b]["data_offsets"]
        header[b]["dtype"] = "U8"
        header[b]["shape"] = [off[1] - off[0]]
    if kind not in ("badjson", "notobject", "truncated", "trailing", "header-too-long"):
        js = json.dumps(header, separators=(",", ":")).encode()
        js += b" " * (-len(js) % 8)
    return js, data, hlen


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", help="output .safetensors path")
    ap.add_argument("--profile", choices=["all", "weights", "quantized", "many"], default="all")
    ap.add_argument("--dtype", choices=["BF16", "F16", "F32"], default="BF16",
                    help="dtype of the weights profile")
    ap.add_argument("--params", type=int, default=1 << 20,
                    help="approximate parameter count of the weights profile")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-metadata", action="store_true", help="omit __metadata__")
    ap.add_argument("--no-pad", action="store_true", help="do not pad the JSON to 8 bytes")
    ap.add_argument("--malform", choices=MALFORMS, help="write a broken file of this kind")
    args = ap.parse_args()

    rng = random.Random(args.seed)
    if args.profile == "all":
        tensors = profile_all(rng)
    elif args.profile == "quantized":
        tensors = profile_quantized(rng)
    elif args.profile == "many":
        tensors = profile_many(rng)
    else:
        tensors = profile_weights(rng, args.dtype, args.params)
    metadata = None if args.no_metadata else {"format": "pt", "generator": "gen_safetensors.py"}
    header, js, data = build(tensors, metadata, pad=not args.no_pad)
    hlen = None
    if args.malform:
        js, data, hlen = malform(args.malform, header, js, data)
    with open(args.out, "wb") as f:
        f.write(struct.pack("<Q", len(js) if hlen is None else hlen))
        f.write(js)
        f.write(data)


if __name__ == "__main__":
    main()
