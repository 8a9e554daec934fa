#!/usr/bin/env bash
# bench-random-ab.sh - random-read latency through fresh wcodecfs mounts, two
# or more daemons (builds, or options) alternating run by run: what a
# loader's scattered reads or a training job's random image reads wait for.
# A benchmark, not a test: run it as root (FUSE mounts, drop_caches) on a
# quiet machine.
#
# Each run: a fresh daemon (`DAEMON -f SRC MNT -o OPTS`), page cache dropped
# (and with SRCWARM=1 the packed files read back into it, so the figure is
# decode + FUSE without the disk), then `randread -n READS -t THREADS -s RUN`
# on MNT/NAME, every byte compared with REFERENCE, then unmount.
#
# Usage: bench-random-ab.sh [-r RUNS] [-n READS] [-t THREADS] [-o OPTS]
#          SRC NAME REFERENCE DAEMON...
#   SRC        directory with the packed file(s); NAME: the virtual file read
#   REFERENCE  the original file (randread compares every byte with it)
#   DAEMON     a wcodecfs binary, optionally PATH@OPTS for its own -o options
#   -r RUNS    runs of each daemon (default 5); -n READS (default 2000);
#   -t THREADS concurrent readers (default 1); -o OPTS for every daemon
# Environment: BUILD (for randread; see lib.sh), SRCWARM (0).
# Prints one line per run (run, daemon, randread's p50/p99/mean in us,
# mismatches), then each daemon's medians.
set -u
# shellcheck source=contrib/bench/lib.sh
. "$(dirname "$0")/lib.sh"
runs=5 reads=2000 threads=1 common=
usage="usage: bench-random-ab.sh [-r RUNS] [-n READS] [-t THREADS] [-o OPTS] SRC NAME REFERENCE DAEMON..."
while getopts r:n:t:o: opt; do
	case $opt in
	r) runs=$OPTARG ;; n) reads=$OPTARG ;; t) threads=$OPTARG ;; o) common=$OPTARG ;;
	*) die "$usage" ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 4 ] || die "$usage"
src=$1 name=$2 ref=$3
shift 3
need_tool "$RANDREAD" RANDREAD
[ -f "$ref" ] || die "no reference file $ref"
MNT=$(mktemp -d /tmp/bench-random.XXXXXX)
trap 'mountpoint -q "$MNT" && fusermount3 -u "$MNT"; rmdir "$MNT" 2>/dev/null' EXIT
echo "$(machine_line); $reads reads of 4 KiB, $threads thread(s), $runs runs per daemon, SRCWARM=${SRCWARM:-0}"
declare -A p50 p99 mean
for r in $(seq "$runs"); do
	i=0
	for d in "$@"; do
		i=$((i + 1))
		bin=${d%%@*} opts=$common
		[ "$bin" != "$d" ] && opts=${common:+$common,}${d#*@}
		"$bin" -f "$src" "$MNT" ${opts:+-o "$opts"} 2> "$MNT.log.$i" &
		pid=$!
		wait_mount "$MNT" "$pid" 30 || die "daemon $i ($d) did not mount: $(tail -3 "$MNT.log.$i")"
		drop_caches || die "cannot drop the page cache (run as root)"
		[ "${SRCWARM:-0}" = 1 ] && find "$src" -name '*.wcodec' -exec cat {} + > /dev/null
		out=$("$RANDREAD" -n "$reads" -t "$threads" -s "$r" "$MNT/$name" "$ref") || die "randread: $out"
		unmount_wait "$MNT" "$pid"
		rm -f "$MNT.log.$i"
		v50=$(echo "$out" | sed -n 's/.*p50_us=\([^ ]*\).*/\1/p')
		v99=$(echo "$out" | sed -n 's/.*p99_us=\([^ ]*\).*/\1/p')
		vm=$(echo "$out" | sed -n 's/.*mean_us=\([^ ]*\).*/\1/p')
		mis=$(echo "$out" | sed -n 's/.*mismatches=\([^ ]*\).*/\1/p')
		[ "$mis" = 0 ] || die "daemon $i ($d): $mis mismatching reads"
		p50[$i]="${p50[$i]:-} $v50" p99[$i]="${p99[$i]:-} $v99" mean[$i]="${mean[$i]:-} $vm"
		echo "run $r daemon $i: p50 $v50 us, p99 $v99 us, mean $vm us, 0 mismatches"
	done
done
echo
echo "| daemon | p50 us (median) | p99 us (median; runs) | mean us (median) |"
echo "|---|---:|---|---:|"
i=0
for d in "$@"; do
	i=$((i + 1))
	# shellcheck disable=SC2086 # the lists are space-separated numbers
	echo "| $i: \`$d\` | $(median ${p50[$i]}) | $(median ${p99[$i]}) ($(printf '%s\n' ${p99[$i]} | sort -g | tr '\n' ' ' | sed 's/ $//')) | $(median ${mean[$i]}) |"
done
