#!/bin/sh
# Y.qvq appears as directory Y/ (codebook and transform modes): every image a PPM with exactly the bytes
# `wcodec unpack` writes, images.npy that np.load(mmap_mode='r') maps,
# labels.txt; PIL opens the PPMs; sizes exact and stable; mmap works; a
# damaged tile is EIO for its images only; the source .qvq stays hidden.
# Skips (77) when /dev/fuse is unusable or python3 lacks numpy and PIL.
. "${top_srcdir:-.}/tests/mount_lib.sh"
: "${WCODEC:?WCODEC must name the built wcodec}"
"$PYTHON3" -c 'import numpy, PIL' 2>/dev/null || { echo "SKIP: $PYTHON3 lacks numpy/PIL"; exit 77; }
"$WCODEC" --version | grep -q "^images: *PNG.*JPEG" || { echo "SKIP: wcodec reads no PNG or JPEG (--disable-image-codecs)"; exit 77; }
chk() { "$PYTHON3" "$top_srcdir/tests/qvq_check.py" "$@"; }

S=$TMP/src
mkdir -p "$S/sub"
chk make-images "$TMP/in" || fail "make-images"
"$WCODEC" pack-images "$TMP/in" "$S/pets.qvq" --size 24x20 --codebook 300 --seed 2 \
	--tile-size 4096 >/dev/null || fail "pack-images pets"
"$WCODEC" pack-images "$TMP/in" "$S/sub/native.qvq" --codebook 64 --seed 2 >/dev/null ||
	fail "pack-images native"
"$WCODEC" pack-images "$TMP/in" "$S/sub/tx.qvq" --quality 85 --tile-size 4096 >/dev/null ||
	fail "pack-images tx (transform mode)"
cp "$S/sub/tx.qvq" "$S/sub/txbroken.qvq"
chk damage "$S/sub/txbroken.qvq" 1 || fail "damage tx"
cp "$S/pets.qvq" "$S/broken.qvq"
chk damage "$S/broken.qvq" 1 || fail "damage"
printf 'plain\n' >"$S/readme.txt"

"$WCODEC" unpack "$S/pets.qvq" "$TMP/pets" >/dev/null || fail "unpack pets"
"$WCODEC" unpack "$S/sub/native.qvq" "$TMP/native" >/dev/null || fail "unpack native"
"$WCODEC" unpack "$S/sub/tx.qvq" "$TMP/tx" >/dev/null || fail "unpack tx"

M=$TMP/mnt
mount_fs "$S" "$M" -o cache_size=16M
[ "$(ls "$M" | tr '\n' ' ')" = "broken pets readme.txt sub " ] || fail "listing: $(ls "$M" | tr '\n' ' ')"
[ -d "$M/pets" ] || fail "pets is not a directory"
[ -e "$M/pets.qvq" ] && fail "the .qvq source is visible"
[ "$(ls "$M/pets" | tr '\n' ' ')" = "cats dogs images.npy labels.txt " ] ||
	fail "pets listing: $(ls "$M/pets" | tr '\n' ' ')"

chk same "$M/pets" "$TMP/pets" || fail "mount and unpack differ (pets)"
chk same "$M/sub/native" "$TMP/native" || fail "mount and unpack differ (native)"
chk same "$M/sub/tx" "$TMP/tx" || fail "mount and unpack differ (transform mode)"
txbad=$(chk tile-images "$S/sub/txbroken.qvq" 1 | head -1)
cat "$M/sub/txbroken/$txbad" >/dev/null 2>"$TMP/txeio.err" && fail "read of a damaged transform tile succeeded"
grep -q "Input/output error" "$TMP/txeio.err" || fail "transform tile not EIO: $(cat "$TMP/txeio.err")"
chk shown "$M/sub/native" "$TMP/in" 20 || fail "PIL reading the mounted PPMs"
chk npy "$M/pets" 9 20 24 || fail "images.npy through the mount"
chk labels "$M/pets" || fail "labels.txt through the mount"
chk mmap "$M/pets/images.npy" || fail "mmap of images.npy"
chk mmap "$M/pets/cats/rgb.ppm" || fail "mmap of a PPM"
a=$(stat -c '%s %i' "$M/pets/images.npy")
cat "$M/pets/images.npy" >/dev/null
[ "$a" = "$(stat -c '%s %i' "$M/pets/images.npy")" ] || fail "unstable attributes"
[ "$(stat -c %s "$M/pets/cats/rgb.ppm")" = "$(stat -c %s "$TMP/pets/cats/rgb.ppm")" ] || fail "size"
# du of the directory is the archive's disk use (its blocks shared out by
# size, each share rounded up), not the decoded bytes.
arc=$(stat -c %b "$S/pets.qvq")
shown=$(find "$M/pets" -type f -exec stat -c %b {} + | awk '{s += $1} END {print s}')
nf=$(find "$M/pets" -type f | wc -l)
[ "$shown" -ge "$arc" ] && [ "$shown" -le $((arc + nf)) ] ||
	fail "blocks of pets/: $shown, archive $arc, $nf files"

# The damaged tile: its images fail with EIO, the others read.
bad=$(chk tile-images "$S/broken.qvq" 1 | head -1)
[ -n "$bad" ] || fail "no image in tile 1"
cat "$M/broken/$bad" >/dev/null 2>"$TMP/eio.err" && fail "read of a damaged tile succeeded"
grep -q "Input/output error" "$TMP/eio.err" || fail "not EIO: $(cat "$TMP/eio.err")"
good=$(chk tile-images "$S/broken.qvq" 0 | head -1)
cmp -s "$M/broken/$good" "$TMP/pets/$good" || fail "an intact tile of a damaged archive"
unmount_fs "$M"
exit 0
