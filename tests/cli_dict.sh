#!/bin/sh
# cli_dict.sh - quantized tensors (few distinct values stored as F32, BF16,
# F16, F64) pack with the dictionary layout: pack/unpack/cat are
# byte-identical, verify passes, info reports the layout and both bounds,
# and the reader written from docs/FORMAT.md alone reproduces the file.
. "${top_srcdir:-.}/tests/cli_lib.sh"

"$PY" "$GEN" --profile quantized --seed 21 "$T/q.safetensors"
"$WCODEC" pack -q --tile-size 4K --chunk 1024 "$T/q.safetensors" "$T/q.wcodec" || fail "pack"
"$WCODEC" unpack -q "$T/q.wcodec" "$T/q.out" || fail "unpack"
cmp "$T/q.safetensors" "$T/q.out" || fail "unpack is not byte-identical"
"$WCODEC" cat "$T/q.wcodec" >"$T/q.cat" || fail "cat"
cmp "$T/q.safetensors" "$T/q.cat" || fail "cat is not byte-identical"
"$WCODEC" unpack -q --backend cpu --threads 1 "$T/q.wcodec" "$T/q.out1" || fail "unpack cpu"
cmp "$T/q.safetensors" "$T/q.out1" || fail "cpu unpack differs"
"$WCODEC" verify "$T/q.wcodec" >/dev/null || fail "verify"

# Same bytes with 1 or 3 threads.
"$WCODEC" pack -q -j 1 --tile-size 4K --chunk 1024 "$T/q.safetensors" "$T/j1.wcodec"
"$WCODEC" pack -q -j 3 --tile-size 4K --chunk 1024 "$T/q.safetensors" "$T/j3.wcodec"
cmp "$T/j1.wcodec" "$T/j3.wcodec" || fail "pack output depends on the thread count"

# info: the quantized tensors are "dict", the genuine one is not; the
# bound of the planes coded (index planes + dictionaries) is below the byte
# planes' bound, and the coded data stays near it.
"$WCODEC" info --json "$T/q.wcodec" >"$T/info.json" || fail "info --json"
"$PY" - "$T/info.json" <<'PYEOF' || fail "info --json content"
import json, sys
d = json.load(open(sys.argv[1]))
t = {x["name"]: x for x in d["tensors"]}
for name in ("u8q.0.f32", "u8q.1.f32", "u8q.0.bf16", "u8q.f64", "const.f32"):
    assert t[name]["layout"] == "dict", (name, t[name]["layout"])
    assert 1 <= t[name]["dict_entries"] <= 65536
assert t["u8q.0.f32"]["dict_entries"] <= 256 and len(t["u8q.0.f32"]["planes"]) == 1
assert t["genuine.f32"]["layout"] == "f32" and "dict_entries" not in t["genuine.f32"]
assert d["dict_bytes"] > 0
assert d["entropy_bound_bytes"] < 0.8 * d["plain_entropy_bound_bytes"], d
assert sum(x["coded_bytes"] for x in d["tensors"]) == d["coded_data_bytes"]
# a small file in 4 KiB tiles: per-tile headers and 1024-symbol chunks weigh
assert d["coded_data_bytes"] < 1.2 * d["entropy_bound_bytes"], d
PYEOF
"$WCODEC" info "$T/q.wcodec" >"$T/info.txt" || fail "info"
grep -q "u8q.0.f32.* dict " "$T/info.txt" || fail "info shows no dict layout"
grep -q "entry dictionary" "$T/info.txt" || fail "info shows no dictionary size"
grep -q "byte planes:" "$T/info.txt" || fail "info shows no byte-plane bound"

# The reader written from the format document alone agrees (it needs the
# zstd command for the metadata that names the dictionaries).
if command -v zstd >/dev/null 2>&1; then
	"$PY" "$top_srcdir/tests/doc_reader.py" "$T/q.wcodec" "$T/q.doc" || fail "doc_reader"
	cmp "$T/q.safetensors" "$T/q.doc" || fail "the document's reader disagrees"
fi

# A damaged dictionary byte is caught when the file is opened.
cp "$T/q.wcodec" "$T/bad.wcodec"
"$PY" - "$T/bad.wcodec" <<'PYEOF' || fail "damaging the dictionary"
import struct, sys
with open(sys.argv[1], "r+b") as f:
    off = struct.unpack_from("<Q", f.read(160), 136)[0] + 3
    f.seek(off)
    b = f.read(1)[0]
    f.seek(off)
    f.write(bytes([b ^ 0x10]))
PYEOF
rejects "$WCODEC" unpack -q "$T/bad.wcodec" "$T/bad.out" 2>"$T/err.txt" || fail "a damaged dictionary was accepted"
grep -qi "checksum" "$T/err.txt" || fail "no checksum error: $(cat "$T/err.txt")"
exit 0
