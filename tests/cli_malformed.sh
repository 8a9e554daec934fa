#!/bin/sh
# cli_malformed.sh - a malformed safetensors input: pack names the problem,
# exits non-zero and leaves no output and no temporary file. Non-containers
# are refused by unpack/info/verify; an output naming the input is refused.
. "${top_srcdir:-.}/tests/cli_lib.sh"

check() { # kind, text the message must contain
	mkdir "$T/$1"
	"$PY" "$GEN" --malform "$1" --seed 5 "$T/$1/in.safetensors"
	rejects "$WCODEC" pack -q "$T/$1/in.safetensors" "$T/$1/out.wcodec" 2>"$T/$1/err" || fail "$1: pack accepted a malformed file"
	grep -q -- "$2" "$T/$1/err" || fail "$1: message does not say '$2': $(cat "$T/$1/err")"
	[ ! -e "$T/$1/out.wcodec" ] || fail "$1: output written"
	[ "$(leftovers "$T/$1")" = 0 ] || fail "$1: temporary file left"
}
check truncated "truncated"
check trailing "trailing bytes"
check overlap "overlap"
check hole "hole"
check badjson "not valid JSON"
check notobject "not an object"
check shape-mismatch "shape x"
check end-before-begin "< begin"
check missing-dtype 'missing "dtype"'
check negative-shape "negative"
check header-too-long "truncated"
check bad-metadata "__metadata__"

# An output that is the input itself (same name, hard link, symlink) would be
# replaced by the rename: pack and unpack refuse, and the input stays.
mkdir "$T/same"
"$PY" "$GEN" --profile weights --dtype BF16 --params 20000 --seed 3 "$T/same/in.safetensors"
cp "$T/same/in.safetensors" "$T/same/orig"
ln "$T/same/in.safetensors" "$T/same/hard.wcodec"
ln -s in.safetensors "$T/same/sym.wcodec"
for out in "$T/same/in.safetensors" "$T/same/hard.wcodec" "$T/same/sym.wcodec"; do
	rejects "$WCODEC" pack -q "$T/same/in.safetensors" "$out" 2>"$T/same/err" ||
		fail "pack over its own input ($out) accepted"
	grep -q "is the input file" "$T/same/err" || fail "pack over its input: $(cat "$T/same/err")"
	cmp -s "$T/same/in.safetensors" "$T/same/orig" || fail "pack over its input changed it"
done
"$WCODEC" pack -q "$T/same/in.safetensors" "$T/same/p.wcodec"
cp "$T/same/p.wcodec" "$T/same/p.orig"
rejects "$WCODEC" unpack -q "$T/same/p.wcodec" "$T/same/./p.wcodec" 2>"$T/same/err" ||
	fail "unpack over its own input accepted"
grep -q "is the input file" "$T/same/err" || fail "unpack over its input: $(cat "$T/same/err")"
cmp -s "$T/same/p.wcodec" "$T/same/p.orig" || fail "unpack over its input changed it"
[ "$(leftovers "$T/same")" = 0 ] || fail "temporary file left by a refused output"

# A FIFO given by mistake is an error at once, not a hang in open().
mkfifo "$T/fifo.wcodec" "$T/fifo.safetensors"
for cmd in info verify; do
	rc=0
	timeout 20 "$WCODEC" $cmd "$T/fifo.wcodec" 2>"$T/err" || rc=$?
	[ $rc != 124 ] || fail "$cmd of a FIFO hung"
	[ $rc != 0 ] || fail "$cmd of a FIFO succeeded"
	grep -q "not a regular file (a fifo)" "$T/err" || fail "$cmd of a FIFO: $(cat "$T/err")"
done
rc=0
timeout 20 "$WCODEC" unpack "$T/fifo.wcodec" "$T/fifo.out" 2>"$T/err" || rc=$?
[ $rc != 124 ] && [ $rc != 0 ] || fail "unpack of a FIFO: status $rc"
rc=0
timeout 20 "$WCODEC" pack -q "$T/fifo.safetensors" "$T/fifo2.wcodec" 2>"$T/err" || rc=$?
[ $rc != 124 ] && [ $rc != 0 ] || fail "pack of a FIFO: status $rc"
grep -q "not a regular file (a fifo)" "$T/err" || fail "pack of a FIFO: $(cat "$T/err")"
[ ! -e "$T/fifo2.wcodec" ] || fail "pack of a FIFO wrote an output"

