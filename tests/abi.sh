#!/bin/sh
# abi.sh - the library boundary: libwcodec.so exports exactly the functions
# listed in src/libwcodec.sym, each declared in a header `make install`
# installs (the *inc_HEADERS of the src/*/*.mk fragments), and the CUDA
# plugin, where built, needs nothing else from it.
set -eu
: "${top_srcdir:?}" "${top_builddir:?}"
fail() { echo "FAIL: abi.sh: $*" >&2; exit 1; }
so=$top_builddir/.libs/libwcodec.so
[ -f "$so" ] || { echo "SKIP: no shared libwcodec (built with --disable-shared)"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/wcodec_abi.XXXXXX")
trap 'rm -rf "$T"' EXIT

sort "$top_srcdir/src/libwcodec.sym" > "$T/listed"
nm -D --defined-only "$so" | awk '$2 ~ /^[TDBRVW]$/ { print $3 }' | sort > "$T/exported"
if ! cmp -s "$T/listed" "$T/exported"; then
	diff "$T/listed" "$T/exported" | head -20
	fail "libwcodec.so's exports differ from src/libwcodec.sym (< listed only, > exported only)"
fi

headers=$(sed -n 's/^[a-z]*inc_HEADERS *+\{0,1\}= *//p' "$top_srcdir"/src/*/*.mk)
[ -n "$headers" ] || fail "no installed headers found in src/*/*.mk"
for h in $headers; do cat "$top_srcdir/$h"; done > "$T/headers"
while read -r s; do
	grep -q "\\b$s(" "$T/headers" || fail "$s is exported but declared in no installed header ($headers)"
done < "$T/listed"

plugin=$top_builddir/cuda/.libs/wcodec-cuda.so
if [ -f "$plugin" ]; then
	nm -D --undefined-only "$plugin" | awk '$2 ~ /^wc_/ { print $2 }' | sort > "$T/needed"
	extra=$(comm -23 "$T/needed" "$T/listed")
	[ -z "$extra" ] || fail "the CUDA plugin needs what libwcodec.so does not export: $extra"
fi
echo "PASS: abi.sh ($(wc -l < "$T/listed") functions exported, each in an installed header)"
