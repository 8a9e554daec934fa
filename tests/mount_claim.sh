#!/bin/sh
# Memory whatever a file claims: a 1.2 MB container whose one tensor claims
# 1 TiB in 64 MiB tiles (tests/craft_bad claim), mounted with cache_size=1M and
# 16 decode threads, read by 32 concurrent random readers: every read gives
# the tensor's zeros, the daemon's peak RSS stays within one tile + 64 MiB
# (misses wait for room; a read across two tiles copies out the first), the
# mount warns that such tiles decode one at a time, and `wcodec verify`
# checks every payload but decodes the repeated tile once (damage within
# the run still found).
. "${top_srcdir:-.}/tests/mount_lib.sh"

CRAFT=${top_builddir:-.}/tests/craft_bad
S=$TMP/src
M=$TMP/mnt
mkdir -p "$S"
"$PYTHON3" - "$TMP/z.safetensors" <<'PY' || fail "making 128 MiB of sparse zeros"
import json, struct, sys
n = 128 << 20
h = json.dumps({"w": {"dtype": "BF16", "shape": [n // 2], "data_offsets": [0, n]}}).encode()
h += b" " * (-len(h) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h)
    f.truncate(8 + len(h) + n)
PY
pack "$TMP/z.safetensors" "$TMP/z.wcodec" 64M
"$CRAFT" claim "$TMP/z.wcodec" "$S/claim.wcodec" 16384 || fail "craft_bad claim"
note "claim.wcodec: $(wc -c < "$S/claim.wcodec") bytes claiming $((16384 * 64)) MiB"

mkdir -p "$M"
MOUNTS="$MOUNTS $M"
# backend=cpu: the bound is on the daemon's own memory; a CUDA context
# (where the plugin is found) maps some 350 MiB of its own
"$WCODECFS" "$S" "$M" -f -o cache_size=1M,threads=16,backend=cpu 2> "$TMP/log" &
fg=$!
wait_mounted "$M" "$TMP/log"
"$PYTHON3" - "$M/claim.safetensors" <<'PY' || fail "random readers: $(tail -3 "$TMP/log")"
import os, random, sys, threading, time
path = sys.argv[1]
size = os.stat(path).st_size
with open(path, "rb") as f:
    data = 8 + int.from_bytes(f.read(8), "little")
assert size == (1 << 40) + data, (size, data)
bad, count = [], [0]
def run(seed):
    r = random.Random(seed)
    fd = os.open(path, os.O_RDONLY)
    end = time.time() + 8
    while time.time() < end:
        off = r.randrange(data, size - 65536)
        b = os.pread(fd, 65536, off)
        if len(b) != 65536 or b.count(0) != 65536:
            bad.append(off)
        count[0] += 1
    os.close(fd)
ts = [threading.Thread(target=run, args=(i,)) for i in range(32)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print("# %d reads of 64 KiB by 32 readers" % count[0])
assert not bad, "wrong bytes at %s" % bad[:5]
assert count[0] >= 32
PY
check_peak_rss "$fg" $((64 + 64)) "one tile + 64 MiB"
grep -q "are larger than the cache's room" "$TMP/log" || fail "no warning about the large tiles: $(cat "$TMP/log")"
fusermount3 -u "$M" || fail "unmount"
wait $fg || fail "the daemon exited with $?"

# verify: every payload checked, a tile the same as the one before it not
# decoded again; a damaged payload in the run is found, and the tile after
# it decoded in its stead.
"$WCODEC" verify --json "$S/claim.wcodec" > "$TMP/v.json" || fail "verify of the claim"
"$PYTHON3" - "$TMP/v.json" <<'PY' || fail "verify report: $(cat "$TMP/v.json")"
import json, sys
f = json.load(open(sys.argv[1]))["files"][0]
assert f["ok"] and f["tiles"] == 16384 and f["decoded_tiles"] == 1, f
PY
"$PYTHON3" - "$S/claim.wcodec" "$TMP/bad.wcodec" <<'PY' || fail "damaging the claim"
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
payload_off, index_off = struct.unpack_from("<Q", b, 64)[0], struct.unpack_from("<Q", b, 96)[0]
cs = struct.unpack_from("<I", b, index_off + 16)[0]
for t in (0, 5, 6, 9000):
    b[payload_off + t * cs + cs // 2] ^= 1
open(sys.argv[2], "wb").write(b)
PY
if "$WCODEC" verify --json "$TMP/bad.wcodec" > "$TMP/v.json" 2> "$TMP/v.err"; then fail "verify passed a damaged claim"; fi
"$PYTHON3" - "$TMP/v.json" <<'PY' || fail "verify report of the damaged claim: $(cat "$TMP/v.json")"
import json, sys
f = json.load(open(sys.argv[1]))["files"][0]
assert not f["ok"] and f["damaged_tiles"] == 4 and f["decoded_tiles"] == 3, f
PY
for t in 0 5 6 9000; do
	grep -q "damaged tile $t (tensor \"w\"" "$TMP/v.err" || fail "tile $t not reported: $(cat "$TMP/v.err")"
done
echo "PASS: mount_claim.sh"
