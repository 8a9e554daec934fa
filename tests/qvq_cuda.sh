#!/bin/sh
# .qvq decode on the GPU (CUDA plugin, cuda/vq_*.cu): `wcodec verify -b cuda`
# decodes every tile through the plugin's WC_JOB_VQ path and checks each
# tile's XXH3-64, i.e. the GPU bytes equal the encoder's reconstruction
# (and the CPU decode) bit for bit; no tile may fall back to the CPU; a
# damaged tile is still reported; pack-images -b cuda (k-means' search on
# the GPU) writes the CPU's archive byte for byte. Skips (77) without a built plugin or a GPU,
# or without numpy and PIL (qvq_check.py makes the images).
set -u
fail() { echo "FAIL: $*" >&2; exit 1; }
: "${WCODEC:?}" "${top_srcdir:?}" "${top_builddir:?}"
PYTHON3=${PYTHON3:-/usr/bin/python3}
plugin=$top_builddir/cuda/.libs
[ -e "$plugin/wcodec-cuda.so" ] || { echo "SKIP: no CUDA plugin built"; exit 77; }
export WCODEC_PLUGIN_DIR=$plugin
"$PYTHON3" -c 'import numpy, PIL' 2>/dev/null || { echo "SKIP: $PYTHON3 lacks numpy/PIL"; exit 77; }
"$WCODEC" --version | grep -q "^images: *PNG.*JPEG" || { echo "SKIP: wcodec reads no PNG or JPEG (--disable-image-codecs)"; exit 77; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/qvq-cuda.XXXXXX") || fail mktemp
trap 'rm -rf "$TMP"' EXIT
chk() { "$PYTHON3" "$top_srcdir/tests/qvq_check.py" "$@"; }
chk make-images "$TMP/in" || fail make-images
"$WCODEC" pack-images -q "$TMP/in" "$TMP/a.qvq" --codebook 200 --tile-size 4096 >/dev/null || fail pack
"$WCODEC" pack-images -q "$TMP/in" "$TMP/b.qvq" --codebook 3000 --size 30x22 >/dev/null || fail pack b
for a in a b; do
	if ! "$WCODEC" verify -b cuda "$TMP/$a.qvq" >"$TMP/v.out" 2>"$TMP/v.err"; then
		grep -qi "cuda\|gpu\|plugin\|device" "$TMP/v.err" && ! grep -q "damaged" "$TMP/v.err" &&
			{ echo "SKIP: no usable GPU: $(head -1 "$TMP/v.err")"; exit 77; }
		fail "verify -b cuda $a: $(cat "$TMP/v.err")"
	fi
	grep -q "on the CPU instead" "$TMP/v.err" && fail "$a: GPU path fell back: $(cat "$TMP/v.err")"
done
# k-means' nearest-entry search on the GPU (pack-images -b cuda) writes the
# CPU's archive byte for byte, with no fallback warning.
for k in 200 3000 65536; do
	"$WCODEC" pack-images -q -b cpu "$TMP/in" "$TMP/k$k.cpu.qvq" --codebook $k --seed 9 >/dev/null ||
		fail "pack -b cpu, K=$k"
	"$WCODEC" pack-images -q -b cuda "$TMP/in" "$TMP/k$k.gpu.qvq" --codebook $k --seed 9 \
		>/dev/null 2>"$TMP/k.err" || fail "pack -b cuda, K=$k: $(cat "$TMP/k.err")"
	[ ! -s "$TMP/k.err" ] || fail "pack -b cuda, K=$k said: $(cat "$TMP/k.err")"
	cmp -s "$TMP/k$k.cpu.qvq" "$TMP/k$k.gpu.qvq" || fail "K=$k: the GPU's k-means search changed the archive"
done
chk damage "$TMP/a.qvq" 1 || fail damage
"$WCODEC" verify -b cuda "$TMP/a.qvq" >/dev/null 2>"$TMP/d.err" && fail "damaged tile accepted on the GPU"
grep -q "damaged tile 1" "$TMP/d.err" || fail "damage not reported: $(cat "$TMP/d.err")"
exit 0
