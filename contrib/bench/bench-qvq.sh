#!/usr/bin/env bash
# bench-qvq.sh - benchmarks of .qvq image archives (docs/BENCHMARKS.md ("Image archives")).
# Not a test: it takes minutes and needs the real photographs.
#
# usage: contrib/bench/bench-qvq.sh BUILD_DIR [DATA_DIR]
#   BUILD_DIR  a configured and built tree (wcodec, wcodecfs, bench/qvq_bench,
#              contrib/bench/ramfs)
#   DATA_DIR   where photos and archives go (default: data/)
#
# Measures:
#  1. quality: PSNR and bits per pixel of K = 256, 4096, 65536 on the
#     photographs of contrib/fetch-photos.sh at 224x224, next to JPEG (PIL,
#     quality sweep) of the same 224x224 inputs;
#  2. throughput on N 224x224 crops of the photographs (the crops archive),
#     single reader thread, sequential:
#       - mount: fresh wcodecfs mount, every image read as its PPM file, and
#         every image read from images.npy (one pread per image);
#       - RAM FUSE ceiling: the same images.npy bytes served from memory by
#         contrib/bench/ramfs, one pread per image;
#       - JPEG: the same crops as JPEG files (quality 90), read and decoded
#         with PIL to a numpy array;
#       - decode only, one CPU core (bench/qvq_bench).
#     Each throughput figure is the best of REPS (default 3) fresh mounts.
#  3. PAIRS=N (default 0): N rounds of a fresh wcodecfs mount and the RAM FUSE
#     ceiling (ramfs serving the unpacked directory) read alternately, page
#     cache dropped and the archive read back before each, both as images.npy
#     (one pread per image) and as PPM files (open, read, close each), with
#     the ratio of each round and their medians: issue 4's "0.7 of the
#     ceiling", measured side by side. ONLY=pairs runs only this.
#     SHUFFLE=1: the readers visit the images in a random order (seeded by
#     the round), as a training epoch with shuffling does; a cache smaller
#     than the data set (CACHE) then decodes a tile for most images read.
# ONLY=quality or ONLY=throughput runs one half. The GPU figures come from
# bench/vq_bench on a GPU machine (see docs/BENCHMARKS.md ("Image archives")).
# Prints "RESULT name value" lines (also in DATA_DIR/qvq/results.txt).
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:?usage: bench-qvq.sh BUILD_DIR [DATA_DIR]}" && pwd)
data=${2:-$top/data}
mkdir -p "$data"
data=$(cd "$data" && pwd)
PY=${PYTHON3:-/usr/bin/python3}
WCODEC=$build/wcodec
WCODECFS=$build/wcodecfs
RAMFS=$build/contrib/bench/ramfs
QVQ_BENCH=$build/bench/qvq_bench
CROPS_PER_PHOTO=${CROPS_PER_PHOTO:-24}
REPS=${REPS:-3}           # fresh mounts per throughput figure; the best is kept
ONLY=${ONLY:-all}         # all | quality | throughput | pairs
PAIRS=${PAIRS:-0}         # alternating mount / ceiling rounds (3. above)
SHUFFLE=${SHUFFLE:-0}     # 1: the pairs' readers take the images in a random order
CACHE=${CACHE:-64M}       # wcodecfs cache_size: below the data set, so tile buffers are recycled
MOUNT_OPTS=${MOUNT_OPTS:-} # more wcodecfs -o options (e.g. direct_io)
RAMFS_OPTS=${RAMFS_OPTS:-} # ramfs -o options for the pairs' ceiling (e.g. direct_io)
out=$data/qvq
mkdir -p "$out"
results=$out/results.txt
: >"$results"
result() { echo "RESULT $1 $2" | tee -a "$results"; }

bash "$top/contrib/fetch-photos.sh" "$data/photos" >&2
photos=$data/photos/photos

