#!/bin/sh
# A file past 4 GiB, as real shards are (2 to 10 GB): every offset and size
# on the way must be 64-bit. The source is sparse: a first tensor of
# 4 GiB + 64 MiB of F32 zeros (a hole on disk), then a BF16 tensor of random
# bytes that lies wholly past 2^32. Packed with wcodec (round trip
# verified), its sizes checked in `wcodec info --json`, then mounted and
# read by pread and mmap at offsets across 2^31 and 2^32 and over the whole
# last tensor, against the original.
. "${top_srcdir:-.}/tests/mount_lib.sh"

# Reading the hole fills memory with 4 GiB of zero pages: reclaimable page
# cache on a disk, but memory held until the file goes on tmpfs.
if [ "$(stat -f -c %T "$TMP")" = tmpfs ] &&
	[ "$(awk '/^MemAvailable:/ { print int($2 / 1048576) }' /proc/meminfo)" -lt 8 ]; then
	echo "SKIP: $TMP is on tmpfs and less than 8 GiB of memory is available"
	exit 77
fi

S=$TMP/src
M=$TMP/mnt
mkdir -p "$S" "$M"
ORIG=$TMP/big.safetensors
"$PYTHON3" - "$ORIG" <<'EOF' || fail "making the sparse safetensors file"
import json, random, struct, sys
zeros = (4 << 30) + (64 << 20)
r = random.Random(11)
tail = bytes(r.randrange(256) for _ in range(2 * 500_000))
hdr = {"zeros": {"dtype": "F32", "shape": [zeros // 4], "data_offsets": [0, zeros]},
       "tail": {"dtype": "BF16", "shape": [500_000], "data_offsets": [zeros, zeros + len(tail)]}}
h = json.dumps(hdr).encode()
h += b" " * (-len(h) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h)
    f.seek(8 + len(h) + zeros)  # the zeros stay a hole
    f.write(tail)
EOF
size=$(stat -c %s "$ORIG")
[ "$size" -gt 4362076160 ] || fail "the source is only $size bytes"

"$WCODEC" pack -q "$ORIG" "$S/big.wcodec" || fail "wcodec pack of a file past 4 GiB"
"$WCODEC" info --json "$S/big.wcodec" | "$PYTHON3" -c '
import json, sys
d = json.load(sys.stdin)
size = int(sys.argv[1])
assert d["decoded_bytes"] == size, (d["decoded_bytes"], size)
t = {x["name"]: x for x in d["tensors"]}
assert t["tail"]["end"] == size and t["tail"]["begin"] > 1 << 32, t["tail"]
assert t["zeros"]["bytes"] == (4 << 30) + (64 << 20), t["zeros"]
' "$size" || fail "wcodec info --json sizes"

mount_fs "$S" "$M"
V=$M/big.safetensors
[ "$(stat -c %s "$V")" = "$size" ] || fail "st_size $(stat -c %s "$V"), expected $size"
"$PYTHON3" - "$ORIG" "$V" <<'EOF' || fail "reads past 4 GiB"
import mmap, os, random, sys
a = os.open(sys.argv[1], os.O_RDONLY)
b = os.open(sys.argv[2], os.O_RDONLY)
size = os.fstat(a).st_size
tail = 1_000_000
offs = [0, (1 << 31) - 3, (1 << 32) - 5000, 1 << 32, (1 << 32) + 4093, size - tail - 17,
        size - tail, size - 4096, size - 1]
r = random.Random(3)
offs += [r.randrange(size) for _ in range(24)]
for o in offs:
    n = min(70_000, size - o)
    x, y = os.pread(a, n, o), os.pread(b, n, o)
    if x != y:
        sys.exit(f"pread of {n} bytes at {o} differs")
if os.pread(b, tail, size - tail) != os.pread(a, tail, size - tail):
    sys.exit("the last tensor differs")
if os.pread(b, 100, size) != b"":
    sys.exit("a read at the end of the file returned bytes")
with mmap.mmap(b, size, prot=mmap.PROT_READ) as m:
    for o in (1 << 32, size - tail, size - 4096):
        if m[o:o + 4096] != os.pread(a, 4096, o):
            sys.exit(f"mmap at {o} differs")
EOF
unmount_fs "$M"
echo "PASS"
