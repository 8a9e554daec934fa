#!/bin/sh
# libwcodec's public API as a program outside the tree uses it
# (contrib/examples/wcodec_extract.c, built against the public headers only):
# the whole virtual file and each tensor come out byte for byte as in the
# original safetensors file, for every dtype; a missing tensor, a damaged
# payload and a truncated file are errors with a reason, never wrong bytes.
. "${top_srcdir:-.}/tests/cli_lib.sh"
X=${WCODEC_EXTRACT:-./contrib/examples/wcodec_extract}

"$PY" "$GEN" --profile all --seed 11 "$T/a.safetensors"
"$PY" "$GEN" --profile weights --dtype BF16 --params 300000 --seed 12 "$T/w.safetensors"
for f in a w; do
	"$WCODEC" pack -q --tile-size 16384 "$T/$f.safetensors" "$T/$f.wcodec" > /dev/null
	"$X" "$T/$f.wcodec" > "$T/$f.out" || fail "extract $f"
	cmp "$T/$f.safetensors" "$T/$f.out" || fail "$f: the virtual file differs"
	"$X" -l "$T/$f.wcodec" > "$T/$f.list" || fail "list $f"
	# Each tensor alone equals its byte range of the original.
	"$PY" - "$T/$f.safetensors" "$T/$f.list" "$X" "$T/$f.wcodec" <<'PY' || fail "$f: tensors"
import json, struct, subprocess, sys
path, listing, x, packed = sys.argv[1:5]
raw = open(path, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
hdr = json.loads(raw[8:8 + n])
hdr.pop("__metadata__", None)
rows = [l.split("\t") for l in open(listing).read().splitlines()]
assert sorted(r[0] for r in rows) == sorted(hdr), "the listing names other tensors"
for name, dtype, shape, size in rows:
    t = hdr[name]
    b, e = t["data_offsets"]
    assert dtype == t["dtype"] and int(size) == e - b, name
    assert json.loads(shape) == t["shape"], name
    got = subprocess.run([x, packed, name], check=True, stdout=subprocess.PIPE).stdout
    assert got == raw[8 + n + b:8 + n + e], name
print(len(rows), "tensors")
PY
done

rejects "$X" "$T/w.wcodec" no.such.tensor > /dev/null 2> "$T/err" || fail "a missing tensor was not an error"
grep -q 'no tensor named "no.such.tensor"' "$T/err" || fail "no reason for a missing tensor: $(cat "$T/err")"

# A flipped byte in a tile's payload (mount_check.py flip): an error naming a
# checksum, and no bytes past it.
"$PY" "$top_srcdir/tests/mount_check.py" flip "$T/w.wcodec" 5 "$T/bad.wcodec" > /dev/null ||
	fail "could not damage a tile"
size=$(wc -c < "$T/w.wcodec")
rejects "$X" "$T/bad.wcodec" > "$T/bad.out" 2> "$T/err" || fail "a damaged payload was not an error"
grep -qi 'checksum\|corrupt' "$T/err" || fail "no reason for the damage: $(cat "$T/err")"
head -c "$(wc -c < "$T/bad.out")" "$T/w.safetensors" | cmp -s - "$T/bad.out" ||
	fail "bytes written before the damaged tile differ from the original"

head -c $((size - 100)) "$T/w.wcodec" > "$T/short.wcodec"
rejects "$X" "$T/short.wcodec" > /dev/null 2> "$T/err" || fail "a truncated file was not an error"
[ -s "$T/err" ] || fail "no reason for the truncated file"
exit 0
