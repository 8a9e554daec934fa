# shellcheck shell=bash
# lib.sh - helpers shared by the contrib/bench/*.sh benchmarks (sourced).
#
# Tools are found in $BUILD (default: the current directory if it holds
# ./wcodec, else ../../build/ci next to the sources); override any one with
# WCODEC, WCODECFS, RAMFS, RANDREAD. PYTHON3 defaults to /usr/bin/python3.

bench_src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ -z "${BUILD:-}" ]; then
	if [ -x ./wcodec ] || [ -x ./contrib/bench/ramfs ]; then BUILD=$PWD; else BUILD=$bench_src/../../build/ci; fi
fi
WCODEC=${WCODEC:-$BUILD/wcodec}
WCODECFS=${WCODECFS:-$BUILD/wcodecfs}
RAMFS=${RAMFS:-$BUILD/contrib/bench/ramfs}
RANDREAD=${RANDREAD:-$BUILD/contrib/bench/randread}
if [ -z "${PYTHON3:-}" ]; then
	if [ -x /usr/bin/python3 ]; then PYTHON3=/usr/bin/python3; else PYTHON3=python3; fi
fi

die() { echo "${0##*/}: $*" >&2; exit 1; }

need_tool() { # need_tool PATH NAME
	[ -x "$1" ] || die "$2 not found at $1 (set BUILD=<build dir> or $2=<path>)"
}

# The machine, for the heading of every table.
machine_line() {
	local cpu mem
	cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
	mem=$(awk '/^MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)
	echo "machine: $(nproc) CPUs ($cpu), $mem RAM, Linux $(uname -r), $(date -u +%Y-%m-%dT%H:%MZ)"
}

# Drop the page cache (dentries, inodes, pages). Returns 1 where not permitted.
drop_caches() {
	sync
	{ echo 3 > /proc/sys/vm/drop_caches; } 2>/dev/null
}

# Seconds dd took to copy FILE to /dev/null in 1 MiB blocks (dd's own timer).
dd_seconds() {
	local out
	out=$(LC_ALL=C dd if="$1" of=/dev/null bs=1M 2>&1) || { echo "$out" >&2; return 1; }
	echo "$out" | sed -n 's/.* copied, \([0-9.e+-]*\) s,.*/\1/p' | tail -1
}

# median of the numbers given as arguments
median() {
	printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END {
		if (NR == 0) { print "nan"; exit }
		if (NR % 2) print v[(NR + 1) / 2]; else printf "%.6g\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# mb_per_s BYTES SECONDS -> decimal MB/s with no fraction
mb_per_s() { awk -v b="$1" -v s="$2" 'BEGIN { if (s !~ /^[0-9.e+-]+$/) print "-"; else if (s + 0 > 0) printf "%.0f", b / s / 1e6; else print "inf" }'; }

# wait_mount MOUNTPOINT PID [SECONDS]: until MOUNTPOINT is a mount (at most
# SECONDS, default 10), or PID died.
wait_mount() {
	for _ in $(seq $((${3:-10} * 20))); do
		mountpoint -q "$1" && return 0
		kill -0 "$2" 2>/dev/null || { echo "mount daemon $2 exited" >&2; return 1; }
		sleep 0.05
	done
	echo "timed out waiting for the mount on $1" >&2
	return 1
}

# unmount MOUNTPOINT PID: unmount and wait for the daemon (started by us) to exit.
unmount_wait() {
	if mountpoint -q "$1"; then fusermount3 -u "$1" || umount -l "$1" || true; fi
	wait "$2" 2>/dev/null || true
}

# Peak and current resident set of process PID in KiB: "VmHWM VmRSS".
rss_kib() {
	awk '/^VmHWM/ { h = $2 } /^VmRSS/ { r = $2 } END { print h, r }' "/proc/$1/status"
}