# 224x224 inputs (PIL: shorter side to 224, bilinear, centre crop) and the
# crops set (random square crops of 30-100% of the shorter side, resized to
# 224x224), as lossless PNG so every codec sees the same pixels.
"$PY" - "$photos" "$out/p224" "$out/crops" "$CROPS_PER_PHOTO" <<'EOF'
import os, sys, random
from PIL import Image
src, p224, crops, per = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
rng = random.Random(1)
n = 0
for root, _, files in os.walk(src):
    for f in sorted(files):
        rel = os.path.relpath(os.path.join(root, f), src)
        stem = os.path.splitext(rel)[0]
        a = os.path.join(p224, stem + ".png")
        if os.path.exists(a) and os.path.exists(os.path.join(crops, stem + "_%02d.png" % (per - 1))):
            n += 1
            continue
        im = Image.open(os.path.join(root, f)).convert("RGB")
        w, h = im.size
        s = 224 / min(w, h)
        rw, rh = max(224, round(w * s)), max(224, round(h * s))
        r = im.resize((rw, rh), Image.BILINEAR)
        x0, y0 = (rw - 224) // 2, (rh - 224) // 2
        os.makedirs(os.path.dirname(a), exist_ok=True)
        r.crop((x0, y0, x0 + 224, y0 + 224)).save(a)
        for k in range(per):
            side = int(min(w, h) * rng.uniform(0.3, 1.0))
            x, y = rng.randint(0, w - side), rng.randint(0, h - side)
            c = im.crop((x, y, x + side, y + side)).resize((224, 224), Image.BILINEAR)
            d = os.path.join(crops, stem + "_%02d.png" % k)
            os.makedirs(os.path.dirname(d), exist_ok=True)
            c.save(d)
        n += 1
print("# %d photographs -> %s, %s" % (n, p224, crops), file=sys.stderr)
EOF

# 1. Quality: K sweep.
[ "$ONLY" = throughput ] || [ "$ONLY" = pairs ] || for K in 256 4096 65536; do
	"$WCODEC" pack-images -q -f "$out/p224" "$out/p224-$K.qvq" --codebook "$K" --seed 1 >"$out/pack-$K.txt"
	psnr=$(sed -n 's/.*PSNR \([0-9.]*\) dB.*/\1/p' "$out/pack-$K.txt")
	bpp=$(sed -n 's/.*, \([0-9.]*\) bits\/pixel.*/\1/p' "$out/pack-$K.txt")
	secs=$(sed -n 's/.*), \([0-9.]*\) s$/\1/p' "$out/pack-$K.txt")
	result "qvq_K${K}_psnr_db" "$psnr"
	result "qvq_K${K}_bpp" "$bpp"
	result "qvq_K${K}_pack_s" "$secs"
done
# JPEG at similar sizes: a quality sweep over the same 224x224 PNGs.
[ "$ONLY" = throughput ] || [ "$ONLY" = pairs ] || "$PY" - "$out/p224" <<'EOF' | tee -a "$results"
import io, os, sys
import numpy as np
from PIL import Image
src = sys.argv[1]
imgs = []
for root, _, files in os.walk(src):
    for f in sorted(files):
        imgs.append(np.asarray(Image.open(os.path.join(root, f)).convert("RGB")))
px = sum(a.shape[0] * a.shape[1] for a in imgs)
for q in (5, 10, 20, 30, 50, 75, 90):
    size, se = 0, 0.0
    for a in imgs:
        b = io.BytesIO()
        Image.fromarray(a).save(b, format="JPEG", quality=q)
        size += b.tell()
        d = np.asarray(Image.open(io.BytesIO(b.getvalue())).convert("RGB")).astype(np.float64)
        se += ((d - a) ** 2).sum()
    mse = se / (px * 3)
    print("RESULT jpeg_q%d_psnr_db %.2f" % (q, 10 * np.log10(255 ** 2 / mse)))
    print("RESULT jpeg_q%d_bpp %.3f" % (q, 8.0 * size / px))
EOF

[ "$ONLY" = quality ] && exit 0

