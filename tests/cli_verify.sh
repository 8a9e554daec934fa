#!/bin/sh
# cli_verify.sh - verify passes a good file, and reports a flipped payload
# byte (naming the tile) or a damaged index with a non-zero exit; unpack of a
# damaged file fails and writes nothing. verify and info of directories and
# several operands: every *.wcodec and *.qvq below, links not followed, a
# summary, exit 1 if any file is damaged or missing or a directory holds
# none.
. "${top_srcdir:-.}/tests/cli_lib.sh"

"$PY" "$GEN" --profile all --seed 21 "$T/in.safetensors"
"$WCODEC" pack -q --tile-size 4K "$T/in.safetensors" "$T/good.wcodec"
"$WCODEC" verify "$T/good.wcodec" >"$T/out" || fail "verify of a good file failed"
grep -q "OK" "$T/out" || fail "verify prints no OK"

# flip FILE OFFSET-EXPRESSION: the expression sees the header fields.
flip() {
	"$PY" - "$1" "$2" <<'PYEOF'
import struct, sys
path, expr = sys.argv[1], sys.argv[2]
b = bytearray(open(path, "rb").read())
f = dict(zip(["payload_off", "payload_len", "tables_off", "tables_len", "index_off", "index_len"],
             struct.unpack_from("<6Q", b, 64)))
pos = eval(expr, {}, f)
b[pos] ^= 0x20
open(path, "wb").write(b)
PYEOF
}

cp "$T/good.wcodec" "$T/payload.wcodec"
flip "$T/payload.wcodec" "payload_off + payload_len // 2"
rejects "$WCODEC" verify "$T/payload.wcodec" >"$T/out" 2>"$T/err" || fail "verify missed a flipped payload byte"
grep -q "damaged tile" "$T/err" || fail "verify does not name the tile: $(cat "$T/err")"
[ "$(grep -c 'damaged tile' "$T/err")" = 1 ] || fail "one flipped byte should damage one tile"
rejects "$WCODEC" unpack -q "$T/payload.wcodec" "$T/out.safetensors" 2>"$T/err" || fail "unpack of a damaged file succeeded"
[ ! -e "$T/out.safetensors" ] && [ "$(leftovers "$T")" = 0 ] || fail "unpack of a damaged file left an output"
rejects "$WCODEC" cat "$T/payload.wcodec" >/dev/null 2>&1 || fail "cat of a damaged file succeeded"

cp "$T/good.wcodec" "$T/index.wcodec"
flip "$T/index.wcodec" "index_off + 20"
rejects "$WCODEC" verify "$T/index.wcodec" 2>"$T/err" || fail "verify missed a damaged index"
grep -q "checksum" "$T/err" || fail "damaged index: $(cat "$T/err")"
# Directories: a tree of good files (one .qvq), other files, a symlink
# back up the tree (not followed: each file is verified once).
D=$T/tree
mkdir -p "$D/a/b" "$D/c" "$T/empty"
cp "$T/good.wcodec" "$D/a/one.wcodec"
cp "$T/good.wcodec" "$D/a/b/two.wcodec"
cp "$top_srcdir/tests/fuzz/corpus/qvq/small.qvq" "$D/c/imgs.qvq"
echo '{}' > "$D/a/config.json"
ln -s .. "$D/c/up"
"$WCODEC" verify "$D" >"$T/out" 2>"$T/err" || fail "verify of a good tree failed: $(cat "$T/err")"
[ "$(grep -c ': OK' "$T/out")" = 3 ] || fail "verify of the tree: $(cat "$T/out")"
grep -q "^verified 3 files: 3 OK, 0 damaged or unreadable$" "$T/out" || fail "no summary: $(cat "$T/out")"
grep -q "a/b/two.wcodec: OK" "$T/out" && grep -q "c/imgs.qvq: OK" "$T/out" || fail "files missed: $(cat "$T/out")"
"$WCODEC" verify -q "$D" >"$T/out" || fail "verify -q of a good tree failed"
[ ! -s "$T/out" ] || fail "verify -q printed: $(cat "$T/out")"
# info of the tree: a line per file and the totals; in JSON, decoded bytes
# are the original file for .wcodec and the RGB pixels for .qvq, stored
# bytes the files' sizes.
"$WCODEC" info "$D" >"$T/out" || fail "info of the tree failed"
[ "$(grep -c ' -> ' "$T/out")" = 4 ] && grep -q "^total: 3 files, " "$T/out" || fail "info of the tree: $(cat "$T/out")"
"$WCODEC" info --json "$D" >"$T/info.json" || fail "info --json of the tree failed"
"$WCODEC" info --json "$D/c/imgs.qvq" >"$T/qvq.json" || fail "info --json of the .qvq failed"
"$PY" - "$T/info.json" "$T/qvq.json" "$T/in.safetensors" "$D" <<'PYEOF' || fail "info --json totals"
import json, os, sys
d = json.load(open(sys.argv[1]))
q = json.load(open(sys.argv[2]))
orig = os.path.getsize(sys.argv[3])
files = [os.path.join(r, f) for r, _, fs in os.walk(sys.argv[4]) for f in fs if f.endswith((".wcodec", ".qvq"))]
assert len(d["files"]) == 3, d
assert d["decoded_bytes"] == 2 * orig + 3 * q["pixels"], d
assert d["file_bytes"] == sum(os.path.getsize(f) for f in files), d
assert abs(d["ratio"] - d["decoded_bytes"] / d["file_bytes"]) < 1e-9, d
PYEOF
# A damaged file in the tree, and a missing operand beside it.
cp "$T/payload.wcodec" "$D/a/b/two.wcodec"
rejects "$WCODEC" verify "$D" "$T/missing.wcodec" >"$T/out" 2>"$T/err" || fail "verify of a damaged tree passed"
grep -q "two.wcodec: damaged tile" "$T/err" || fail "the damaged file is not named: $(cat "$T/err")"
grep -q "missing.wcodec" "$T/err" || fail "the missing operand is not named: $(cat "$T/err")"
grep -q "^verified 4 files: 2 OK, 2 damaged or unreadable$" "$T/err" || fail "summary: $(cat "$T/err")"
rejects "$WCODEC" verify "$T/empty" 2>"$T/err" || fail "verify of a directory with no containers passed"
grep -q "no .wcodec or .qvq files" "$T/err" || fail "empty directory: $(cat "$T/err")"
# A good file beside it: the file is counted OK, the run still fails.
rejects "$WCODEC" verify "$T/good.wcodec" "$T/empty" >/dev/null 2>"$T/err" || fail "an empty directory beside a good file passed"
grep -q "^verified 1 file: 1 OK, 0 damaged or unreadable$" "$T/err" || fail "summary: $(cat "$T/err")"
rejects "$WCODEC" verify 2>/dev/null || fail "verify with no operand passed"
rejects "$WCODEC" info "$T/empty" >/dev/null 2>"$T/err" || fail "info of a directory with no containers passed"
grep -q "no .wcodec or .qvq files" "$T/err" || fail "info, empty directory: $(cat "$T/err")"
exit 0
