#!/usr/bin/env bash
# bench-mount.sh - read speed, latency and memory of a wcodecfs mount,
# side by side with the minimal RAM-backed FUSE (contrib/bench/ramfs) and
# the uncompressed file on disk, in one run. Prints markdown on stdout
# (progress on stderr). A benchmark, not a test: run it on a quiet machine.
#
# Usage: bench-mount.sh [-r REPS] [-n READS] [-c "SIZES"] [-w WORKDIR] FILE.safetensors
#   -r REPS     repetitions of each sequential read (default 5; the median is shown)
#   -n READS    random 4 KiB reads per latency run (default 2000)
#   -c SIZES    cache_size values for the memory run (default "64M 256M")
#   -w WORKDIR  where the .wcodec copies go (default: a new directory in $TMPDIR)
# Environment: BUILD (build directory with wcodec, wcodecfs, contrib/bench/*),
# WCODECFS_OPTS (extra -o options for every wcodecfs mount), see lib.sh.
#
# What is measured (page cache dropped with `echo 3 > /proc/sys/vm/drop_caches`
# before every cold run; where that is not permitted the table says so):
#  1. sequential: `dd bs=1M` of the whole file, (a) through a fresh wcodecfs
#     mount of the packed file, (b) through a fresh ramfs mount holding the
#     original bytes in RAM, (c) from the uncompressed file on disk; and
#     (d) again through the same wcodecfs mount (page cache warm), and
#     (e) `wcodec cat` of the packed file to /dev/null (decoding without
#     FUSE; the program loaded before the clock starts). The four cold
#     runs rotate their order in each repetition.
#  2. random 4 KiB preads (contrib/bench/randread, every byte compared with
#     the original) on a fresh mount / cold cache of each: p50, p99, max.
#  3. memory: 4 readers stream 4 different packed copies concurrently through
#     one fresh wcodecfs mount per cache_size; the daemon's VmHWM (peak RSS)
#     afterwards, against cache_size.
set -euo pipefail
# shellcheck source=contrib/bench/lib.sh
. "$(dirname "$0")/lib.sh"

reps=5 nreads=2000 caches="64M 256M" work=
while getopts "r:n:c:w:h" o; do
	case $o in
	r) reps=$OPTARG ;; n) nreads=$OPTARG ;; c) caches=$OPTARG ;; w) work=$OPTARG ;;
	h) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# = 1 ] || die "usage: bench-mount.sh [-r REPS] [-n READS] [-c SIZES] [-w WORKDIR] FILE.safetensors"
file=$(readlink -f "$1")
[ -f "$file" ] || die "$1: no such file"
for t in RAMFS RANDREAD; do need_tool "${!t}" "$t"; done
# Without the product (wcodec + wcodecfs) only the ramfs and disk rows are measured.
have_wc=1
if [ ! -x "$WCODEC" ] || [ ! -x "$WCODECFS" ]; then
	have_wc=0
	echo "wcodec/wcodecfs not found in $BUILD: measuring ramfs and disk only" >&2
fi
size=$(stat -c %s "$file")
name=$(basename "$file" .safetensors)

if [ -z "$work" ]; then work=$(mktemp -d "${TMPDIR:-/tmp}/bench-mount.XXXXXX"); fi
mkdir -p "$work/src" "$work/mnt"
mnt=$work/mnt
daemon=
cleanup() { if [ -n "$daemon" ]; then unmount_wait "$mnt" "$daemon"; fi; }
trap cleanup EXIT INT TERM

cold=yes
drop_caches || cold="no (not permitted: page cache warm)"

packed=0 t0=0 t1=0
if [ $have_wc = 1 ]; then
	echo "packing $file ..." >&2
	t0=$(date +%s.%N)
	"$WCODEC" pack -f "$file" "$work/src/$name.wcodec" >&2
	t1=$(date +%s.%N)
	packed=$(stat -c %s "$work/src/$name.wcodec")
fi