# 2. Throughput on the crops.
K=${THROUGHPUT_K:-4096}
src=$out/mountsrc
mkdir -p "$src"
# Packed again when the library that packs and decodes it is newer: an
# archive from an older writer would measure an older format (one without
# PACK planes, say).
lib=$build/.libs/libwcodec.so
if [ ! -e "$src/crops.qvq" ] || { [ -e "$lib" ] && [ "$lib" -nt "$src/crops.qvq" ]; }; then
	"$WCODEC" pack-images -q -f "$out/crops" "$src/crops.qvq" --codebook "$K" --seed 1 >"$out/pack-crops.txt"
fi
n=$(find "$out/crops" -name '*.png' | wc -l)
result crops_images "$n"
result crops_codebook "$K"
[ "$ONLY" = pairs ] || "$QVQ_BENCH" "$src/crops.qvq" 3 | tee "$out/cpu.txt"
[ "$ONLY" = pairs ] || result cpu1_decode_images_per_s "$(sed -n 's/^cpu decode.* \([0-9]*\) images\/s.*/\1/p' "$out/cpu.txt")"
[ "$ONLY" = pairs ] || result cpu1_gather_images_per_s "$(sed -n 's/^cpu gather.* \([0-9]*\) images\/s.*/\1/p' "$out/cpu.txt")"

read_ppms() { # DIR [SEED]: read every .ppm (sorted, or shuffled by SEED), print images/s
	"$PY" - "$1" "${2:-0}" <<'EOF'
import os, random, sys, time
d, seed = sys.argv[1], int(sys.argv[2])
files = []
for root, _, fs in os.walk(d):
    files += [os.path.join(root, f) for f in fs if f.endswith(".ppm")]
files.sort()
if seed:
    random.Random(seed).shuffle(files)
t = time.perf_counter()
for f in files:
    fd = os.open(f, os.O_RDONLY)
    while os.read(fd, 1 << 20):
        pass
    os.close(fd)
print("%.0f" % (len(files) / (time.perf_counter() - t)))
EOF
}
read_npy() { # FILE [SEED]: one pread per image of images.npy (in order, or shuffled by SEED), print images/s
	"$PY" - "$1" "${2:-0}" <<'EOF'
import os, random, sys, time
import numpy as np
a = np.load(sys.argv[1], mmap_mode="r")
n, img, off = a.shape[0], a[0].nbytes, a.offset
order = list(range(n))
if int(sys.argv[2]):
    random.Random(int(sys.argv[2])).shuffle(order)
fd = os.open(sys.argv[1], os.O_RDONLY)
t = time.perf_counter()
for i in order:
    b = os.pread(fd, img, off + i * img)
    assert len(b) == img
print("%.0f" % (n / (time.perf_counter() - t)))
EOF
}

