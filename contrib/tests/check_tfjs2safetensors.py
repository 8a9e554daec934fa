#!/usr/bin/env python3
"""Tests of contrib/tfjs2safetensors.py on synthetic TensorFlow.js models.

Usage: check_tfjs2safetensors.py SRCDIR WORKDIR

Builds manifests whose expected tensors are computed here independently
(element by element with struct), converts them with every --dtype through
the command line (pure-Python path, and the numpy path when numpy is
importable: both must give identical files), parses the outputs with a
minimal safetensors reader written from the format description, and checks
every byte. Also checks the bad inputs are refused with a clear message and
leave no file behind. Prints one line per check; exits 1 on the first
failure.
"""

import json
import math
import os
import struct
import subprocess
import sys

SRC, WORK = sys.argv[1], sys.argv[2]
TOOL = os.path.join(SRC, "contrib", "tfjs2safetensors.py")
sys.dont_write_bytecode = True  # never write into the source tree
sys.path.insert(0, os.path.join(SRC, "contrib"))
import tfjs2safetensors as t2s  # noqa: E402

try:
    import numpy  # noqa: F401
    HAVE_NP = True
except Exception:
    HAVE_NP = False

checks = 0


def ok(cond, what):
    global checks
    checks += 1
    if not cond:
        print("FAIL: " + what)
        sys.exit(1)


def run(args, expect_rc):
    p = subprocess.run([sys.executable, TOOL] + args, capture_output=True, text=True)
    ok(p.returncode == expect_rc, "%s: exit %d (want %d): %s" % (args, p.returncode, expect_rc, p.stderr))
    return p


def read_safetensors(path):
    """Minimal reader following the safetensors format description:
    returns {name: (dtype, shape, bytes)} and checks the layout rules."""
    data = open(path, "rb").read()
    ok(len(data) >= 8, path + ": shorter than 8 bytes")
    (n,) = struct.unpack_from("<Q", data, 0)
    ok((8 + n) % 8 == 0, path + ": data section not 8-byte aligned")
    hdr = json.loads(data[8 : 8 + n].decode("utf-8"))
    ok(data[8 : 8 + n].rstrip(b" ").endswith(b"}"), path + ": header padding is not spaces")
    meta = hdr.pop("__metadata__", {})
    ok(all(isinstance(v, str) for v in meta.values()), path + ": metadata values must be strings")
    body = data[8 + n :]
    spans = sorted((v["data_offsets"][0], v["data_offsets"][1], k) for k, v in hdr.items())
    pos = 0
    sizes = {"F32": 4, "F16": 2, "BF16": 2, "I32": 4, "BOOL": 1}
    out = {}
    for b, e, k in spans:
        ok(b == pos, "%s: hole or overlap before %s" % (path, k))
        v = hdr[k]
        numel = 1
        for d in v["shape"]:
            numel *= d
        ok(e - b == numel * sizes[v["dtype"]], "%s: %s size does not match its shape" % (path, k))
        ok(b % sizes[v["dtype"]] == 0, "%s: %s is not aligned to its element size" % (path, k))
        out[k] = (v["dtype"], v["shape"], body[b:e])
        pos = e
    ok(pos == len(body), path + ": file length is not 8 + N + last end offset")
    # The header lists tensors in data order (as the reference serializer does).
    ok([k for _, _, k in spans] == list(hdr.keys()), path + ": header order differs from data order")
    return out


# ----------------------------------------------------------------- fixtures

# float32 values that exercise rounding: ties to even and odd for BF16,
# the F16 overflow edge, subnormals, signed zero, infinities and NaNs.
F32_BITS = [
    0x3F800000, 0x3F808000, 0x3F818000, 0x3F808001, 0x7F7FFFFF, 0xFF7FFFFF,
    0x7FC00001, 0x7F800001, 0xFF800001, 0x7F800000, 0xFF800000, 0x80000000,
    0x00000001, 0x477FE000, 0x477FEFFF, 0x477FF000, 0x33800000, 0x33000000,
    0x387FC000, 0xC2F6E979, 0x3DCCCCCD, 0x00800000,
]
F32_RAW = struct.pack("<%dI" % len(F32_BITS), *F32_BITS)


