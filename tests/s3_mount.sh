#!/bin/sh
# wcodecfs s3://BUCKET/PREFIX MOUNTPOINT against a real S3-compatible server
# on 127.0.0.1 (tests/s3_lib.sh):
#  - the prefix's keys are shown as a tree: X.wcodec as X.safetensors with
#    the original's sha256 (tiles of 256 KiB; and thousands of small ones,
#    read a window at a time), other objects byte for byte (whole, and at
#    random offsets and sizes), X.safetensors beside X.wcodec wins, an
#    object named like a directory gives way to it;
#  - a damaged object reads as EIO with the tile named in the log;
#  - an object replaced on the server after it was opened is EIO, never
#    bytes of the new version mixed with the old;
#  - a missing bucket fails the mount with the reason.
# Skips (77) without s3rver, curl, FUSE, or a build with s3:// sources.
. "$top_srcdir/tests/s3_lib.sh"
: "${WCODECFS:?}"
[ -x "$WCODECFS" ] || { echo "SKIP: wcodecfs was not built"; exit 77; }
command -v fusermount3 >/dev/null 2>&1 || { echo "SKIP: fusermount3 not found"; exit 77; }
if ! [ -c /dev/fuse ] || ! (exec 3<>/dev/fuse) 2>/dev/null; then
	echo "SKIP: /dev/fuse is not usable here"
	exit 77
fi
MNT="$T/mnt"
s3_cleanup_hook() {
	grep -qs " $MNT fuse" /proc/mounts && { fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -uz "$MNT"; }
}

"$PYTHON3" "$top_srcdir/tests/gen_safetensors.py" --profile weights --dtype BF16 --params 900000 "$T/a.safetensors" ||
	fail "gen"
"$WCODEC" pack -q --tile-size 256K "$T/a.safetensors" "$T/a.wcodec" || fail "pack"
"$PYTHON3" "$top_srcdir/tests/gen_safetensors.py" --profile many "$T/many.safetensors" || fail "gen many"
"$WCODEC" pack -q "$T/many.safetensors" "$T/many.wcodec" || fail "pack many"
cp "$T/a.wcodec" "$T/bad.wcodec"
"$PYTHON3" - "$T/bad.wcodec" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
b[struct.unpack_from("<Q", b, 64)[0] + 50] ^= 0x04   # a byte of the first payload
open(sys.argv[1], "wb").write(b)
PY
head -c 20000000 /dev/urandom >"$T/blob.bin"
head -c 20000000 /dev/urandom >"$T/blob2.bin"
echo '{"model_type": "llama"}' >"$T/config.json"
put "$T/a.wcodec" m/ckpt/model.wcodec
put "$T/many.wcodec" m/ckpt/many.wcodec
put "$T/config.json" m/ckpt/config.json
put "$T/blob.bin" m/ckpt/sub/blob.bin
put "$T/blob.bin" m/ckpt/sub/replaced.bin
put "$T/a.safetensors" m/plain/x.safetensors
put "$T/bad.wcodec" m/plain/x.wcodec
put "$T/bad.wcodec" m/bad/bad.wcodec
put "$T/config.json" m/clash
put "$T/config.json" m/clash/inner.json
put "$T/config.json" other/outside.json

mkdir -p "$MNT"
if ! "$WCODECFS" s3://models/m "$MNT" -o log="$T/fs.log" 2>"$T/err"; then
	grep -q "s3://" "$T/err" && grep -qi "no s3\|built without" "$T/err" && {
		echo "SKIP: built without s3:// sources"
		exit 77
	}
	fail "mount: $(cat "$T/err")"
fi
(cd "$MNT" && find . | sort) >"$T/tree"
cat >"$T/want" <<'EOF'
.
./bad
./bad/bad.safetensors
./ckpt
./ckpt/config.json
./ckpt/many.safetensors
./ckpt/model.safetensors
./ckpt/sub
./ckpt/sub/blob.bin
./ckpt/sub/replaced.bin
./clash
./clash/inner.json
./plain
./plain/x.safetensors
EOF
diff "$T/want" "$T/tree" >&2 || fail "the tree shown differs"
[ "$(sha256sum <"$MNT/ckpt/model.safetensors")" = "$(sha256sum <"$T/a.safetensors")" ] ||
	fail "model.safetensors: not the original's sha256"
