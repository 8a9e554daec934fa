#!/bin/sh
# cli_lossy.sh - `wcodec pack --lossy int8|int4` (docs/FORMAT.md 2.2): exactly
# the tensors the rule or the globs name go lossy (F32, BF16, F16; two or
# more dimensions; odd sizes, one row, one column, 4-D; tiles that cut
# channels); every other tensor and the header come back byte for byte;
# a tensor of at most 256 values stays exact (a dictionary);
# each lossy tensor's decoded values are within its channel's half step of
# the input (clipped outliers aside) at over 25 dB, and `info --json`
# reports that SNR; the output does not depend on the thread count; verify,
# cat and unpack agree; and the reader written from docs/FORMAT.md alone
# decodes the same bytes. Skips (77) without numpy.
. "${top_srcdir:-.}/tests/cli_lib.sh"
"$PY" -c 'import numpy' 2>/dev/null || { echo "SKIP: no numpy" >&2; exit 77; }

"$PY" - "$T/in.safetensors" <<'PYEOF'
import json, struct, sys
import numpy as np
r = np.random.default_rng(5)
def bf16(a):  # round to nearest even, as bytes
    u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16).tobytes()
spec = [  # name, dtype, shape; channels of different magnitudes on the first axis
    ("w.f32", "F32", (67, 129)), ("w.bf16", "BF16", (37, 200)), ("w.f16", "F16", (53, 97)),
    ("row.f32", "F32", (1, 4099)), ("col.bf16", "BF16", (4100, 1)), ("conv.f16", "F16", (16, 8, 5, 7)),
    ("bias.f32", "F32", (4096,)), ("small.f32", "F32", (30, 30)), ("ids.i32", "I32", (80, 80)),
    ("tok_embed.f32", "F32", (100, 64)), ("quant.f32", "F32", (64, 128)),
]
hdr, data = {}, b""
for name, dt, shape in spec:
    a = r.normal(0, 1, shape) * (1 + np.arange(shape[0]).reshape((-1,) + (1,) * (len(shape) - 1)) % 7)
    a.flat[::997] *= 8  # a few outliers
    if dt == "I32":  # random bytes: RAW planes, which the document's reader decodes (no zstd)
        a = r.integers(-2 ** 31, 2 ** 31, shape)
    if name.startswith("quant"):  # shipped quantized: 200 values, kept exact
        a = np.round(a * 20) / 20
        a = np.clip(a, -5, 4.95)
    b = {"F32": lambda x: x.astype("<f4").tobytes(), "F16": lambda x: x.astype("<f2").tobytes(),
         "BF16": bf16, "I32": lambda x: x.astype("<i4").tobytes()}[dt](a)
    hdr[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [len(data), len(data) + len(b)]}
    data += b
h = json.dumps(hdr).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + data)
PYEOF

"$WCODEC" pack -q --lossy int8 --tile-size 4K -j 1 "$T/in.safetensors" "$T/a.wcodec" || fail "pack --lossy"
"$WCODEC" pack -q --lossy int8 --tile-size 4K -j 3 "$T/in.safetensors" "$T/b.wcodec" || fail "pack --lossy -j 3"
cmp "$T/a.wcodec" "$T/b.wcodec" || fail "lossy output depends on the thread count"
"$WCODEC" verify "$T/a.wcodec" >/dev/null || fail "verify"
"$WCODEC" unpack -q "$T/a.wcodec" "$T/a.out" || fail "unpack"
"$WCODEC" cat "$T/a.wcodec" >"$T/a.cat" || fail "cat"
cmp "$T/a.out" "$T/a.cat" || fail "cat and unpack differ"
"$WCODEC" unpack -q --backend cpu --threads 1 "$T/a.wcodec" "$T/a.out1" || fail "unpack, one thread"
cmp "$T/a.out" "$T/a.out1" || fail "unpack differs with one thread"
"$WCODEC" info --json "$T/a.wcodec" >"$T/info.json" || fail "info --json"
"$WCODEC" info "$T/a.wcodec" | grep -q "w.bf16 .* int8 .*bits/weight, SNR" || fail "info shows no lossy tensor"

