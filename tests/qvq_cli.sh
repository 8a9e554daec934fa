#!/bin/sh
# wcodec pack-images / info / verify / unpack on .qvq archives: every input
# kind (PNG RGB/RGBA/palette/grey/16-bit, JPEG colour/grey/CMYK, PPM, PGM, odd
# sides) packs, in the codebook and the transform mode; unpack shows each
# image as a PPM of its true size close to the original; --size gives one images.npy that numpy maps; labels from
# directories; packing is reproducible; damaged archives are refused.
set -u
fail() { echo "FAIL: $*" >&2; exit 1; }
: "${WCODEC:?WCODEC must name the built wcodec}"
: "${top_srcdir:?}"
PYTHON3=${PYTHON3:-/usr/bin/python3}
"$PYTHON3" -c 'import numpy, PIL' 2>/dev/null || { echo "SKIP: $PYTHON3 lacks numpy/PIL"; exit 77; }
"$WCODEC" --version | grep -q "^images: *PNG.*JPEG" || { echo "SKIP: wcodec reads no PNG or JPEG (--disable-image-codecs)"; exit 77; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/qvq-cli.XXXXXX") || fail mktemp
trap 'rm -rf "$TMP"' EXIT
chk() { "$PYTHON3" "$top_srcdir/tests/qvq_check.py" "$@"; }
umask 022

chk make-images "$TMP/in" || fail "make-images"

# Native sizes, 1-byte indices.
"$WCODEC" pack-images "$TMP/in" "$TMP/a.qvq" --codebook 200 --seed 3 --threads 2 >"$TMP/pack.out" ||
	fail "pack-images exited $?"
grep -q "9 images" "$TMP/pack.out" || fail "pack-images report: $(cat "$TMP/pack.out")"
grep -q "PSNR" "$TMP/pack.out" || fail "no PSNR in the report"
ls "$TMP" | grep -q tmp && fail "temporary file left behind"
[ "$(stat -c %a "$TMP/a.qvq")" = 644 ] || fail "archive mode $(stat -c %a "$TMP/a.qvq") under umask 022"
"$WCODEC" info "$TMP/a.qvq" >"$TMP/info.out" || fail "info exited $?"
grep -q "images: *9" "$TMP/info.out" || fail "info: $(cat "$TMP/info.out")"
grep -q "codebook: 200 entries of 2x2x3" "$TMP/info.out" || fail "info codebook: $(cat "$TMP/info.out")"
"$WCODEC" verify "$TMP/a.qvq" >/dev/null || fail "verify of a good archive failed"
"$WCODEC" unpack "$TMP/a.qvq" "$TMP/out" >/dev/null || fail "unpack exited $?"
chk shown "$TMP/out" "$TMP/in" 24 || fail "unpacked images"
# Without OUT, Y.qvq unpacks to directory Y beside it; a name without .qvq
# needs OUT (nothing would tell the archive and the directory apart).
cp "$TMP/a.qvq" "$TMP/dflt.qvq"
"$WCODEC" unpack -q "$TMP/dflt.qvq" || fail "unpack without OUT exited $?"
diff -r "$TMP/out" "$TMP/dflt" >/dev/null || fail "unpack without OUT differs"
cp "$TMP/a.qvq" "$TMP/nosuffix"
"$WCODEC" unpack -q "$TMP/nosuffix" 2>"$TMP/err" && fail "unpack of a name without .qvq, no OUT"
grep -q "name the output" "$TMP/err" || fail "no reason: $(cat "$TMP/err")"
chk labels "$TMP/out" || fail "labels"
[ -e "$TMP/out/images.npy" ] && fail "images.npy although the sizes differ"

# The transform mode: --quality and --psnr; the same pixels through unpack
# as through verify's decode; a PSNR asked is kept; bad values refused.
"$WCODEC" pack-images -q "$TMP/in" "$TMP/t.qvq" --quality 95 --threads 2 >"$TMP/t.out" ||
	fail "pack-images --quality exited $?"
grep -q "transform, steps" "$TMP/t.out" || fail "transform report: $(cat "$TMP/t.out")"
"$WCODEC" info "$TMP/t.qvq" | grep -q "format version 2" || fail "transform archive not version 2"
"$WCODEC" info "$TMP/t.qvq" | grep -q "mode: *transform" || fail "info: $("$WCODEC" info "$TMP/t.qvq")"
"$WCODEC" info --json "$TMP/t.qvq" | grep -q '"mode": "transform"' || fail "info --json mode"
"$WCODEC" verify "$TMP/t.qvq" >/dev/null || fail "verify of a transform archive failed"
"$WCODEC" unpack -q "$TMP/t.qvq" "$TMP/tout" || fail "unpack of a transform archive exited $?"
chk shown "$TMP/tout" "$TMP/in" 24 || fail "transform: unpacked images"
chk labels "$TMP/tout" || fail "transform: labels"
# docs/FORMAT.md 6.8 is enough: a reader written from it alone shows the same images.
"$PYTHON3" "$top_srcdir/tests/doc_reader_qvq.py" "$TMP/t.qvq" "$TMP/tdoc" || fail "doc_reader_qvq exited $?"
for f in $(cd "$TMP/tdoc" && find . -type f); do
	cmp -s "$TMP/tdoc/$f" "$TMP/tout/$f" || fail "transform: the document's reader disagrees on $f"
done
[ "$(cd "$TMP/tdoc" && find . -type f | wc -l)" = 9 ] || fail "doc reader: $(cd "$TMP/tdoc" && find . -type f | wc -l) images"
"$WCODEC" pack-images -q "$TMP/in" "$TMP/p.qvq" --psnr 30 >"$TMP/p.out" || fail "pack-images --psnr exited $?"
db=$(sed -n 's/.*PSNR \([0-9.]*\) dB.*/\1/p' "$TMP/p.out")
"$PYTHON3" -c "import sys; sys.exit(0 if float('$db') >= 30 else 1)" || fail "--psnr 30 gave $db dB"
# --chunk: the archive's rANS chunk; the same pixels in chunks of 64 symbols
"$WCODEC" info "$TMP/t.qvq" | grep -q "rANS chunk 16384 symbols" || fail "default chunk: $("$WCODEC" info "$TMP/t.qvq")"
"$WCODEC" pack-images -q "$TMP/in" "$TMP/c64.qvq" --quality 95 --chunk 64 >/dev/null || fail "pack-images --chunk exited $?"
"$WCODEC" info "$TMP/c64.qvq" | grep -q "rANS chunk 64 symbols" || fail "--chunk 64: $("$WCODEC" info "$TMP/c64.qvq")"
"$WCODEC" unpack -q "$TMP/c64.qvq" "$TMP/cout" || fail "unpack of a --chunk 64 archive exited $?"
for f in $(cd "$TMP/tout" && find . -type f); do
	cmp -s "$TMP/cout/$f" "$TMP/tout/$f" || fail "--chunk 64: $f differs"
done
"$WCODEC" pack-images -q "$TMP/in" "$TMP/x.qvq" --chunk 100 2>/dev/null && fail "--chunk 100 accepted"
"$WCODEC" pack-images -q "$TMP/in" "$TMP/x.qvq" --quality 0 2>/dev/null && fail "--quality 0 accepted"
"$WCODEC" pack-images -q "$TMP/in" "$TMP/x.qvq" --psnr abc 2>/dev/null && fail "--psnr abc accepted"
"$WCODEC" pack-images -q "$TMP/in" "$TMP/x.qvq" --quality 80 --psnr 30 2>/dev/null && fail "--quality with --psnr accepted"
"$WCODEC" pack-images -q "$TMP/in" "$TMP/x.qvq" --mode codebook --quality 80 2>/dev/null &&
	fail "--mode codebook with --quality accepted"
[ -e "$TMP/x.qvq" ] && fail "a refused pack left an archive"

# Reproducible with --seed, whatever the thread count.
"$WCODEC" pack-images "$TMP/in" "$TMP/b.qvq" --codebook 200 --seed 3 --threads 1 >/dev/null ||
	fail "second pack"
cmp -s "$TMP/a.qvq" "$TMP/b.qvq" || fail "same seed, different archives"
# Without OUT: DIR.qvq beside DIR (a trailing slash ignored); OUT a
# directory: OUT/DIR.qvq; "." names no archive.
"$WCODEC" pack-images -q "$TMP/in/" --codebook 200 --seed 3 >/dev/null || fail "pack-images without OUT"
cmp -s "$TMP/a.qvq" "$TMP/in.qvq" || fail "pack-images without OUT: not in.qvq"
mkdir "$TMP/arch"
"$WCODEC" pack-images -q "$TMP/in" "$TMP/arch" --codebook 200 --seed 3 >/dev/null ||
	fail "pack-images into a directory"
cmp -s "$TMP/a.qvq" "$TMP/arch/in.qvq" || fail "pack-images into a directory: not arch/in.qvq"
(cd "$TMP/in" && "$WCODEC" pack-images -q . 2>"$TMP/err") && fail "pack-images . without OUT"
grep -q "name OUT.qvq" "$TMP/err" || fail "pack-images .: $(cat "$TMP/err")"
rm -f "$TMP/in.qvq"

# Resize + centre crop, 2-byte indices: images.npy.
"$WCODEC" pack-images "$TMP/in" "$TMP/c.qvq" --size 20x16 --codebook 1000 --seed 1 >/dev/null ||
	fail "pack-images --size"
"$WCODEC" unpack "$TMP/c.qvq" "$TMP/outc" >/dev/null || fail "unpack c"
chk npy "$TMP/outc" 9 16 20 || fail "images.npy"
"$WCODEC" verify "$TMP/c.qvq" >/dev/null || fail "verify c"

# Damage: a flipped payload byte is found by verify; truncation by info.
cp "$TMP/c.qvq" "$TMP/d.qvq"
chk damage "$TMP/d.qvq" 0 || fail "damage"
"$WCODEC" verify "$TMP/d.qvq" >/dev/null 2>"$TMP/verify.err" && fail "verify accepted a damaged tile"
grep -q "tile 0" "$TMP/verify.err" || fail "verify does not name the tile: $(cat "$TMP/verify.err")"
head -c 1000 "$TMP/c.qvq" >"$TMP/t.qvq"
"$WCODEC" info "$TMP/t.qvq" >/dev/null 2>"$TMP/info.err" && fail "info accepted a truncated archive"
grep -qi "qvq" "$TMP/info.err" || fail "no reason given: $(cat "$TMP/info.err")"

# CMYK JPEGs (Adobe-inverted, as PIL and Photoshop write them) load as PIL's
# convert("RGB") gives them, bit for bit: every patch fits the codebook, so
# the archive holds exactly what the loader decoded.
chk make-cmyk "$TMP/cmyk" || fail "make-cmyk"
"$WCODEC" pack-images -q "$TMP/cmyk" "$TMP/cmyk.qvq" --codebook 256 >/dev/null || fail "pack-images of CMYK JPEGs"
"$WCODEC" unpack -q "$TMP/cmyk.qvq" "$TMP/cmyk.out" || fail "unpack of the CMYK archive"
chk exact "$TMP/cmyk.out" "$TMP/cmyk" || fail "CMYK JPEGs"

# An output that cannot be written is refused before any image is read:
# the error names it, not the broken image that reading would meet first.
mkdir "$TMP/badin"
cp "$TMP/in/cats/rgb.png" "$TMP/badin/"
echo "not a png" >"$TMP/badin/broken.png"
"$WCODEC" pack-images -q "$TMP/badin" "$TMP/nodir/x.qvq" 2>"$TMP/err" && fail "packed into a missing directory"
grep -q "cannot create $TMP/nodir/x.qvq: no directory $TMP/nodir" "$TMP/err" ||
	fail "missing output directory not reported first, by its name: $(cat "$TMP/err")"
grep -q "\.tmp\." "$TMP/err" && fail "the message names a temporary file: $(cat "$TMP/err")"

# --skip-unreadable leaves broken images out with a warning naming each
# (a file that is not an image, a truncated PNG); without it the first one
# stops the pack; with nothing readable left, nothing is written.
head -c 300 "$TMP/badin/rgb.png" >"$TMP/badin/trunc.png"
"$WCODEC" pack-images -q "$TMP/badin" "$TMP/skip.qvq" 2>/dev/null && fail "packed broken images without --skip-unreadable"
"$WCODEC" pack-images -q --skip-unreadable "$TMP/badin" "$TMP/skip.qvq" >"$TMP/skip.txt" 2>"$TMP/err" ||
	fail "--skip-unreadable: $(cat "$TMP/err")"
grep -q "warning: .*skipping $TMP/badin/broken.png" "$TMP/err" || fail "no warning for broken.png: $(cat "$TMP/err")"
grep -q "warning: .*skipping $TMP/badin/trunc.png" "$TMP/err" || fail "no warning for trunc.png: $(cat "$TMP/err")"
grep -q "1 images" "$TMP/skip.txt" || fail "--skip-unreadable kept: $(cat "$TMP/skip.txt")"
grep -q "2 unreadable images left out" "$TMP/skip.txt" || fail "no count of the left-out images: $(cat "$TMP/skip.txt")"
"$WCODEC" unpack -q "$TMP/skip.qvq" "$TMP/skip.out" || fail "unpack of the archive without the broken images"
[ "$(ls "$TMP/skip.out" | grep '\.ppm$')" = "rgb.ppm" ] || fail "--skip-unreadable archive holds: $(ls "$TMP/skip.out")"
mkdir "$TMP/allbad"
cp "$TMP/badin/broken.png" "$TMP/badin/trunc.png" "$TMP/allbad/"
"$WCODEC" pack-images -q --skip-unreadable "$TMP/allbad" "$TMP/allbad.qvq" 2>"$TMP/err" && fail "packed no readable image"
grep -q "no image could be read" "$TMP/err" || fail "all unreadable: $(cat "$TMP/err")"
[ -e "$TMP/allbad.qvq" ] && fail "an archive was written with no readable image"

# k-means' nearest-entry search on a backend (the test plugin's brute force
# in place of the GPU kernel) writes the CPU's archive byte for byte; when
# the backend fails, the CPU takes over with one warning and the same bytes.
: "${top_builddir:?}"
FAKE=$top_builddir/tests/fakeplugin/.libs
if [ -e "$FAKE/wcodec-cuda.so" ]; then
	"$WCODEC" pack-images -q -b cpu "$TMP/in" "$TMP/k_cpu.qvq" --codebook 50 --seed 4 >/dev/null ||
		fail "pack-images -b cpu"
	WCODEC_PLUGIN_DIR=$FAKE "$WCODEC" pack-images -q -b cuda "$TMP/in" "$TMP/k_gpu.qvq" --codebook 50 \
		--seed 4 >/dev/null 2>"$TMP/err" || fail "pack-images -b cuda (test plugin): $(cat "$TMP/err")"
	cmp -s "$TMP/k_cpu.qvq" "$TMP/k_gpu.qvq" || fail "the backend's k-means search changed the archive"
	[ ! -s "$TMP/err" ] || fail "pack-images -b cuda (test plugin) said: $(cat "$TMP/err")"
	WCODEC_PLUGIN_DIR=$FAKE WCODEC_FAKE_PLUGIN_MODE=fail "$WCODEC" pack-images -q -b cuda "$TMP/in" \
		"$TMP/k_fail.qvq" --codebook 50 --seed 4 >/dev/null 2>"$TMP/err" || fail "pack-images with a failing backend"
	cmp -s "$TMP/k_cpu.qvq" "$TMP/k_fail.qvq" || fail "the CPU's take-over changed the archive"
	[ "$(grep -c "warning: k-means: .*device lost.*searching on the CPU" "$TMP/err")" = 1 ] ||
		fail "not one warning for the failed search: $(cat "$TMP/err")"
	WCODEC_PLUGIN_DIR=$FAKE WCODEC_FAKE_PLUGIN_MODE=nogpu "$WCODEC" pack-images -q -b cuda "$TMP/in" \
		"$TMP/k_none.qvq" --codebook 50 2>"$TMP/err" && fail "pack-images -b cuda without a GPU succeeded"
	grep -q "no CUDA-capable device" "$TMP/err" || fail "-b cuda without a GPU: $(cat "$TMP/err")"
	[ -e "$TMP/k_none.qvq" ] && fail "an archive was written without the backend asked for"
fi
"$WCODEC" pack-images -q -b gpu "$TMP/in" "$TMP/k_bad.qvq" 2>/dev/null
[ $? = 2 ] || fail "pack-images -b gpu: want status 2"

# Bad usage and empty input.
mkdir "$TMP/empty"
"$WCODEC" pack-images "$TMP/empty" "$TMP/e.qvq" >/dev/null 2>&1 && fail "packed an empty directory"
[ -e "$TMP/e.qvq" ] && fail "an archive was written for an empty directory"
"$WCODEC" pack-images "$TMP/in" "$TMP/e.qvq" --size 0x5 >/dev/null 2>&1 && fail "--size 0x5 accepted"
"$WCODEC" pack-images "$TMP/in" "$TMP/e.qvq" --codebook 70000 >/dev/null 2>&1 && fail "--codebook 70000 accepted"

# A symlink back up the tree is skipped with a warning (it used to be walked
# until the depth limit failed the whole pack); a symlink to a directory
# elsewhere is followed.
mkdir -p "$TMP/loop/deeper" "$TMP/elsewhere"
cp "$TMP/in/cats/rgb.png" "$TMP/in/cats/grey.png" "$TMP/loop/deeper/"
cp "$TMP/in/dogs/photo.jpg" "$TMP/elsewhere/far.jpg"
ln -s .. "$TMP/loop/deeper/up"
ln -s ../elsewhere "$TMP/loop/away"
"$WCODEC" pack-images "$TMP/loop" "$TMP/l.qvq" --codebook 16 --seed 1 >"$TMP/loop.out" 2>"$TMP/loop.err" ||
	fail "pack-images of a tree with a symlink loop: $(cat "$TMP/loop.err")"
grep -q "symlink loop" "$TMP/loop.err" || fail "no warning for the symlink loop: $(cat "$TMP/loop.err")"
grep -q "3 images" "$TMP/loop.out" || fail "symlinked tree: $(cat "$TMP/loop.out"), expected 3 images"
# A small PNG whose header claims 8000x8000 pixels (192 MB decoded) is
# refused from its header, without --size, before any pixel is decoded.
mkdir -p "$TMP/claim"
"$PYTHON3" - "$TMP/claim/big.png" <<'PY'
import struct, sys, zlib
def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
ihdr = struct.pack(">IIBBBBB", 8000, 8000, 8, 2, 0, 0, 0)
idat = zlib.compress(b"\0" * 24001)
open(sys.argv[1], "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b""))
PY
"$WCODEC" pack-images "$TMP/claim" "$TMP/claim.qvq" >/dev/null 2>"$TMP/claim.err" && fail "a 64-megapixel image packed without --size"
grep -q "8000x8000 pixels (limits: sides 1..32768, 22369621 pixels); use --size" "$TMP/claim.err" ||
	fail "huge image not refused from its header: $(cat "$TMP/claim.err")"
exit 0
