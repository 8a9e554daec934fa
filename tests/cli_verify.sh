#!/bin/sh
# cli_verify.sh - verify passes a good file, and reports a flipped payload
# byte (naming the tile) or a damaged index with a non-zero exit; unpack of a
# damaged file fails and writes nothing.
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
exit 0