mount_wcodecfs() { # mount_wcodecfs SRC [extra -o options]; sets $daemon
	local opts=${2:-}${WCODECFS_OPTS:+,$WCODECFS_OPTS}
	"$WCODECFS" -f "$1" "$mnt" ${opts:+-o "${opts#,}"} 2>>"$work/wcodecfs.log" &
	daemon=$!
	wait_mount "$mnt" "$daemon" || { cat "$work/wcodecfs.log" >&2; die "wcodecfs did not mount"; }
}
mount_ramfs() {
	"$RAMFS" -f "$file" "$mnt" 2>>"$work/ramfs.log" &
	daemon=$!
	wait_mount "$mnt" "$daemon" || { cat "$work/ramfs.log" >&2; die "ramfs did not mount"; }
}
umount_it() { unmount_wait "$mnt" "$daemon"; daemon=; }
# The kernel readahead (KiB) of the mount, as both daemons set it.
mount_ra_kb() { cat "/sys/class/bdi/$(mountpoint -d "$mnt")/read_ahead_kb" 2>/dev/null || echo "?"; }
ra_wc=- ra_ram=-
ra_disk=$(cat "/sys/class/bdi/$(mountpoint -d "$(stat -c %m "$file")")/read_ahead_kb" 2>/dev/null || echo "?")

# Correctness first: the virtual file must equal the original.
if [ $have_wc = 1 ]; then
	mount_wcodecfs "$work/src"
	cmp "$mnt/$name.safetensors" "$file" || die "the virtual file differs from $file"
	umount_it
fi

# ---- 1. sequential reads -----------------------------------------------------
declare -a s_wc s_ram s_disk s_warm s_cat
seq_wcodecfs() {
	[ $have_wc = 1 ] || return 0
	mount_wcodecfs "$work/src"
	drop_caches || true
	s_wc+=("$(dd_seconds "$mnt/$name.safetensors")")
	ra_wc=$(mount_ra_kb)
	s_warm+=("$(dd_seconds "$mnt/$name.safetensors")")
	umount_it
}
seq_ramfs() {
	mount_ramfs
	drop_caches || true
	s_ram+=("$(dd_seconds "$mnt/$name.safetensors")")
	ra_ram=$(mount_ra_kb)
	umount_it
}
seq_disk() {
	drop_caches || true
	s_disk+=("$(dd_seconds "$file")")
}
# Decoding alone, no FUSE: `wcodec cat` of the packed file (cold) to /dev/null.
# The program and its libraries are loaded once after the drop (`--version`),
# so the time is the packed file's reads and the decode, not the loading of
# binaries from disk (40-150 ms here; the daemons above are started before
# their drops).
seq_cat() {
	[ $have_wc = 1 ] || return 0
	drop_caches || true
	"$WCODEC" --version > /dev/null
	local a b
	a=$(date +%s.%N)
	"$WCODEC" cat "$work/src/$name.wcodec" > /dev/null
	b=$(date +%s.%N)
	s_cat+=("$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.6f", b - a }')")
}
order=(seq_wcodecfs seq_ramfs seq_disk seq_cat)
for r in $(seq "$reps"); do
	echo "sequential, repetition $r of $reps ..." >&2
	for k in 0 1 2 3; do "${order[(k + r) % 4]}"; done
done

# ---- 2. random 4 KiB reads ----------------------------------------------------
rand_line() { # rand_line FILE -> "p50 p99 max" in microseconds
	local out
	out=$("$RANDREAD" -n "$nreads" -s 7 "$1" "$file") || die "randread on $1 failed: $out"
	echo "$out" | sed -n 's/.*p50_us=\([^ ]*\) p99_us=\([^ ]*\) max_us=\([^ ]*\).*/\1 \2 \3/p'
}
echo "random reads ..." >&2
r_wc="- - -"
if [ $have_wc = 1 ]; then
	mount_wcodecfs "$work/src"; drop_caches || true; r_wc=$(rand_line "$mnt/$name.safetensors"); umount_it
fi
mount_ramfs; drop_caches || true; r_ram=$(rand_line "$mnt/$name.safetensors"); umount_it
drop_caches || true; r_disk=$(rand_line "$file")

# ---- 3. peak RSS under 4 streaming readers --------------------------------------
mem_rows=()
[ $have_wc = 1 ] || caches=
mkdir -p "$work/src4"
for i in $([ $have_wc = 1 ] && echo 0 1 2 3); do
	[ -f "$work/src4/$name-$i.wcodec" ] || cp "$work/src/$name.wcodec" "$work/src4/$name-$i.wcodec"
