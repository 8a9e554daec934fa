#!/bin/sh
# A virtual file whose 1 MiB reads span more than 1024 tiles (3000 BF16
# tensors of 128 bytes: every tensor is at least one tile) must read back
# byte-identical, in bounded time. Found by the benchmarks: wcodecfs built a
# reply of one piece per tile, writev refused more than 1024 (EINVAL), and
# the reader waited for ever (fixed: such replies are gathered into one
# buffer). Should it regress, a hung request is aborted through /sys/fs/fuse/connections so the test never hangs.
# Skips (77) where FUSE cannot be used.
set -u
: "${WCODEC:?}" "${WCODECFS:?}"
PYTHON3=${PYTHON3:-/usr/bin/python3}
[ -x "$WCODECFS" ] || { echo "SKIP: wcodecfs was not built (configured without libfuse3)"; exit 77; }
command -v fusermount3 >/dev/null 2>&1 || { echo "SKIP: no fusermount3"; exit 77; }
if ! [ -c /dev/fuse ] || ! ( exec 3<>/dev/fuse ) 2>/dev/null; then echo "SKIP: no usable /dev/fuse"; exit 77; fi
work=$(mktemp -d "${TMPDIR:-/tmp}/many-tiles.XXXXXX") || exit 1
mnt=$work/mnt
abort_mount() { # fail any request the daemon left unanswered, then unmount
	id=$(awk -v m="$mnt" '$5 == m { split($3, d, ":"); print d[2] }' /proc/self/mountinfo | tail -1)
	if [ -n "$id" ]; then
		[ -d /sys/fs/fuse/connections/"$id" ] || mount -t fusectl none /sys/fs/fuse/connections 2>/dev/null
		[ -w /sys/fs/fuse/connections/"$id"/abort ] && echo 1 > /sys/fs/fuse/connections/"$id"/abort
		fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -u -z "$mnt" 2>/dev/null
	fi
}
trap 'abort_mount; rm -rf "$work"' EXIT
trap 'exit 1' INT TERM
mkdir -p "$mnt" "$work/src"

"$PYTHON3" - "$work/many.safetensors" <<'PY' || exit 1
import json, random, struct, sys
random.seed(5)
n, elems = 3000, 64  # 3000 tensors of 64 BF16 elements (128 bytes)
hdr, data = {}, bytearray()
for i in range(n):
    vals = [(0x3c00 + random.randrange(0x200)) ^ (random.randrange(2) << 15) for _ in range(elems)]
    b = struct.pack("<%dH" % elems, *vals)
    hdr["layer.%04d.bias" % i] = {"dtype": "BF16", "shape": [elems], "data_offsets": [len(data), len(data) + len(b)]}
    data += b
js = json.dumps(hdr, separators=(",", ":")).encode()
js += b" " * ((-len(js)) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(js)) + js + bytes(data))
PY
"$WCODEC" pack "$work/many.safetensors" "$work/src/many.wcodec" >/dev/null || { echo "FAIL: pack"; exit 1; }
if ! "$WCODECFS" "$work/src" "$mnt" 2>"$work/log"; then
	echo "SKIP: wcodecfs could not mount: $(cat "$work/log")"; exit 77
fi
if ! timeout 10 cmp "$mnt/many.safetensors" "$work/many.safetensors"; then
	echo "FAIL: reading the virtual file failed or did not finish in 10 s"
	exit 1
fi
echo "ok: $(stat -c %s "$mnt/many.safetensors") bytes over 3000 tiles read back identical"
