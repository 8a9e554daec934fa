#!/bin/sh
# A file of thousands of tiny tensors (TF.js graph constants look like this):
# one 1 MiB read then spans more tiles than writev takes segments. Every
# read must be answered (no hang) with the right bytes.
. "${top_srcdir:-.}/tests/mount_lib.sh"

O=$TMP/orig
S=$TMP/src
mkdir -p "$O" "$S"
"$PYTHON3" - "$O/tiny.safetensors" <<'PY' || fail "generate"
import json, random, struct, sys
random.seed(5)
header, blobs, off = {}, [], 0
for i in range(3000):
    n = random.choice([1, 2, 3, 4, 8, 16, 60])
    data = struct.pack("<%df" % n, *[random.gauss(0, 1) for _ in range(n)])
    header["const_%04d" % i] = {"dtype": "F32", "shape": [n], "data_offsets": [off, off + len(data)]}
    blobs.append(data)
    off += len(data)
h = json.dumps(header, separators=(",", ":")).encode()
h += b" " * (-len(h) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
PY
pack "$O/tiny.safetensors" "$S/tiny.wcodec" 1048576

M=$TMP/mnt
mount_fs "$S" "$M"
pid=$(daemon_pid_of "$M") || fail "no daemon"
# dd with 1 MiB reads, bounded in time: a lost reply would hang it forever.
timeout 60 dd if="$M/tiny.safetensors" of="$TMP/copy" bs=1M iflag=direct 2>/dev/null ||
	timeout 60 dd if="$M/tiny.safetensors" of="$TMP/copy" bs=1M 2>/dev/null || fail "dd failed or hung"
cmp "$TMP/copy" "$O/tiny.safetensors" || fail "bytes differ"
[ "$(sha "$M/tiny.safetensors")" = "$(sha "$O/tiny.safetensors")" ] || fail "sha256 differs"
kill -0 "$pid" || fail "daemon died"
unmount_fs "$M"
echo "PASS"
