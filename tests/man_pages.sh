#!/bin/sh
# man_pages.sh - the man pages format without a troff warning (a line that
# starts with "." or "'" is a request, so text such as ".wcodec passes
# through" at a line start silently vanishes), and every option that
# `wcodec CMD --help` and `wcodecfs --help` list is documented in its page.
set -eu
: "${WCODEC:=./wcodec}"
: "${WCODECFS:=./wcodecfs}"
: "${top_srcdir:=.}"
if ! command -v groff >/dev/null 2>&1; then
	echo "SKIP: no groff" >&2
	exit 77
fi
fail() {
	echo "FAIL: $*" >&2
	exit 1
}
T=$(mktemp -d "${TMPDIR:-/tmp}/wcodec_man.XXXXXX")
trap 'rm -rf "$T"' EXIT

for page in wcodec wcodecfs; do
	src=$top_srcdir/docs/$page.1
	[ -f "$src" ] || fail "no $src"
	# -ww: every warning; -z: no output, only the diagnostics.
	groff -man -ww -z "$src" >"$T/warn" 2>&1 || fail "groff failed on $src: $(cat "$T/warn")"
	[ ! -s "$T/warn" ] || fail "$src: $(cat "$T/warn")"
	# The rendered text, unhyphenated and on long lines, so that an option
	# name is never split.
	groff -man -Tascii -rHY=0 -rLL=250n "$src" 2>/dev/null | sed 's/.\x08//g' >"$T/$page.txt"
	[ -s "$T/$page.txt" ] || fail "$src renders empty"
done

# wcodec: every long option of every command.
"$WCODEC" help | sed -n 's/^  \([a-z-][a-z-]*\)  .*/\1/p' >"$T/cmds"
[ "$(wc -l <"$T/cmds")" -ge 6 ] || fail "wcodec help lists $(wc -l <"$T/cmds") commands"
n=0
while read -r cmd; do
	[ "$cmd" = help ] && continue
	grep -q "^ *wcodec $cmd\b\|^ *$cmd\b" "$T/wcodec.txt" || fail "wcodec.1 does not describe command $cmd"
	"$WCODEC" "$cmd" --help | grep -oE '^ +(-[a-zA-Z], )?--[a-z][a-z-]*' | sed 's/.*--/--/' >"$T/opts"
	while read -r opt; do
		n=$((n + 1))
		grep -q -- "$opt\b" "$T/wcodec.txt" || fail "wcodec.1 does not document $cmd $opt"
	done <"$T/opts"
done <"$T/cmds"
[ $n -ge 20 ] || fail "only $n wcodec options found in the --help texts"

# wcodecfs: every -o option its --help lists (lines "  name=VALUE" or "  name ").
[ -x "$WCODECFS" ] || { echo "# wcodecfs not built (no libfuse3): its options not checked"; exit 0; }
"$WCODECFS" --help 2>&1 | sed -n '/^wcodecfs options/,/^$/p' |
	sed -n 's/^  \([a-z_][a-z_]*\)[= ].*/\1/p' >"$T/fsopts"
[ "$(wc -l <"$T/fsopts")" -ge 10 ] || fail "wcodecfs --help lists $(wc -l <"$T/fsopts") -o options"
while read -r opt; do
	grep -q "^ *$opt\b" "$T/wcodecfs.txt" || fail "wcodecfs.1 does not document -o $opt"
done <"$T/fsopts"
exit 0
