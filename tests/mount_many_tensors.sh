#!/bin/sh
# The mount serves files of shared tiles (docs/FORMAT.md 1.6) and older
# versions byte for byte: gen_safetensors.py --profile many packed with 1 MiB
# tiles (version 3), tests/data/all-v1.wcodec (version 1, every small tensor
# in a tile of its own) and all-v2.wcodec (JSON metadata), each compared
# whole with cmp and read at
# every tensor boundary by preads of 5 bytes on either side; the same file
# packed with lossy int8 tensors reads as `wcodec unpack` writes it. Then memory:
# 4 readers stream 4 copies of the many-tensor file at once through a fresh
# mount with cache_size=16M; the daemon's peak RSS (VmHWM) must stay within
# cache_size + 64 MiB (the open containers' tables count in the budget).
. "$top_srcdir/tests/mount_lib.sh"
: "${WCODEC:?}"

mkdir -p "$TMP/src"
"$PYTHON3" "$top_srcdir/tests/gen_safetensors.py" --profile many "$TMP/many.safetensors"
"$PYTHON3" "$top_srcdir/tests/gen_safetensors.py" --profile all --seed 11 "$TMP/v1.safetensors"
"$WCODEC" pack -q "$TMP/many.safetensors" "$TMP/src/many.wcodec" || fail "pack"
# lossy int8 tensors beside shared tiles: the mount shows what unpack writes
"$WCODEC" pack -q --lossy int8 --lossy-include '*' "$TMP/many.safetensors" "$TMP/src/lossy.wcodec" ||
	fail "pack --lossy"
"$WCODEC" info "$TMP/src/lossy.wcodec" | grep -q ' int8 ' || fail "no tensor of many.safetensors went lossy"
"$WCODEC" unpack -q "$TMP/src/lossy.wcodec" "$TMP/lossy.safetensors" || fail "unpack of the lossy file"
cp "$top_srcdir/tests/data/all-v1.wcodec" "$TMP/src/v1.wcodec"
cp "$top_srcdir/tests/data/all-v2.wcodec" "$TMP/src/v2.wcodec"
cp "$TMP/v1.safetensors" "$TMP/v2.safetensors"
mount_fs "$TMP/src" "$TMP/mnt" -o cache_size=4M
cmp "$TMP/lossy.safetensors" "$TMP/mnt/lossy.safetensors" || fail "a lossy file differs from its unpack through the mount"
for f in many v1 v2; do
	cmp "$TMP/$f.safetensors" "$TMP/mnt/$f.safetensors" || fail "$f.safetensors differs through the mount"
	"$PYTHON3" - "$TMP/$f.safetensors" "$TMP/mnt/$f.safetensors" <<'PY' || fail "$f: boundary reads"
import json, os, struct, sys
orig = open(sys.argv[1], "rb").read()
n = struct.unpack_from("<Q", orig)[0]
hdr = json.loads(orig[8:8 + n])
hdr.pop("__metadata__", None)
fd = os.open(sys.argv[2], os.O_RDONLY)
reads = 0
for t in hdr.values():
    b, e = (8 + n + x for x in t["data_offsets"])
    for lo, hi in ((b - 5, b + 5), (e - 5, e + 5)):
        lo, hi = max(lo, 0), min(hi, len(orig))
        assert os.pread(fd, hi - lo, lo) == orig[lo:hi], (t, lo)
        reads += 1
print("# %s: %d reads across tensor boundaries equal the original" % (sys.argv[2].rsplit("/", 1)[1], reads))
PY
done
fusermount3 -u "$TMP/mnt" || fail "unmount"
mkdir -p "$TMP/four"
for i in 1 2 3 4; do cp "$TMP/src/many.wcodec" "$TMP/four/many$i.wcodec"; done
# backend=cpu: the bound is on the daemon's own memory, not a CUDA context's
mount_fs "$TMP/four" "$TMP/mnt4" -o cache_size=16M,backend=cpu
pid=$(for p in $(daemon_pids); do grep -qs "mnt4" "/proc/$p/cmdline" && echo "$p"; done | head -1)
[ -n "$pid" ] || fail "no daemon pid for the second mount"
for i in 1 2 3 4; do cat "$TMP/mnt4/many$i.safetensors" > /dev/null & done
wait
for i in 1 2 3 4; do cmp "$TMP/many.safetensors" "$TMP/mnt4/many$i.safetensors" || fail "copy $i differs"; done
check_peak_rss "$pid" $((16 + 64)) "cache_size + 64 MiB (4 streaming readers at cache_size=16M)"
echo "PASS: mount_many_tensors.sh"