def bf16_expect(u):
    if (u & 0x7F800000) == 0x7F800000 and (u & 0x7FFFFF):
        return (u >> 16) | 0x40
    lsb = (u >> 16) & 1
    return ((u + 0x7FFF + lsb) >> 16) & 0xFFFF


def f16_expect(u):
    """Exact IEEE binary32 -> binary16, round to nearest even, done with
    integers (independent of the tool's struct/numpy path)."""
    sign = (u >> 16) & 0x8000
    e = (u >> 23) & 0xFF
    m = u & 0x7FFFFF
    if e == 0xFF:
        if m == 0:
            return sign | 0x7C00
        h = 0x7C00 + (m >> 13)
        return sign | (h + 1 if h == 0x7C00 else h)
    if e == 0 and m == 0:
        return sign
    # value = M * 2^E with integer M
    if e == 0:
        M, E = m, -149
    else:
        M, E = m | 0x800000, e - 150
    # target: half subnormal step 2^-24; normal has 11-bit significand
    # find exponent of value: msb position
    msb = M.bit_length() - 1 + E  # floor(log2(value))
    step_exp = max(msb - 10, -24)  # ulp of the result
    shift = step_exp - E
    if shift <= 0:
        q = M << (-shift)
    else:
        q, r = M >> shift, M & ((1 << shift) - 1)
        half = 1 << (shift - 1)
        if r > half or (r == half and (q & 1)):
            q += 1
    # q * 2^step_exp
    if step_exp == -24:  # subnormal range (or rounds up into the normals)
        if q >= 0x400:
            return sign | (q + 0x0)  # 0x400 = smallest normal bits, same encoding
        return sign | q
    if q == 0x800:  # rounding carried into the next binade
        q = 0x400
        step_exp += 1
    he = step_exp + 10 + 15
    if he >= 31:
        return sign | 0x7C00
    return sign | (he << 10) | (q - 0x400)


def f16_to_f32_bits(h):
    return struct.unpack("<I", struct.pack("<f", struct.unpack("<e", struct.pack("<H", h))[0]))[0]


def make_model(d):
    """A two-shard graph model; returns expected F32/I32/BOOL bytes by name
    and the F16 bits stored for the float16-quantized weight."""
    os.makedirs(d, exist_ok=True)
    blobs, weights, exp = [], [], {}

    def add(entry, raw, expect):
        weights.append(entry)
        blobs.append(raw)
        exp[entry["name"]] = expect

    add({"name": "plain/f32", "shape": [2, 11], "dtype": "float32"}, F32_RAW, F32_RAW)
    ints = [0, 1, -1, 2147483647, -2147483648, 12345]
    add({"name": "int/i32", "shape": [6], "dtype": "int32"}, struct.pack("<6i", *ints), struct.pack("<6i", *ints))
    add({"name": "mask", "shape": [3], "dtype": "bool"}, bytes([1, 0, 1]), bytes([1, 0, 1]))
    q8 = list(range(0, 256, 5)) + [255]
    mn, sc = -0.5, 0.0039215686
    add({"name": "q/u8", "shape": [len(q8)], "dtype": "float32",
         "quantization": {"dtype": "uint8", "min": mn, "scale": sc, "original_dtype": "float32"}},
        bytes(q8), struct.pack("<%df" % len(q8), *[v * sc + mn for v in q8]))
    q16 = [0, 1, 40000, 65535, 123]
    add({"name": "q/u16", "shape": [5, 1], "dtype": "float32",
         "quantization": {"dtype": "uint16", "min": 1.25, "scale": 1e-4}},
        struct.pack("<5H", *q16), struct.pack("<5f", *[v * 1e-4 + 1.25 for v in q16]))
    # int32 dequantized with JavaScript Math.round: halves go up (-2.5 -> -2).
    qi = [0, 1, 2, 3, 4]
    add({"name": "q/int", "shape": [5], "dtype": "int32",
         "quantization": {"dtype": "uint8", "min": -2.5, "scale": 1.0}},
        bytes(qi), struct.pack("<5i", -2, -1, 0, 1, 2))
    hbits = [0x3C00, 0xC000, 0x7BFF, 0x0001, 0x8000, 0x7C00, 0x7E00, 0x3555]
    add({"name": "q/f16", "shape": [2, 2, 2], "dtype": "float32",
         "quantization": {"dtype": "float16", "original_dtype": "float32"}},
        struct.pack("<8H", *hbits), struct.pack("<8I", *[f16_to_f32_bits(h) for h in hbits]))
    add({"name": "scalar", "shape": [], "dtype": "float32"}, struct.pack("<f", 3.5), struct.pack("<f", 3.5))
    add({"name": "empty", "shape": [0, 4], "dtype": "float32"}, b"", b"")
    buf = b"".join(blobs)
    cut = 37  # the shard boundary falls inside a weight
    open(os.path.join(d, "group1-shard1of2.bin"), "wb").write(buf[:cut])
    open(os.path.join(d, "group1-shard2of2.bin"), "wb").write(buf[cut:])
    model = {"format": "graph-model", "modelTopology": {},
             "weightsManifest": [{"paths": ["group1-shard1of2.bin", "group1-shard2of2.bin"], "weights": weights}]}
    json.dump(model, open(os.path.join(d, "model.json"), "w"))
    return exp, struct.pack("<8H", *hbits)


