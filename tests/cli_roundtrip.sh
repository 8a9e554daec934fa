#!/bin/sh
# cli_roundtrip.sh - pack/unpack/cat are byte-identical for every dtype; pack
# is deterministic across thread counts; info --json is valid and consistent.
. "${top_srcdir:-.}/tests/cli_lib.sh"

"$PY" "$GEN" --profile all --seed 11 "$T/all.safetensors"
"$PY" "$GEN" --profile weights --dtype BF16 --params 200000 --seed 12 "$T/bf16.safetensors"
"$PY" "$GEN" --profile weights --dtype F32 --params 100000 --seed 13 --no-metadata --no-pad "$T/f32.safetensors"

for f in all bf16 f32; do
	"$WCODEC" pack -q --tile-size 4K "$T/$f.safetensors" "$T/$f.wcodec" || fail "pack $f"
	"$WCODEC" unpack -q "$T/$f.wcodec" "$T/$f.out" || fail "unpack $f"
	cmp "$T/$f.safetensors" "$T/$f.out" || fail "$f: unpack is not byte-identical"
	a=$(sha256sum <"$T/$f.safetensors")
	b=$(sha256sum <"$T/$f.out")
	[ "$a" = "$b" ] || fail "$f: sha256 differs"
	"$WCODEC" cat "$T/$f.wcodec" >"$T/$f.cat" || fail "cat $f"
	cmp "$T/$f.safetensors" "$T/$f.cat" || fail "$f: cat is not byte-identical"
	"$WCODEC" unpack -q --backend cpu --threads 1 "$T/$f.wcodec" "$T/$f.out1" || fail "unpack cpu $f"
	cmp "$T/$f.safetensors" "$T/$f.out1" || fail "$f: cpu unpack differs"
done

# Default tile size, no verification, summary printed.
"$WCODEC" pack --no-verify "$T/bf16.safetensors" "$T/bf16d.wcodec" >"$T/pack.txt" || fail "pack default"
grep -q "entropy bound" "$T/pack.txt" || fail "pack prints no entropy bound"
grep -q "ratio" "$T/pack.txt" || fail "pack prints no ratio"
"$WCODEC" unpack -q "$T/bf16d.wcodec" "$T/bf16d.out" && cmp "$T/bf16.safetensors" "$T/bf16d.out" ||
	fail "default tile size round trip"

# Without OUT, output beside IN (X.safetensors <-> X.wcodec); an existing
# directory as OUT receives the file under that name, as cp does.
mkdir "$T/def" "$T/def/into"
cp "$T/bf16.safetensors" "$T/def/m.safetensors"
cp "$T/bf16.safetensors" "$T/def/plain"
"$WCODEC" pack -q --tile-size 4K "$T/def/m.safetensors" || fail "pack without OUT"
cmp -s "$T/def/m.wcodec" "$T/bf16.wcodec" || fail "pack without OUT: not m.wcodec"
"$WCODEC" pack -q --tile-size 4K "$T/def/plain" || fail "pack of a name without .safetensors"
[ -f "$T/def/plain.wcodec" ] || fail "pack without OUT: no plain.wcodec"
"$WCODEC" pack -q --tile-size 4K "$T/def/m.safetensors" "$T/def/into/" || fail "pack into a directory"
cmp -s "$T/def/into/m.wcodec" "$T/bf16.wcodec" || fail "pack into a directory: not into/m.wcodec"
rm "$T/def/m.safetensors"
"$WCODEC" unpack -q "$T/def/m.wcodec" || fail "unpack without OUT"
cmp -s "$T/def/m.safetensors" "$T/bf16.safetensors" || fail "unpack without OUT: not m.safetensors"
"$WCODEC" unpack -q "$T/def/into/m.wcodec" "$T/def/into" || fail "unpack into a directory"
cmp -s "$T/def/into/m.safetensors" "$T/bf16.safetensors" || fail "unpack into a directory: wrong file"
cp "$T/def/m.wcodec" "$T/def/nosuffix"
"$WCODEC" unpack -q "$T/def/nosuffix" || fail "unpack of a name without .wcodec"
cmp -s "$T/def/nosuffix.safetensors" "$T/bf16.safetensors" || fail "nosuffix.safetensors"
"$WCODEC" pack -q "$T/def" 2>"$T/err.txt" && fail "pack DIR without OUTDIR succeeded"
grep -q "needs OUTDIR" "$T/err.txt" || fail "pack DIR without OUTDIR: $(cat "$T/err.txt")"
[ "$(leftovers "$T/def")" = 0 ] || fail "temporary files left behind by default names"

