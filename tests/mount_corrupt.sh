#!/bin/sh
# A damaged tile (one payload byte flipped in a copy) gives EIO on exactly the
# reads that touch it, with a logged reason; other bytes of the same file and
# other files read correctly; the daemon keeps running and unmounts cleanly.
. "${top_srcdir:-.}/tests/mount_lib.sh"

O=$TMP/orig
S=$TMP/src
mkdir -p "$O" "$S"
gen "$O/m.safetensors" --profile weights --dtype BF16 --params 2000000 --seed 21
pack "$O/m.safetensors" "$TMP/good.wcodec" 262144
cp "$TMP/good.wcodec" "$S/good.wcodec"
ntiles=$(check tiles "$TMP/good.wcodec" | wc -l)
[ "$ntiles" -ge 8 ] || fail "expected at least 8 tiles, got $ntiles"
bad=$((ntiles / 2))
set -- $(check flip "$TMP/good.wcodec" $bad "$S/bad.wcodec") || fail "flip"
voff=$1 dsize=$2

M=$TMP/mnt
# Foreground so the log is ours to read.
mkdir -p "$M"
MOUNTS="$MOUNTS $M"
"$WCODECFS" "$S" "$M" -f -o cache_size=8M 2> "$TMP/log" &
fg=$!
wait_mounted "$M" "$TMP/log"

check damaged "$M/bad.safetensors" "$O/m.safetensors" "$voff" "$dsize" || fail "damaged reads"
# Whole-file readers see EIO, not wrong bytes.
if cat "$M/bad.safetensors" > /dev/null 2>&1; then fail "cat of the damaged file succeeded"; fi
[ "$(sha "$M/good.safetensors")" = "$(sha "$O/m.safetensors")" ] || fail "the intact copy differs"
kill -0 $fg || fail "daemon died"
grep -q "^wcodecfs: error: $(cd "$S" && pwd -P)/bad.wcodec: read of .*tile $bad" "$TMP/log" ||
	fail "no logged reason naming $S/bad.wcodec and tile $bad: $(cat "$TMP/log")"
grep -qi "checksum\|corrupt\|hash" "$TMP/log" || fail "logged reason does not say why: $(cat "$TMP/log")"

fusermount3 -u "$M" || fail "unmount"
wait $fg || fail "daemon exit status $?"
echo "PASS"
