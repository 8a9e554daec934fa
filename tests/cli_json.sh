#!/bin/sh
# --json on pack, verify and info: every output parses (python3 -m
# json.tool) and describes a file with the same keys and values whatever
# the command (file, format, decoded_bytes, file_bytes, ratio), each size
# under exactly one key; verify
# reports a damaged file as not ok and exits 1; a directory's pack and a
# .qvq archive use the same keys.
. "$top_srcdir/tests/cli_lib.sh"

"$PY" "$GEN" --profile all --seed 21 "$T/a.safetensors"
"$WCODEC" pack --json "$T/a.safetensors" "$T/a.wcodec" > "$T/pack.json" || fail "pack --json"
"$WCODEC" verify --json "$T/a.wcodec" > "$T/verify.json" || fail "verify --json"
"$WCODEC" info --json "$T/a.wcodec" > "$T/info.json" || fail "info --json"
for j in pack verify info; do
	"$PY" -m json.tool "$T/$j.json" > /dev/null || fail "$j --json is not JSON: $(head -c 300 "$T/$j.json")"
done

# A damaged copy: verify says so, in JSON and in its exit status.
cp "$T/a.wcodec" "$T/bad.wcodec"
"$PY" - "$T/bad.wcodec" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
payload_off = struct.unpack_from("<Q", b, 64)[0]
b[payload_off + 40] ^= 0x10
open(sys.argv[1], "wb").write(b)
PY
if "$WCODEC" verify --json "$T/a.wcodec" "$T/bad.wcodec" > "$T/verify2.json" 2>/dev/null; then
	fail "verify --json of a damaged file exited 0"
fi

# A tree and an image archive.
mkdir -p "$T/tree/sub" "$T/img"
cp "$T/a.safetensors" "$T/tree/sub/m.safetensors"
echo '{}' > "$T/tree/config.json"
"$WCODEC" pack --json "$T/tree" "$T/packed" > "$T/tree.json" || fail "pack --json of a directory"
"$PY" - "$T/img" <<'PY'
import os, random, sys
rng = random.Random(3)
for i in range(4):
    w, h = rng.randrange(8, 30), rng.randrange(8, 30)
    with open(os.path.join(sys.argv[1], "p%d.ppm" % i), "wb") as f:
        f.write(b"P6\n%d %d\n255\n" % (w, h) + bytes(rng.randrange(256) for _ in range(w * h * 3)))
PY
"$WCODEC" pack-images -q "$T/img" "$T/i.qvq" --codebook 16 --seed 1 > /dev/null || fail "pack-images"
"$WCODEC" info --json "$T/i.qvq" > "$T/qinfo.json" || fail "info --json of a .qvq"
"$WCODEC" verify --json "$T/i.qvq" > "$T/qverify.json" || fail "verify --json of a .qvq"

"$PY" - "$T" <<'PY' || fail "the JSON reports"
import json, os, sys
t = sys.argv[1]
load = lambda n: json.load(open(os.path.join(t, n)))
KEYS = ("file", "format", "decoded_bytes", "file_bytes", "ratio")
pack, verify, info = load("pack.json"), load("verify.json"), load("info.json")
v = verify["files"][0]
size = os.path.getsize(os.path.join(t, "a.wcodec"))
orig = os.path.getsize(os.path.join(t, "a.safetensors"))
for d in (pack, v, info):
    assert all(k in d for k in KEYS), (sorted(d), KEYS)
    assert d["format"] == "wcodec" and d["file_bytes"] == size and d["decoded_bytes"] == orig, d
    assert abs(d["ratio"] - orig / size) < 1e-6, d
    assert os.path.realpath(d["file"]) == os.path.realpath(os.path.join(t, "a.wcodec")), d
    # one key per quantity: no other top-level number repeats either size
    assert [k for k, x in d.items() if x == size and type(x) is int] == ["file_bytes"], d
    assert [k for k, x in d.items() if x == orig and type(x) is int] == ["decoded_bytes"], d
assert pack["coded_data_bytes"] == info["coded_data_bytes"], (pack, info)
assert v["ok"] is True and v["damaged_tiles"] == 0 and v["tiles"] == info["ntiles"], v
assert verify["verified"] == 1 and verify["ok"] == 1, verify
v2 = load("verify2.json")
bad = [f for f in v2["files"] if f["file"].endswith("bad.wcodec")][0]
assert bad["ok"] is False and bad["damaged_tiles"] >= 1, bad
assert v2["ok"] == 1 and v2["damaged_or_unreadable"] == 1, v2
tree = load("tree.json")
assert tree["packed"] == 1 and tree["copied"] == 1, tree
f = tree["files"][0]
assert all(k in f for k in KEYS) and f["decoded_bytes"] == orig, f
qi, qv = load("qinfo.json"), load("qverify.json")["files"][0]
for d in (qi, qv):
    assert all(k in d for k in KEYS) and d["format"] == "qvq", d
assert qi["decoded_bytes"] == qv["decoded_bytes"] == 3 * qi["pixels"], (qi, qv)
assert qi["file_bytes"] == qv["file_bytes"] == os.path.getsize(os.path.join(t, "i.qvq"))
PY
echo "PASS: cli_json.sh"
