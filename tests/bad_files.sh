#!/bin/sh
# bad_files.sh - the regression corpus (tests/data/bad, its EXPECT file):
# every hostile or damaged file gives its expected outcome to `wcodec info`
# and `wcodec verify` (a reason, never a crash), and through one mount with
# cache_size=64M: refused and damaged files fail with EIO, good ones read
# right, the daemon serves throughout, its peak RSS stays within
# cache_size + 64 MiB, and it exits 0 at unmount. Every file of the
# directory must have its line.
. "${top_srcdir:-.}/tests/mount_lib.sh"
: "${WCODEC:?WCODEC must name the built wcodec}"

D=$top_srcdir/tests/data/bad
for f in "$D"/*; do
	name=${f##*/}
	[ "$name" = EXPECT ] && continue
	grep -q "^$name " "$D/EXPECT" || fail "$name has no line in $D/EXPECT"
done

S=$TMP/src
mkdir -p "$S"
while read -r name outcome reason; do
	case $name in '#'* | '') continue ;; esac
	f=$D/$name
	[ -f "$f" ] || fail "$name: listed but missing"
	cp "$f" "$S/$name"
	"$WCODEC" info "$f" > /dev/null 2> "$TMP/err"
	rc=$?
	[ $rc -lt 2 ] || fail "$name: info exited with $rc: $(cat "$TMP/err")"
	"$WCODEC" verify -q "$f" > /dev/null 2> "$TMP/verr"
	vrc=$?
	[ $vrc -lt 2 ] || fail "$name: verify exited with $vrc: $(cat "$TMP/verr")"
	case $outcome in
	refused)
		[ $rc = 1 ] || fail "$name: info accepted it"
		grep -q -- "$reason" "$TMP/err" || fail "$name: info does not say '$reason': $(cat "$TMP/err")"
		[ $vrc = 1 ] || fail "$name: verify accepted it" ;;
	damaged)
		[ $rc = 0 ] || fail "$name: info refused it: $(cat "$TMP/err")"
		[ $vrc = 1 ] || fail "$name: verify found nothing"
		grep -q -- "$reason" "$TMP/verr" || fail "$name: verify does not say '$reason': $(cat "$TMP/verr")" ;;
	ok)
		[ $rc = 0 ] && [ $vrc = 0 ] || fail "$name: info or verify failed: $(cat "$TMP/err" "$TMP/verr")" ;;
	*) fail "$name: unknown outcome $outcome" ;;
	esac
done < "$D/EXPECT"
note "wcodec info and verify: every file as expected"

M=$TMP/mnt
mkdir -p "$M"
MOUNTS="$MOUNTS $M"
# backend=cpu: the bound is on the daemon's own memory, not a CUDA context's
"$WCODECFS" "$S" "$M" -f -o cache_size=64M,backend=cpu 2> "$TMP/log" &
fg=$!
wait_mounted "$M" "$TMP/log"
while read -r name outcome reason; do
	case $name in '#'* | '') continue ;; esac
	v=$M/${name%.wcodec}.safetensors
	case $outcome in
	refused | damaged)
		if cat "$v" > /dev/null 2> "$TMP/err"; then fail "$name: read through the mount"; fi
		grep -q "Input/output error" "$TMP/err" || fail "$name: not EIO: $(cat "$TMP/err")" ;;
	ok) # the size, and the first 4 MiB (a claim of a gigabyte is not read whole)
		want=$("$WCODEC" info --json "$S/$name" | "$PYTHON3" -c 'import json,sys; print(json.load(sys.stdin)["decoded_bytes"])')
		[ "$(stat -c %s "$v")" = "$want" ] || fail "$name: the mount shows $(stat -c %s "$v") bytes, not $want"
		{ "$WCODEC" cat "$S/$name" || true; } | head -c 4194304 > "$TMP/want"
		head -c 4194304 "$v" | cmp - "$TMP/want" || fail "$name: the mount differs from wcodec cat" ;;
	esac
	kill -0 $fg || fail "the daemon died at $name: $(tail -3 "$TMP/log")"
done < "$D/EXPECT"
check_peak_rss "$fg" $((64 + 64)) "cache_size + 64 MiB"
fusermount3 -u "$M" || fail "unmount"
wait $fg || fail "the daemon exited with $?"
echo "PASS: bad_files.sh"