mnt=$out/mnt
mkdir -p "$mnt"
umount_quiet() { fusermount3 -u "$1" 2>/dev/null || true; }
# a fresh wcodecfs of the archive at $mnt, with the cache and options of this run
mount_wcodecfs() { "$WCODECFS" "$src" "$mnt" -o cache_size="$CACHE"${MOUNT_OPTS:+,$MOUNT_OPTS} 2>/dev/null; }
trap 'umount_quiet "$mnt"' EXIT
best() { sort -n | tail -1; }
"$WCODEC" unpack -q -f "$src/crops.qvq" "$out/unpacked" >/dev/null
sync
drop_caches() { # cold page cache, then the archive (or the ceiling's file) read back
	sync
	echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
	cat "$1" >/dev/null
}
if [ "$PAIRS" -gt 0 ]; then
	# Each round: wcodecfs and the ceiling (ramfs serving the unpacked
	# directory: the same images.npy and PPM files from RAM), each freshly
	# mounted with the page cache dropped, read as images.npy (one pread per
	# image) and as PPM files (open, read, close each).
	npy_ratios=() ppm_ratios=()
	for r in $(seq "$PAIRS"); do
		line="pair $r:"
		seed=0
		[ "$SHUFFLE" = 1 ] && seed=$r
		for what in npy ppm; do
			mount_wcodecfs
			drop_caches "$src/crops.qvq"
			if [ $what = npy ]; then m=$(read_npy "$mnt/crops/images.npy" $seed); else m=$(read_ppms "$mnt/crops" $seed); fi
			umount_quiet "$mnt"
			"$RAMFS" ${RAMFS_OPTS:+-o "$RAMFS_OPTS"} "$out/unpacked" "$mnt"
			drop_caches "$src/crops.qvq"
			if [ $what = npy ]; then c=$(read_npy "$mnt/images.npy" $seed); else c=$(read_ppms "$mnt" $seed); fi
			umount_quiet "$mnt"
			ratio=$(awk -v m="$m" -v c="$c" 'BEGIN { printf "%.3f", m / c }')
			if [ $what = npy ]; then npy_ratios+=("$ratio"); else ppm_ratios+=("$ratio"); fi
			line="$line $what wcodecfs $m, ramfs $c images/s ($ratio);"
		done
		echo "$line"
	done
	sorted() { printf '%s\n' "$@" | sort -n; }
	median() { awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
	result pairs "$PAIRS"
	result pairs_shuffled "$SHUFFLE"
	result npy_mount_over_ramfs_ratios "$(sorted "${npy_ratios[@]}" | tr '\n' ',' | sed 's/,$//')"
	result npy_mount_over_ramfs_median "$(sorted "${npy_ratios[@]}" | median)"
	result ppm_mount_over_ramfs_ratios "$(sorted "${ppm_ratios[@]}" | tr '\n' ',' | sed 's/,$//')"
	result ppm_mount_over_ramfs_median "$(sorted "${ppm_ratios[@]}" | median)"
fi
[ "$ONLY" = pairs ] && exit 0
for _ in $(seq "$REPS"); do
	mount_wcodecfs
	read_ppms "$mnt/crops"
	umount_quiet "$mnt"
	sleep 1
done | best | { read -r v; result mount_ppm_images_per_s "$v"; }
for _ in $(seq "$REPS"); do
	mount_wcodecfs
	read_npy "$mnt/crops/images.npy"
	umount_quiet "$mnt"
	sleep 1
done | best | { read -r v; result mount_npy_images_per_s "$v"; }
for _ in $(seq "$REPS"); do
	"$RAMFS" "$out/unpacked/images.npy" "$mnt"
	read_npy "$mnt/images.npy"
	umount_quiet "$mnt"
	sleep 1
done | best | { read -r v; result ramfs_npy_images_per_s "$v"; }
result wcodecfs_cache_size "$CACHE"
result loadavg_during_throughput "$(cut -d' ' -f1-3 /proc/loadavg | tr ' ' /)"

# The crops as JPEG files (quality 90), decoded with PIL.
"$PY" - "$out/crops" "$out/crops-jpeg" <<'EOF' | tee -a "$results"
import os, sys, time
import numpy as np
from PIL import Image
src, dst = sys.argv[1], sys.argv[2]
files = []
for root, _, fs in os.walk(src):
    for f in sorted(fs):
        s = os.path.join(root, f)
        d = os.path.join(dst, os.path.relpath(s, src))[:-4] + ".jpg"
        if not os.path.exists(d):
            os.makedirs(os.path.dirname(d), exist_ok=True)
            Image.open(s).save(d, quality=90)
        files.append(d)
for f in files:  # warm the page cache: time decoding, not the disk
    open(f, "rb").read()
dt = 1e30
for rep in range(3):  # the best of three passes
    t = time.perf_counter()
    for f in files:
        with Image.open(f) as im:
            a = np.asarray(im.convert("RGB"))
    dt = min(dt, time.perf_counter() - t)
print("RESULT pil_jpeg_q90_images_per_s %.0f" % (len(files) / dt))
print("RESULT pil_jpeg_q90_bpp %.3f" % (8.0 * sum(os.path.getsize(f) for f in files) / (len(files) * 224 * 224)))
EOF
echo "# results in $results" >&2
