#!/bin/sh
# Test of the benchmark programs: contrib/bench/ramfs serves a file from RAM
# through FUSE and contrib/bench/randread reads it at random offsets,
# comparing every byte with the original; a whole-file cmp, a write refused
# and an unaligned run check the rest; a directory is served as its tree. Skips (77) where FUSE mounts are not
# possible (no /dev/fuse, no fusermount3, or the mount is refused).
set -eu
: "${top_builddir:=.}"
ramfs=$top_builddir/contrib/bench/ramfs
randread=$top_builddir/contrib/bench/randread
[ -x "$ramfs" ] || { echo "SKIP: ramfs was not built (configured without libfuse3)"; exit 77; }
[ -c /dev/fuse ] || { echo "SKIP: no /dev/fuse"; exit 77; }
command -v fusermount3 >/dev/null || { echo "SKIP: no fusermount3"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/ramfs-test.XXXXXX")
mnt=$work/mnt
cleanup() {
	if mountpoint -q "$mnt" 2>/dev/null; then fusermount3 -u "$mnt" || true; fi
	rm -rf "$work"
}
trap cleanup EXIT INT TERM
mkdir "$mnt"
# 3 MiB + 123 bytes: not a multiple of the read size or the page size.
head -c $((3 * 1048576 + 123)) /dev/urandom > "$work/blob.bin"

if ! "$ramfs" "$work/blob.bin" "$mnt" 2>"$work/err"; then
	echo "SKIP: ramfs could not mount: $(cat "$work/err")"; exit 77
fi
ls -l "$mnt"
[ "$(ls "$mnt")" = blob.bin ] || { echo "FAIL: directory listing"; exit 1; }
[ "$(stat -c %s "$mnt/blob.bin")" = "$(stat -c %s "$work/blob.bin")" ] || { echo "FAIL: size"; exit 1; }
cmp "$mnt/blob.bin" "$work/blob.bin"
"$randread" -n 300 "$mnt/blob.bin" "$work/blob.bin"
"$randread" -n 300 -u -t 4 -b 10000 "$mnt/blob.bin" "$work/blob.bin"
if (echo x >> "$mnt/blob.bin") 2>/dev/null; then echo "FAIL: write accepted"; exit 1; fi
[ ! -e "$mnt/other" ] || { echo "FAIL: a name that is not there exists"; exit 1; }

# randread must notice wrong bytes: compare against a file that differs in
# one byte (the byte at 4096 plus one: a fixed 'Z' was already there in 1 of
# 256 random blobs, which failed the fixture check).
cp "$work/blob.bin" "$work/changed.bin"
b=$(od -An -tu1 -j 4096 -N 1 "$work/blob.bin" | tr -d ' ')
# shellcheck disable=SC2059 # the format is the octal escape of the new byte
printf "\\$(printf '%03o' $(((b + 1) % 256)))" | dd of="$work/changed.bin" bs=1 seek=4096 count=1 conv=notrunc 2>/dev/null
cmp -s "$work/blob.bin" "$work/changed.bin" && { echo "FAIL: fixture"; exit 1; }
if "$randread" -n 1 -b 3145728 "$mnt/blob.bin" "$work/changed.bin"; then
	echo "FAIL: randread missed a differing byte"; exit 1
fi
fusermount3 -u "$mnt"

# A directory SOURCE is served as its tree: files in subdirectories, an empty
# file, an empty directory; symlinks are left out.
tree=$work/tree
mkdir -p "$tree/a/b" "$tree/empty dir"
head -c 70000 /dev/urandom > "$tree/a/b/deep.bin"
head -c 5 /dev/urandom > "$tree/top.bin"
: > "$tree/a/zero"
ln -s top.bin "$tree/link"
"$ramfs" "$tree" "$mnt" 2>"$work/err" || { echo "FAIL: ramfs of a directory: $(cat "$work/err")"; exit 1; }
rm "$tree/link"
diff -r "$mnt" "$tree" || { echo "FAIL: the served tree differs"; exit 1; }
[ "$(ls "$mnt/a" | tr '\n' ' ')" = "b zero " ] || { echo "FAIL: listing of a/: $(ls "$mnt/a")"; exit 1; }
[ -d "$mnt/empty dir" ] || { echo "FAIL: empty directory"; exit 1; }
[ ! -e "$mnt/a/missing" ] || { echo "FAIL: a name that is not there exists"; exit 1; }
"$randread" -n 100 "$mnt/a/b/deep.bin" "$tree/a/b/deep.bin"
fusermount3 -u "$mnt"
echo "ok"