# The same input packs to the same bytes with 1 or 3 threads.
"$WCODEC" pack -q -j 1 --tile-size 4K "$T/all.safetensors" "$T/j1.wcodec"
"$WCODEC" pack -q -j 3 --tile-size 4K "$T/all.safetensors" "$T/j3.wcodec"
cmp "$T/j1.wcodec" "$T/j3.wcodec" || fail "pack output depends on the thread count"

# An existing output is not overwritten unasked (as zstd does): -f does.
cp "$T/j1.wcodec" "$T/all.wcodec"
before=$(cksum < "$T/all.wcodec")
"$WCODEC" pack -q "$T/all.safetensors" "$T/all.wcodec" 2>"$T/err.txt" && fail "pack overwrote an existing OUT"
grep -q "exists (-f overwrites it)" "$T/err.txt" || fail "no reason for the refusal: $(cat "$T/err.txt")"
[ "$(cksum < "$T/all.wcodec")" = "$before" ] || fail "the refused pack changed OUT"
"$WCODEC" unpack -q "$T/all.wcodec" "$T/j1.wcodec" 2>"$T/err.txt" && fail "unpack overwrote an existing OUT"
grep -q "exists (-f overwrites it)" "$T/err.txt" || fail "no reason for the refusal: $(cat "$T/err.txt")"
"$WCODEC" pack -q -f "$T/all.safetensors" "$T/all.wcodec" || fail "pack -f"
[ "$(leftovers "$T")" = 0 ] || fail "temporary files left behind"

# info --json is JSON and agrees with the input.
"$WCODEC" info --json "$T/all.wcodec" >"$T/info.json" || fail "info --json"
size=$(wc -c <"$T/all.safetensors" | tr -d ' ')
"$PY" - "$T/info.json" "$size" <<'PYEOF' || fail "info --json content"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["format"] == "wcodec", d["format"]
assert d["decoded_bytes"] == int(sys.argv[2]), (d["decoded_bytes"], sys.argv[2])
assert d["ntensors"] == len(d["tensors"]) > 90
names = {t["name"] for t in d["tensors"]}
assert "bf16.empty" in names and "u64.one" in names and "model.bf16.weight" in names
assert sum(t["bytes"] for t in d["tensors"]) == d["data_bytes"]
assert sum(t["coded_bytes"] for t in d["tensors"]) == d["coded_data_bytes"]
assert {"BF16", "F32", "F16", "I64", "BOOL"} <= set(d["dtypes"])
w = [t for t in d["tensors"] if t["name"] == "model.bf16.weight"][0]
assert w["dtype"] == "BF16" and w["shape"] == [96, 160] and w["layout"] == "bf16"
assert 1.0 < w["planes"][0]["entropy_bits"] < 4.0
PYEOF
# "-" is standard input for pack and standard output for unpack, as in zstd.
"$WCODEC" pack --tile-size 4K - "$T/stdin.wcodec" <"$T/bf16.safetensors" >"$T/stdin.txt" || fail "pack - OUT"
cmp "$T/stdin.wcodec" "$T/bf16.wcodec" || fail "pack from standard input differs from pack of the file"
grep -q "^- -> " "$T/stdin.txt" || fail "pack - OUT does not name its input '-'"
[ -z "$(ls -A "$T" | grep '\.stdin\.')" ] || fail "pack - OUT left its copy of standard input behind"
"$WCODEC" unpack "$T/bf16.wcodec" - | cmp - "$T/bf16.safetensors" || fail "unpack X -: standard output differs"
if "$WCODEC" pack - <"$T/bf16.safetensors" 2>"$T/err.txt"; then fail "pack - without OUT succeeded"; fi
grep -q "needs OUT" "$T/err.txt" || fail "pack - without OUT: no reason given"

"$WCODEC" info "$T/all.wcodec" >"$T/info.txt" || fail "info"
grep -q "model.bf16.weight" "$T/info.txt" || fail "info lists no tensor"
grep -q "entropy bound" "$T/info.txt" || fail "info prints no entropy bound"
exit 0
