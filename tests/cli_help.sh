#!/bin/sh
# cli_help.sh - --help and --version of the tool and of every command; usage
# errors exit with status 2.
. "${top_srcdir:-.}/tests/cli_lib.sh"

"$WCODEC" --help | grep -q "Usage: wcodec" || fail "wcodec --help"
"$WCODEC" --version | grep -q "wcodec" || fail "wcodec --version"
for cmd in pack unpack info verify cat; do
	"$WCODEC" $cmd --help >"$T/h" || fail "$cmd --help exits non-zero"
	grep -q "Usage: wcodec $cmd" "$T/h" || fail "$cmd --help: $(cat "$T/h")"
	"$WCODEC" $cmd --version | grep -q "wcodec $cmd" || fail "$cmd --version"
	set +e
	"$WCODEC" $cmd 2>/dev/null
	rc=$?
	"$WCODEC" $cmd --no-such-option x 2>/dev/null
	rc2=$?
	set -e
	[ $rc = 2 ] || fail "$cmd without arguments: status $rc, want 2"
	[ $rc2 = 2 ] || fail "$cmd with a bad option: status $rc2, want 2"
done
set +e
"$WCODEC" frobnicate 2>/dev/null
[ $? = 2 ] || fail "unknown command: want status 2"
# `wcodec help [COMMAND]`: the list, or that command's --help.
"$WCODEC" help | grep -q "pack-images" || fail "help does not list the commands"
[ "$("$WCODEC" help verify)" = "$("$WCODEC" verify --help)" ] || fail "help verify differs from verify --help"
"$WCODEC" help frobnicate 2>/dev/null
[ $? = 2 ] || fail "help of an unknown command: want status 2"
"$WCODEC" pack --tile-size 1000 a b 2>/dev/null
[ $? = 2 ] || fail "bad --tile-size: want status 2"
"$WCODEC" unpack --backend gpu a b 2>/dev/null
[ $? = 2 ] || fail "bad --backend: want status 2"
exit 0
