#!/bin/sh
# Random operations from 8 threads at once (reads across tile boundaries and
# past the end, mmap, O_DIRECT, whole-file reads, stat, readdir, readlink, hidden
# names, writes) on a mount holding every kind of node: .wcodec files of
# several tile sizes and dtypes, a .qvq archive with subdirectories, plain
# files, an empty file, symlinks (to containers too), nested directories. Every answer is
# checked against the reference tree (tests/random_ops.py); a 4 MiB cache
# keeps tiles coming and going. Then the same with -o direct_io. The seed is
# fixed, so a failure repeats.
. "${top_srcdir:-.}/tests/mount_lib.sh"
: "${WCODEC:?WCODEC must name the built wcodec}"

S=$TMP/src
R=$TMP/ref
mkdir -p "$S/sub/deeper" "$R/sub/deeper" "$TMP/img/a" "$TMP/img/b/c"

gen "$R/all.safetensors" --profile all --seed 21
gen "$R/bf16.safetensors" --profile weights --dtype BF16 --params 1500000 --seed 22
gen "$R/sub/f32.safetensors" --profile weights --dtype F32 --params 400000 --seed 23
gen "$R/sub/deeper/q.safetensors" --profile quantized --seed 24
pack "$R/all.safetensors" "$S/all.wcodec" 4096
pack "$R/bf16.safetensors" "$S/bf16.wcodec" 1048576
pack "$R/sub/f32.safetensors" "$S/sub/f32.wcodec" 65536
pack "$R/sub/deeper/q.safetensors" "$S/sub/deeper/q.wcodec" 8192

# Images as binary PPMs (no image library needed), of odd and even sides.
"$PYTHON3" - "$TMP/img" <<'EOF' || fail "writing images"
import os, random, sys
rng = random.Random(5)
d = sys.argv[1]
for i in range(24):
    w, h = rng.randrange(3, 41), rng.randrange(3, 33)
    sub = ("a", "b", os.path.join("b", "c"))[i % 3]
    with open(os.path.join(d, sub, "im%02d.ppm" % i), "wb") as f:
        f.write(b"P6\n%d %d\n255\n" % (w, h))
        f.write(bytes(rng.randrange(256) for _ in range(w * h * 3)))
EOF
"$WCODEC" pack-images -q "$TMP/img" "$S/sub/pics.qvq" --codebook 64 --seed 3 --tile-size 4096 \
	>/dev/null || fail "pack-images"
"$WCODEC" unpack -q "$S/sub/pics.qvq" "$R/sub/pics" || fail "unpack pics"

for d in "$S" "$R"; do
	printf '{"architectures": ["Test"]}\n' >"$d/config.json"
	: >"$d/sub/empty.txt"
	head -c 300000 "$R/bf16.safetensors" >"$d/sub/deeper/blob.bin"
	ln -s bf16.safetensors "$d/alias.safetensors"
	ln -s ../config.json "$d/sub/config-link.json"
	ln -s nowhere "$d/sub/dangling"
done
# Links to containers show as links to what the containers show.
ln -s ../bf16.wcodec "$S/sub/bf16-link.wcodec"
ln -s ../bf16.safetensors "$R/sub/bf16-link.safetensors"
ln -s sub/pics.qvq "$S/pics-link.qvq"
ln -s sub/pics "$R/pics-link"

M=$TMP/mnt
# RANDOM_OPS (per thread), RANDOM_OPS_SEED and RANDOM_OPS_MOUNT (mount
# options) vary a run by hand.
seed=${RANDOM_OPS_SEED:-1234}
mount_fs "$S" "$M" -o "${RANDOM_OPS_MOUNT:-cache_size=4M}"
pid=$(daemon_pid_of "$M") || fail "no daemon"
"$PYTHON3" "$top_srcdir/tests/random_ops.py" "$M" "$R" "$seed" 8 "${RANDOM_OPS:-1500}" ||
	fail "random operations (seed $seed)"
cmp -s "$M/sub/bf16-link.safetensors" "$R/bf16.safetensors" || fail "reading through a link to a container"
[ "$(ls "$M/pics-link/")" = "$(ls "$R/sub/pics/")" ] || fail "listing through a link to an archive"
[ -e "$M/sub/bf16-link.wcodec" ] && fail "a link's source name is visible"
kill -0 "$pid" || fail "daemon died"
unmount_fs "$M"

# Again with -o direct_io: reads of decoded files skip the page cache, so
# every one of them reaches the daemon at the offset and length asked for.
mount_fs "$S" "$M" -o cache_size=4M,direct_io
pid=$(daemon_pid_of "$M") || fail "no daemon (direct_io)"
RANDOM_OPS_DIRECT_IO=1 "$PYTHON3" "$top_srcdir/tests/random_ops.py" "$M" "$R" $((seed + 100)) 8 \
	"${RANDOM_OPS:-1500}" || fail "random operations with direct_io (seed $((seed + 100)))"
[ "$(sha "$M/bf16.safetensors")" = "$(sha "$R/bf16.safetensors")" ] || fail "direct_io: sha256 differs"
kill -0 "$pid" || fail "daemon died (direct_io)"
unmount_fs "$M"
exit 0