done
for c in $caches; do
	echo "memory, cache_size=$c ..." >&2
	mount_wcodecfs "$work/src4" "cache_size=$c"
	drop_caches || true
	read -r hwm0 _ < <(rss_kib "$daemon")
	t0r=$(date +%s.%N)
	pids=()
	for i in 0 1 2 3; do dd if="$mnt/$name-$i.safetensors" of=/dev/null bs=1M status=none & pids+=($!); done
	for p in "${pids[@]}"; do wait "$p"; done
	t1r=$(date +%s.%N)
	read -r hwm rss < <(rss_kib "$daemon")
	umount_it
	secs=$(awk -v a="$t0r" -v b="$t1r" 'BEGIN { print b - a }')
	mem_rows+=("| $c | $(awk -v k="$hwm0" 'BEGIN{printf "%.1f", k/1024}') | $(awk -v k="$hwm" 'BEGIN{printf "%.1f", k/1024}') | $(awk -v k="$rss" 'BEGIN{printf "%.1f", k/1024}') | $(mb_per_s $((4 * size)) "$secs") |")
done

# ---- report ---------------------------------------------------------------------
med_wc=$(median "${s_wc[@]+"${s_wc[@]}"}"); med_ram=$(median "${s_ram[@]}")
med_disk=$(median "${s_disk[@]}"); med_warm=$(median "${s_warm[@]+"${s_warm[@]}"}")
med_cat=$(median "${s_cat[@]+"${s_cat[@]}"}")
cat <<EOF
### Mount benchmark: $(basename "$file")

$(machine_line)

File: \`$(basename "$file")\`, $size bytes; packed: $packed bytes (ratio $(awk -v a="$size" -v b="$packed" 'BEGIN{printf "%.3f", a/b}'), \`wcodec pack\` $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}') s).
Page cache dropped before cold runs: $cold. Repetitions: $reps (median shown; all runs in seconds below).
Kernel readahead (read_ahead_kb): wcodecfs mount $ra_wc, ramfs mount $ra_ram, disk $ra_disk.
wcodecfs options: defaults${WCODECFS_OPTS:+ + $WCODECFS_OPTS} (\`$("$WCODECFS" --version 2>&1 | head -1 || true)\`).

| sequential \`dd bs=1M\` | median MB/s | runs (s) |
|---|---:|---|
| wcodecfs, fresh mount, cold | $(mb_per_s "$size" "$med_wc") | ${s_wc[*]} |
| ramfs (minimal FUSE from RAM), cold | $(mb_per_s "$size" "$med_ram") | ${s_ram[*]} |
| uncompressed file on disk, cold | $(mb_per_s "$size" "$med_disk") | ${s_disk[*]} |
| wcodecfs, same mount again (page cache) | $(mb_per_s "$size" "$med_warm") | ${s_warm[*]} |
| \`wcodec cat\` to /dev/null, cold (decode alone, no FUSE) | $(mb_per_s "$size" "$med_cat") | ${s_cat[*]} |

wcodecfs cold / ramfs: $(awk -v a="$med_ram" -v b="$med_wc" 'BEGIN{printf "%.2f", a/b}'); wcodecfs cold / disk: $(awk -v a="$med_disk" -v b="$med_wc" 'BEGIN{printf "%.2f", a/b}').

| random 4 KiB pread, $nreads reads, cold | p50 µs | p99 µs | max µs |
|---|---:|---:|---:|
| wcodecfs, fresh mount | $(echo "$r_wc" | awk '{print $1" | "$2" | "$3}') |
| ramfs, fresh mount | $(echo "$r_ram" | awk '{print $1" | "$2" | "$3}') |
| uncompressed file on disk | $(echo "$r_disk" | awk '{print $1" | "$2" | "$3}') |

Every random read was compared byte for byte with the original (randread: 0 mismatches).

| 4 concurrent streaming readers, cache_size | VmHWM after mount MiB | VmHWM after reads MiB | VmRSS after MiB | aggregate MB/s |
|---|---:|---:|---:|---:|
$(printf '%s\n' "${mem_rows[@]}")

(4 readers: \`dd bs=1M\` of 4 distinct packed copies of the file, $size bytes each, one wcodecfs mount per row.)
EOF
