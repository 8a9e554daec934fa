#!/bin/sh
# A damaged tile (one payload byte flipped in a copy) gives EIO on exactly the
# reads that touch it, with a logged reason; other bytes of the same file and
# other files read correctly; the daemon keeps running and unmounts cleanly.
# A damaged fixed header makes the lookup fail (EIO); a damaged index or
# metadata, checked when the file is opened, makes every open fail (EIO),
# while stat and ls still show the file; both with the reason logged. The
# damaged tile's reads fail the same way with -o direct_io.
. "${top_srcdir:-.}/tests/mount_lib.sh"

O=$TMP/orig
S=$TMP/src
mkdir -p "$O" "$S"
gen "$O/m.safetensors" --profile weights --dtype BF16 --params 2000000 --seed 21
pack "$O/m.safetensors" "$TMP/good.wcodec" 262144
cp "$TMP/good.wcodec" "$S/good.wcodec"
cp "$TMP/good.wcodec" "$S/badhdr.wcodec"
printf 'X' | dd of="$S/badhdr.wcodec" bs=1 seek=1 conv=notrunc 2>/dev/null || fail "dd"
cp "$TMP/good.wcodec" "$S/badidx.wcodec"
# The metadata is the file's last section: a byte near the end.
sz=$(stat -c %s "$S/badidx.wcodec")
printf '\001' | dd of="$S/badidx.wcodec" bs=1 seek=$((sz - 10)) conv=notrunc 2>/dev/null || fail "dd"
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
# Whole-file readers see EIO, not wrong bytes; once the damage is known, a
# new open fails at once (no later reader gets a prefix of the file), and
# the log says so once.
if cat "$M/bad.safetensors" > /dev/null 2>&1; then fail "cat of the damaged file succeeded"; fi
for i in 1 2 3; do
	if (exec 5< "$M/bad.safetensors") 2>/dev/null; then fail "open $i of a file known to be damaged succeeded"; fi
done
[ "$(grep -c "bad.wcodec: damaged (tile $bad): later opens fail" "$TMP/log")" = 1 ] ||
	fail "the refused opens are not logged once: $(cat "$TMP/log")"
[ "$(sha "$M/good.safetensors")" = "$(sha "$O/m.safetensors")" ] || fail "the intact copy differs"
# The damaged header: no lookup; the damaged index: stat, no open.
stat "$M/badhdr.safetensors" >/dev/null 2>"$TMP/err" && fail "stat of a file with a damaged header"
grep -q "Input/output error" "$TMP/err" || fail "damaged header: $(cat "$TMP/err")"
[ "$(stat -c %s "$M/badidx.safetensors")" = "$(stat -c %s "$O/m.safetensors")" ] ||
	fail "damaged index: stat does not show the original's size"
for i in 1 2; do
	cat "$M/badidx.safetensors" >/dev/null 2>"$TMP/err" && fail "open of a file with a damaged index"
	grep -q "Input/output error" "$TMP/err" || fail "damaged index: $(cat "$TMP/err")"
done
src=$(cd "$S" && pwd -P)
grep -q "^wcodecfs: error: $src/badhdr.wcodec: cannot open as wcodec: .*bad magic" "$TMP/log" ||
	fail "no logged reason for the damaged header: $(cat "$TMP/log")"
grep -q "^wcodecfs: error: $src/badidx.wcodec: cannot open as wcodec: .*checksum mismatch" "$TMP/log" ||
	fail "no logged reason for the damaged index: $(cat "$TMP/log")"
grep "badidx" "$TMP/log" | grep -q "/proc/self" && fail "the log names a /proc path: $(cat "$TMP/log")"
kill -0 $fg || fail "daemon died"
grep -q "^wcodecfs: error: $(cd "$S" && pwd -P)/bad.wcodec: read of .*tile $bad" "$TMP/log" ||
	fail "no logged reason naming $S/bad.wcodec and tile $bad: $(cat "$TMP/log")"
grep -qi "checksum\|corrupt\|hash" "$TMP/log" || fail "logged reason does not say why: $(cat "$TMP/log")"
# Every line about the damaged tile names the file and the tensor, from the
# first (the decode's) on: none says only "tile N of source M".
grep -q "^wcodecfs: error: $src/bad.wcodec: tensor [^,]*, tile $bad: " "$TMP/log" ||
	fail "the decode's error names no file and tensor: $(cat "$TMP/log")"
grep -q "of source" "$TMP/log" && fail "a tile named by source id: $(grep "of source" "$TMP/log")"

fusermount3 -u "$M" || fail "unmount"
wait $fg || fail "daemon exit status $?"

# With -o direct_io every read reaches the daemon as asked: the same EIO,
# never wrong bytes.
"$WCODECFS" "$S" "$M" -f -o cache_size=8M,direct_io 2> "$TMP/log2" &
fg=$!
wait_mounted "$M" "$TMP/log2"
grep -q "direct_io: read() of decoded files bypasses the page cache; shared mappings of them" "$TMP/log2" ||
	fail "no log line for direct_io: $(cat "$TMP/log2")"
check damaged "$M/bad.safetensors" "$O/m.safetensors" "$voff" "$dsize" || fail "damaged reads (direct_io)"
if cat "$M/bad.safetensors" > /dev/null 2>&1; then fail "cat of the damaged file succeeded (direct_io)"; fi
[ "$(sha "$M/good.safetensors")" = "$(sha "$O/m.safetensors")" ] || fail "the intact copy differs (direct_io)"
grep -q "^wcodecfs: error: $(cd "$S" && pwd -P)/bad.wcodec: read of .*tile $bad" "$TMP/log2" ||
	fail "direct_io: no logged reason for the damaged tile: $(cat "$TMP/log2")"
fusermount3 -u "$M" || fail "unmount (direct_io)"
wait $fg || fail "daemon exit status $? (direct_io)"
echo "PASS"