cmp "$MNT/ckpt/sub/blob.bin" "$T/blob.bin" || fail "blob.bin differs"
cmp "$MNT/ckpt/many.safetensors" "$T/many.safetensors" || fail "many.safetensors (small tiles, read in windows) differs"
cmp "$MNT/plain/x.safetensors" "$T/a.safetensors" || fail "the original beside its pack did not win"
cmp "$MNT/ckpt/config.json" "$T/config.json" || fail "config.json"
[ "$(stat -c %s "$MNT/ckpt/model.safetensors")" = "$(stat -c %s "$T/a.safetensors")" ] || fail "size"
"$PYTHON3" - "$MNT" "$T" <<'PY' || fail "random reads"
import os, random, sys
mnt, t = sys.argv[1:]
rng = random.Random(7)
for name, ref in (("ckpt/sub/blob.bin", "blob.bin"), ("ckpt/model.safetensors", "a.safetensors"),
                  ("ckpt/many.safetensors", "many.safetensors")):
    want = open(os.path.join(t, ref), "rb").read()
    fd = os.open(os.path.join(mnt, name), os.O_RDONLY)
    for _ in range(200):
        off = rng.randrange(len(want))
        n = rng.choice((1, 100, 4096, 70000, 1 << 20, 3 << 20))
        got = os.pread(fd, n, off)
        assert got == want[off:off + n], (name, off, n)
    os.close(fd)
PY
echo "# a tree of 10 objects; packed (large and small tiles), plain and passed-through files equal, whole and at 600 random ranges"

cat "$MNT/bad/bad.safetensors" >/dev/null 2>"$T/err" && fail "a damaged object read without an error"
grep -q "Input/output error" "$T/err" || fail "damaged: $(cat "$T/err")"
grep -q "s3://models/m/bad/bad.wcodec" "$T/fs.log" && grep -q "tile" "$T/fs.log" ||
	fail "the log does not name the damaged tile: $(tail -5 "$T/fs.log")"
echo "# a damaged object: EIO, its tile named in the log"

# Replaced on the server while open: the rest is EIO, or bytes of the
# version opened (cached before the change), never the new version's.
"$PYTHON3" - "$MNT/ckpt/sub/replaced.bin" "$T/blob.bin" "$T/blob2.bin" "http://127.0.0.1:$PORT/models/m/ckpt/sub/replaced.bin" <<'PY' || fail "a replaced object"
import os, subprocess, sys
path, old, new, url = sys.argv[1:]
old, new = open(old, "rb").read(), open(new, "rb").read()
fd = os.open(path, os.O_RDONLY)
assert os.pread(fd, 4096, 0) == old[:4096]
subprocess.run(["curl", "-sf", "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", "--aws-sigv4", "aws:amz:us-east-1:s3",
                "--user", "S3RVER:S3RVER", "-T", sys.argv[3], url], check=True)
off = 18 << 20
try:
    got = os.pread(fd, 65536, off)
    assert got == old[off:off + 65536], "bytes of another version"
    print("# replaced while open: the opened version's bytes (cached)")
except OSError as e:
    assert e.errno == 5, e
    print("# replaced while open: EIO")
os.close(fd)
PY
grep -q "changed since it was opened" "$T/fs.log" || echo "# (no read reached the server after the change)"
fusermount3 -u "$MNT" || fail "unmount"

mkdir -p "$T/m2"
"$WCODECFS" s3://no-such-bucket/x "$T/m2" 2>"$T/err" && { fusermount3 -u "$T/m2"; fail "a missing bucket mounted"; }
grep -q "no such bucket" "$T/err" || fail "missing bucket: $(cat "$T/err")"
echo "# a missing bucket: $(cat "$T/err")"
echo "PASS: s3_mount.sh"