def floats_of(dtype, raw):
    """Expected float tensor bytes converted from expected F32 bytes."""
    n = len(raw) // 4
    bits = struct.unpack("<%dI" % n, raw)
    if dtype == "F32":
        return raw
    if dtype == "BF16":
        return struct.pack("<%dH" % n, *[bf16_expect(u) for u in bits])
    return struct.pack("<%dH" % n, *[f16_expect(u) for u in bits])


# ------------------------------------------------------------------- checks

# Independent F16 reference agrees with the tool's per-element converter.
for u in F32_BITS + [0x477FEFFF, 0x38800000, 0x387FFFFF, 0x33800001, 0x3F7FF000]:
    (x,) = struct.unpack("<f", struct.pack("<I", u))
    got = struct.unpack("<H", t2s._f32_to_f16_one(u, x))[0]
    ok(got == f16_expect(u), "f16 of 0x%08x: tool 0x%04x, reference 0x%04x" % (u, got, f16_expect(u)))
    ok(t2s.f32_to_bf16_bits(u) == bf16_expect(u), "bf16 of 0x%08x" % u)
ok(t2s.f32_to_bf16_bits(0x3F808000) == 0x3F80, "bf16 tie rounds to even (down)")
ok(t2s.f32_to_bf16_bits(0x3F818000) == 0x3F82, "bf16 tie rounds to even (up)")
ok(t2s.f32_to_bf16_bits(0x7F800001) == 0x7FC0, "bf16 of a NaN with low payload stays NaN")
ok(t2s.f32_to_bf16_bits(0x7F7FFFFF) == 0x7F80, "bf16 of FLT_MAX rounds to infinity")
print("ok: rounding vectors")

mdir = os.path.join(WORK, "model")
exp, hraw = make_model(mdir)
paths = [["--no-numpy"]] + ([[]] if HAVE_NP else [])
made = {}
for extra in paths:
    out = os.path.join(WORK, "out-np" if not extra else "out-py")
    run(extra + ["-q", "--dtype", "f32,keep,bf16,f16", "-d", out, os.path.join(mdir, "model.json")], 0)
    for mode, suffix in (("f32", ""), ("keep", ".keep"), ("bf16", ".bf16"), ("f16", ".f16")):
        p = os.path.join(out, "model%s.safetensors" % suffix)
        ok(os.path.exists(p), p + " made")
        ok(not [f for f in os.listdir(out) if ".tmp." in f], "no temporary file left in " + out)
        made.setdefault(mode, []).append(open(p, "rb").read())
        st = read_safetensors(p)
        ok(set(st) == set(exp), "%s: tensor names" % p)
        for name, want in exp.items():
            dt, shape, got = st[name]
            if name in ("int/i32", "q/int"):
                ok(dt == "I32" and got == want, "%s %s: I32 bytes" % (p, name))
            elif name == "mask":
                ok(dt == "BOOL" and got == want, "%s %s: BOOL bytes" % (p, name))
            elif name == "q/f16" and mode in ("keep", "f16"):
                ok(dt == "F16" and got == hraw, "%s %s: float16 bits kept exactly" % (p, name))
            else:
                fdt = {"f32": "F32", "keep": "F32", "bf16": "BF16", "f16": "F16"}[mode]
                ok(dt == fdt, "%s %s: dtype %s, want %s" % (p, name, dt, fdt))
                ok(got == floats_of(fdt, want), "%s %s: %s bytes differ" % (p, name, fdt))
        ok(st["scalar"][1] == [] and st["empty"][1] == [0, 4], p + ": shapes kept")
    print("ok: conversions %s" % ("pure Python" if extra else "numpy"))