"$PY" - "$T/in.safetensors" "$T/a.out" "$T/info.json" "w.f32 w.bf16 w.f16 row.f32 col.bf16 conv.f16" <<'PYEOF' ||
import json, struct, sys
import numpy as np
def load(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    return b[:8 + n], json.loads(b[8:8 + n]), b[8 + n:]
def floats(h, d, k):
    t = h[k]
    raw = d[t["data_offsets"][0]:t["data_offsets"][1]]
    if t["dtype"] == "BF16":
        return (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32).reshape(t["shape"])
    return np.frombuffer(raw, {"F32": "<f4", "F16": "<f2", "I32": "<i4"}[t["dtype"]]).astype(np.float64).reshape(t["shape"])
pa, ha, da = load(sys.argv[1])
pb, hb, db = load(sys.argv[2])
assert pa == pb, "the header changed"
info = {t["name"]: t for t in json.load(open(sys.argv[3]))["tensors"]}
want = set(sys.argv[4].split())
got = {k for k, t in info.items() if t["layout"] == "int8"}
assert got == want, (got, want)
for k, t in ha.items():
    ra = da[t["data_offsets"][0]:t["data_offsets"][1]]
    rb = db[t["data_offsets"][0]:t["data_offsets"][1]]
    if k not in want:
        assert ra == rb, "lossless tensor %s changed" % k
        continue
    x, y = floats(ha, da, k).astype(np.float64), floats(hb, db, k).astype(np.float64)
    lo = info[k]["lossy"]
    axis = 0 if lo["axis"] == "first" else x.ndim - 1
    assert lo["channels"] == x.shape[axis], (k, lo)
    m = np.moveaxis(x, axis, 0).reshape(x.shape[axis], -1)
    e = np.abs(np.moveaxis(y - x, axis, 0).reshape(x.shape[axis], -1))
    step = np.abs(m).max(axis=1, keepdims=True) / 127  # the largest scale a channel can have
    inside = np.abs(m) <= 0.5 * np.abs(m).max(axis=1, keepdims=True)  # never clipped
    assert (e[inside] <= 0.5 * np.broadcast_to(step, e.shape)[inside] * 1.01 + np.abs(m[inside]) / 128).all(), k
    snr = 10 * np.log10((x ** 2).sum() / ((y - x) ** 2).sum())
    assert snr > 25, (k, snr)  # one scale for a whole row of outliers: 30 dB
    assert abs(snr - lo["snr_db"]) < 0.05, (k, snr, lo["snr_db"])
    assert abs(np.abs(y - x).max() - lo["max_abs_err"]) <= 1e-6 * max(1.0, lo["max_abs_err"]), (k, lo)
    assert 0 < lo["bits_per_weight"] < 10, (k, lo)  # small tensors in 4 KiB tiles, scales included
PYEOF
	fail "lossy tensors"

# Globs: exactly the included tensors, less the excluded ones.
"$WCODEC" pack -q --lossy int8 --lossy-include 'w.*' --lossy-include 'conv.*' --lossy-exclude '*.f16' \
	"$T/in.safetensors" "$T/g.wcodec" || fail "pack with globs"
"$WCODEC" info --json "$T/g.wcodec" >"$T/g.json" || fail "info --json (globs)"
"$PY" - "$T/g.json" <<'PYEOF' || fail "globs select the wrong tensors"
import json, sys
got = {t["name"] for t in json.load(open(sys.argv[1]))["tensors"] if t["layout"] == "int8"}
assert got == {"w.f32", "w.bf16"}, got
PYEOF
rejects "$WCODEC" pack -q --lossy int2 "$T/in.safetensors" "$T/x.wcodec" || fail "--lossy int2 accepted"
rejects "$WCODEC" pack -q --group 64 "$T/in.safetensors" "$T/x.wcodec" || fail "--group without --lossy accepted"
"$WCODEC" pack -q --lossy int8 --group 32 "$T/in.safetensors" "$T/g8.wcodec" || fail "int8 in groups"
"$WCODEC" info --json "$T/g8.wcodec" | "$PY" -c '
import json, sys
t = [t for t in json.load(sys.stdin)["tensors"] if t["layout"] == "int8"]
assert t and all(x["lossy"]["group"] == 32 for x in t), t' || fail "int8 in groups of 32"
"$WCODEC" unpack -q "$T/g8.wcodec" "$T/g8.out" || fail "unpack int8 in groups"
rejects "$WCODEC" pack -q --lossy-include 'w.*' "$T/in.safetensors" "$T/x.wcodec" ||
	fail "--lossy-include without --lossy accepted"

# int4 in groups of 64: the same tensors, smaller, at a lower SNR; info
# reports the group.
"$WCODEC" pack -q --lossy int4 --group 64 --tile-size 4K "$T/in.safetensors" "$T/q4.wcodec" || fail "pack --lossy int4"
"$WCODEC" verify "$T/q4.wcodec" >/dev/null || fail "verify int4"
"$WCODEC" unpack -q "$T/q4.wcodec" "$T/q4.out" || fail "unpack int4"
"$WCODEC" info --json "$T/q4.wcodec" >"$T/q4.json" || fail "info --json int4"
"$PY" - "$T/in.safetensors" "$T/q4.out" "$T/q4.json" "$T/info.json" <<'PYEOF' || fail "int4 tensors"
import json, struct, sys
import numpy as np
def load(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    return h, b[8 + n:]
ha, da = load(sys.argv[1])
hb, db = load(sys.argv[2])
q4 = {t["name"]: t for t in json.load(open(sys.argv[3]))["tensors"]}
q8 = {t["name"]: t for t in json.load(open(sys.argv[4]))["tensors"]}
lossy = {k for k, t in q4.items() if t["layout"] == "int4"}
assert lossy == {k for k, t in q8.items() if t["layout"] == "int8"}, lossy
for k in lossy:
    assert q4[k]["lossy"]["group"] == 64 and q4[k]["lossy"]["codes"] == "int4", q4[k]
    assert q4[k]["coded_bytes"] < 0.9 * q8[k]["coded_bytes"], (k, q4[k]["coded_bytes"], q8[k]["coded_bytes"])
    assert q4[k]["lossy"]["snr_db"] > 12, q4[k]
for k, t in ha.items():
    if k == "__metadata__" or k in lossy:
        continue
    o = t["data_offsets"]
    assert da[o[0]:o[1]] == db[o[0]:o[1]], k
PYEOF

# The reader written from the format document alone agrees (it needs the
# zstd command for the metadata naming the lossy tensors).
if command -v zstd >/dev/null 2>&1; then
	"$PY" "$top_srcdir/tests/doc_reader.py" "$T/a.wcodec" "$T/a.doc" || fail "doc_reader"
	cmp "$T/a.out" "$T/a.doc" || fail "the document's reader decodes the lossy tensors differently"
	"$PY" "$top_srcdir/tests/doc_reader.py" "$T/q4.wcodec" "$T/q4.doc" || fail "doc_reader int4"
	cmp "$T/q4.out" "$T/q4.doc" || fail "the document's reader decodes the int4 tensors differently"
	"$PY" "$top_srcdir/tests/doc_reader.py" "$T/g8.wcodec" "$T/g8.doc" || fail "doc_reader int8 in groups"
	cmp "$T/g8.out" "$T/g8.doc" || fail "the document's reader decodes int8 in groups differently"
fi
echo "ok: lossy int8 tensors"
