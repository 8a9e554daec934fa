#!/usr/bin/env bash
# demo.sh - from a fresh Debian/Ubuntu machine to a mounted, compressed
# model directory read by standard tools, in one command:
#
#   contrib/demo.sh [DATA_DIR]          (default DATA_DIR: ./data)
#   contrib/demo.sh --build-dir          print where it builds, and exit
#
#  1. installs the Debian packages the build needs (the list of .ci/run,
#     plus npm if there is none), only if some are missing (apt-get, with
#     sudo unless root);
#  2. builds: autoreconf -fi, configure, make (in build/demo; in the source
#     tree itself if that was configured there, as the README's build does,
#     since autoconf refuses a second, out-of-tree build of such a tree);
#  3. fetches the TensorFlow.js models of @vladmandic/face-api with `npm pack`
#     and converts them to safetensors, F32 and BF16 (contrib/fetch-models.sh);
#  4. `wcodec pack`s every .safetensors into a mirror directory of .wcodec
#     files, copying the other files (JSON) as they are, then `wcodec info`
#     and `wcodec verify` of the mirror;
#  5. mounts the mirror with `wcodecfs` and shows standard tools reading it:
#     ls -l, sha256sum of original vs virtual file, cmp, a Python mmap read
#     of one tensor parsed from the safetensors header, `wcodec info`;
#  6. unmounts, then loads every packed file without a mount with the Python
#     package (wcodec.numpy.load_file) and compares each tensor with the
#     original's.
# Exits non-zero (and says what) if any byte read through the mount differs
# from the original or any step fails. Safe to run again: every step skips
# what is already done.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build/demo
[ -f "$top/config.status" ] && build=$top # configured in-tree
if [ "${1:-}" = --build-dir ]; then echo "$build"; exit 0; fi
data=${1:-./data}
step() { printf '\n==> %s\n' "$*"; }
fail() { echo "demo.sh: FAILED: $*" >&2; exit 1; }

# ---- 1. packages ----------------------------------------------------------------
pkgs="build-essential autoconf automake libtool pkg-config autoconf-archive
      libfuse3-dev fuse3 libzstd-dev zstd libjansson-dev check libsubunit-dev libsystemd-dev
      libxxhash-dev libpng-dev libjpeg-dev libcurl4-openssl-dev libinih-dev libexpat1-dev python3 python3-numpy python3-pil"
step "Debian packages"
missing=$(for p in $pkgs; do dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q "ok installed" || echo "$p"; done)
# npm: Debian's package unless an npm is already installed (e.g. with Node.js
# from elsewhere, which Debian's npm package would conflict with).
command -v npm >/dev/null || missing="$missing npm"
# shellcheck disable=SC2086
missing=$(printf "%s " $missing)
if [ -n "${missing// /}" ]; then
	if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
	echo "installing:" "$missing"
	export DEBIAN_FRONTEND=noninteractive
	$SUDO apt-get update -qq
	# shellcheck disable=SC2086
	$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
else
	echo "all present"
fi
PYTHON3=/usr/bin/python3
[ -x "$PYTHON3" ] || PYTHON3=python3
export PYTHON3

# ---- 2. build ---------------------------------------------------------------------
step "build (autoreconf, configure, make) in $build"
cd "$top"
[ -x configure ] || autoreconf -fi >/dev/null
mkdir -p "$build"
cd "$build"
[ -f Makefile ] || "$top"/configure >/dev/null
make -j"$(nproc)" >/dev/null
wcodec=$build/wcodec
wcodecfs=$build/wcodecfs
if [ ! -x "$wcodec" ] || [ ! -x "$wcodecfs" ]; then fail "wcodec/wcodecfs were not built"; fi
cd "$top"

# ---- 3. sample data ----------------------------------------------------------------
step "sample models: @vladmandic/face-api via npm pack, converted to safetensors"
bash "$top/contrib/fetch-models.sh" "$data"
data=$(cd "$data" && pwd)
models=$data/models/face-api
mirror=$data/mirror/face-api
mnt=$data/mnt

# ---- 4. pack ---------------------------------------------------------------------
step "wcodec pack $models -> $mirror"
# Every .safetensors packed, every other file copied; -u skips what an
# earlier run already did.
"$wcodec" pack -u "$models" "$mirror" | tail -1
du -sh "$models" "$mirror"
"$wcodec" info "$mirror" # per container: bytes decoded and stored, ratio; totals
"$wcodec" verify -q "$mirror" # every tile decoded, every checksum: silent when all is well