# An empty file and a missing file.
: >"$T/empty.safetensors"
rejects "$WCODEC" pack -q "$T/empty.safetensors" "$T/e.wcodec" 2>"$T/err" || fail "empty input accepted"
grep -q "shorter than" "$T/err" || fail "empty input: $(cat "$T/err")"
rejects "$WCODEC" pack -q "$T/nope.safetensors" "$T/e.wcodec" 2>/dev/null || fail "missing input accepted"
[ ! -e "$T/e.wcodec" ] || fail "output written for a bad input"

# Not a container: every reader refuses it by its magic, and says what an
# unpacked safetensors file is.
"$PY" "$GEN" "$T/good.safetensors"
for cmd in info verify; do
	rejects "$WCODEC" $cmd "$T/good.safetensors" 2>"$T/err" || fail "$cmd accepted a safetensors file"
	grep -q "a safetensors file, not a packed one" "$T/err" || fail "$cmd: $(cat "$T/err")"
done
printf 'plain text, long enough\n' >"$T/text"
rejects "$WCODEC" info "$T/text" 2>"$T/err" || fail "info accepted a text file"
grep -q "unknown magic" "$T/err" || fail "info of text: $(cat "$T/err")"
rejects "$WCODEC" unpack "$T/good.safetensors" "$T/x" 2>/dev/null || fail "unpack accepted a safetensors file"
[ ! -e "$T/x" ] || fail "unpack wrote an output for a bad input"

# A truncated container: refused with a reason, no output.
"$WCODEC" pack -q "$T/good.safetensors" "$T/good.wcodec"
size=$(wc -c <"$T/good.wcodec" | tr -d ' ')
head -c $((size - 100)) "$T/good.wcodec" >"$T/cut.wcodec"
rejects "$WCODEC" unpack -q "$T/cut.wcodec" "$T/cut.out" 2>"$T/err" || fail "truncated container unpacked"
grep -q "file size" "$T/err" || fail "truncated container: $(cat "$T/err")"
[ ! -e "$T/cut.out" ] && [ "$(leftovers "$T")" = 0 ] || fail "unpack left an output"

# An input that shrinks while it is packed (the packer maps it): the bus
# error is reported and the temporary output removed. 128 MB of random BF16
# take long enough to pack that the truncation lands first; should the pack
# win the race, its output must still be whole and right.
S=$T/shrink
mkdir -p "$S"
"$PY" - "$S/in.safetensors" <<'PYEOF'
import json, os, struct, sys
n = 128 << 20
h = json.dumps({"w": {"dtype": "BF16", "shape": [n // 2], "data_offsets": [0, n]}}).encode()
h += b" " * (-len(h) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h)
    f.write(os.urandom(n))
PYEOF
cp "$S/in.safetensors" "$T/shrink.orig"
set +e
"$WCODEC" pack -q "$S/in.safetensors" "$S/out.wcodec" 2>"$T/err" &
pid=$!
i=0
until [ "$(leftovers "$S")" != 0 ] || ! kill -0 $pid 2>/dev/null || [ $i -ge 500 ]; do
	sleep 0.01
	i=$((i + 1))
done
truncate -s 4096 "$S/in.safetensors"
wait $pid
rc=$?
set -e
if [ $rc = 0 ]; then
	echo "# the pack finished before the truncation: its output is checked instead"
	"$WCODEC" unpack -q "$S/out.wcodec" "$T/shrink.back" && cmp -s "$T/shrink.back" "$T/shrink.orig" ||
		fail "a pack that finished gave a wrong output"
else
	[ $rc = 135 ] || [ $rc = 1 ] || fail "pack of a shrinking input: exit $rc ($(cat "$T/err"))"
	[ $rc = 1 ] || grep -q "did the input shrink" "$T/err" || fail "no message for the bus error: $(cat "$T/err")"
	[ ! -e "$S/out.wcodec" ] || fail "an output was written for a shrinking input"
	[ "$(leftovers "$S")" = 0 ] || fail "the temporary output was left: $(ls "$S")"
fi
exit 0