for mode, files in made.items():
    ok(all(f == files[0] for f in files), "numpy and pure-Python outputs are identical (%s)" % mode)

# The bare weights manifest form (a JSON list of groups) is read as well.
wm = os.path.join(mdir, "tiny-weights_manifest.json")
json.dump(json.load(open(os.path.join(mdir, "model.json")))["weightsManifest"], open(wm, "w"))
run(["-q", "--no-numpy", wm], 0)
ok(read_safetensors(os.path.join(mdir, "tiny.safetensors"))["plain/f32"][2] == F32_RAW, "weights manifest form")
print("ok: weights manifest form, output named tiny.safetensors")


def bad(name, mutate, words, make_files=None):
    d = os.path.join(WORK, "bad-" + name)
    make_model(d)
    m = json.load(open(os.path.join(d, "model.json")))
    mutate(m, d)
    json.dump(m, open(os.path.join(d, "model.json"), "w"))
    target = os.path.join(d, "out.safetensors")
    open(target, "wb").write(b"keep me")
    p = run(["--no-numpy", "-o", target, os.path.join(d, "model.json")], 1)
    ok(all(w in p.stderr for w in words), "%s: message %r names %s" % (name, p.stderr.strip(), words))
    ok(open(target, "rb").read() == b"keep me", name + ": existing output untouched")
    ok(not [f for f in os.listdir(d) if ".tmp." in f], name + ": no temporary file left")


def truncate_shard(m, d):
    p = os.path.join(d, "group1-shard2of2.bin")
    raw = open(p, "rb").read()
    open(p, "wb").write(raw[:-3])


bad("short-shard", truncate_shard, ["group 0", "shards hold", "need"])
bad("long-shard", lambda m, d: open(os.path.join(d, "group1-shard2of2.bin"), "ab").write(b"x"), ["shards hold"])
bad("missing-shard", lambda m, d: os.unlink(os.path.join(d, "group1-shard1of2.bin")), ["group1-shard1of2.bin"])
bad("string", lambda m, d: m["weightsManifest"][0]["weights"][0].update(dtype="string"), ["plain/f32", "string"])
bad("dup", lambda m, d: m["weightsManifest"][0]["weights"][1].update(name="plain/f32"), ["duplicate", "plain/f32"])
bad("escape", lambda m, d: m["weightsManifest"][0]["paths"].__setitem__(0, "../x.bin"), ["../x.bin"])
bad("shape", lambda m, d: m["weightsManifest"][0]["weights"][2].update(shape=[-1]), ["mask", "shape"])
bad("quant", lambda m, d: m["weightsManifest"][0]["weights"][3]["quantization"].pop("scale"), ["q/u8", "scale"])
bad("qdtype", lambda m, d: m["weightsManifest"][0]["weights"][3]["quantization"].update(dtype="int4"),
    ["q/u8", "int4"])
bad("nomanifest", lambda m, d: m.pop("weightsManifest"), ["weightsManifest"])
p = run(["--dtype", "f64", os.path.join(mdir, "model.json")], 2)
ok("f64" in p.stderr, "unknown --dtype is a usage error")
print("ok: bad inputs refused (%d checks in all)" % checks)