# ---- 5. mount and read -------------------------------------------------------------
step "wcodecfs $mirror $mnt"
mkdir -p "$mnt"
if mountpoint -q "$mnt"; then fusermount3 -u "$mnt"; fi
"$wcodecfs" "$mirror" "$mnt"
trap 'fusermount3 -u "$mnt" 2>/dev/null || true' EXIT
mountpoint -q "$mnt" || fail "wcodecfs returned but $mnt is not mounted"

step "ls -l $mnt"
ls -l "$mnt"

step "sha256sum: original vs virtual"
bad=0
for f in "$models"/*; do
	b=$(basename "$f")
	[ -e "$mnt/$b" ] || { echo "MISSING in the mount: $b"; bad=1; continue; }
	a=$(sha256sum < "$f" | cut -d' ' -f1); v=$(sha256sum < "$mnt/$b" | cut -d' ' -f1)
	if [ "$a" = "$v" ]; then s=equal; else s=DIFFERENT; bad=1; fi
	printf '%s  %-44s %s\n' "${a:0:16}" "$b" "$s"
done
[ "$bad" = 0 ] || fail "a file read through the mount differs from the original"

step "cmp of every file"
n=0
for f in "$models"/*; do cmp "$f" "$mnt/$(basename "$f")" || fail "cmp $(basename "$f")"; n=$((n + 1)); done
echo "all $n files identical"

step "Python: mmap the virtual safetensors file, parse its header, read one tensor"
"$PYTHON3" - "$mnt/face_recognition_model.bf16.safetensors" "$models/face_recognition_model.bf16.safetensors" <<'EOF'
import json, mmap, struct, sys
virt, orig = sys.argv[1], sys.argv[2]
with open(virt, "rb") as f:
    m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)  # MAP_SHARED, as loaders do
    (n,) = struct.unpack_from("<Q", m, 0)
    hdr = json.loads(m[8:8 + n])
    hdr.pop("__metadata__", None)
    name, t = max(hdr.items(), key=lambda kv: kv[1]["data_offsets"][1] - kv[1]["data_offsets"][0])
    b, e = t["data_offsets"]
    data = m[8 + n + b:8 + n + e]
with open(orig, "rb") as f:
    f.seek(8 + n + b)
    want = f.read(e - b)
print("tensor %s: dtype %s, shape %s, %d bytes" % (name, t["dtype"], t["shape"], e - b))
# BF16 -> float: the 16 bits are the high half of a float32.
vals = [struct.unpack("<f", struct.pack("<I", v << 16))[0] for v in struct.unpack_from("<8H", data, 0)]
print("first values:", " ".join("%.5g" % v for v in vals))
if data != want:
    sys.exit("tensor bytes differ from the original")
print("tensor bytes equal the original")
EOF

step "wcodec info $mirror/face_recognition_model.bf16.wcodec"
"$wcodec" info "$mirror/face_recognition_model.bf16.wcodec" | sed -n 1,30p

# ---- 6. unmount ---------------------------------------------------------------------
step "unmount"
fusermount3 -u "$mnt"
trap - EXIT

step "Python, no mount: wcodec.numpy.load_file of every packed file"
WCODEC_LIBRARY=$build/.libs/libwcodec.so.0 PYTHONPATH=$top/python "$PYTHON3" - "$mirror" "$models" <<'EOF'
import glob, os, sys, time
import wcodec.numpy as wn
mirror, models = sys.argv[1], sys.argv[2]
n = nbytes = 0
t = 0.0
for packed in sorted(glob.glob(os.path.join(mirror, "*.wcodec"))):
    t0 = time.perf_counter()
    got = wn.load_file(packed)
    t += time.perf_counter() - t0
    want = wn.load_file(os.path.join(models, os.path.basename(packed)[:-7] + ".safetensors"))
    if list(got) != list(want):
        sys.exit(f"{packed}: tensor names differ")
    for k in want:
        if got[k].tobytes() != want[k].tobytes():
            sys.exit(f"{packed}: tensor {k} differs from the original")
        nbytes += want[k].nbytes
    n += len(want)
print(f"{n} tensors ({nbytes / 1e6:.1f} MB) decoded in {t:.2f} s, all equal to the originals")
EOF
echo
echo "demo.sh: OK - every file read through wcodecfs, and every tensor loaded by the Python package, is byte-identical to its original"
