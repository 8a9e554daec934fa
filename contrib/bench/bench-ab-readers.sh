#!/usr/bin/env bash
# bench-ab-readers.sh - A/B of wcodecfs configurations on N concurrent cold
# streaming readers, many alternating runs (docs/BENCHMARKS.md, section
# 13). A benchmark, not a test: run it as root (FUSE mounts, drop_caches) on a
# quiet machine. Differences of a few percent need many runs: single runs of
# one configuration spread by 10-20% on the lent GPU machines, so this
# script alternates the configurations run by run and reports medians.
#
# Each run: a fresh daemon (`wcodecfs -f SRC MNT -o OPTS`), page cache
# dropped, the packed files read once into it (SRCWARM=1, the default: the
# read then measures decode + FUSE, not the disk), then N `dd bs=1M` over N
# equal parts of the virtual file at once. Recorded per run: the wall time
# until the last reader is done, when each reader finished and which part
# it read, the daemon's unmount log lines (cache and read counters), and
# over the read the daemon's CPU time, the machine's busy CPU time, context
# switches and interrupts (/proc/PID/stat, /proc/stat): what each
# configuration costs the machine besides its wall time.
#
# Usage: bench-ab-readers.sh CONFIG...
#   CONFIG    [VAR=VALUE[ VAR=VALUE...]@]OPTS: wcodecfs -o OPTS, with
#             environment variables for that daemon (e.g.
#             WCODEC_PLUGIN_DIR=DIR@backend=cuda); WCODECFS=PATH among them runs
#             that daemon binary instead of BUILD's (an A/B of two builds);
#             DAEMON_CPUS=LIST and READER_CPUS=LIST among them run the daemon
#             and the dd readers on those CPUs only (taskset -c LIST): is a
#             gap the two competing for CPUs, or not?
#             "ramfs:FILE" serves FILE from RAM (contrib/bench/ramfs), the
#             FUSE ceiling; "ramfs,OPTS:FILE" passes -o OPTS to it (e.g.
#             ramfs,direct_io:FILE, the ceiling of -o direct_io)
# Environment: BUILD (build directory with wcodecfs and contrib/bench/ramfs;
#   see lib.sh), SRC (directory holding the packed file), NAME (the virtual
#   file's name in the mount, e.g. big.safetensors), N (readers, 4), REPS (10),
#   SRCWARM (1), OUT (directory for the logs, a new temporary one if unset),
#   TRACE (0; 1 records the kernel's FUSE request events and the dd readers'
#   scheduling events of every run through tracefs into OUT/trace.I.REP.gz
#   and summarizes them with fuse_trace_summary.py: request latencies, reads
#   in flight, and how long the readers were awake or blocked).
set -u
# shellcheck source=contrib/bench/lib.sh
. "$(dirname "$0")/lib.sh"
[ $# -ge 1 ] || die "usage: SRC=DIR NAME=FILE bench-ab-readers.sh CONFIG..."
[ -d "${SRC:-}" ] || die "SRC=<directory with the packed file> is required"
[ -n "${NAME:-}" ] || die "NAME=<virtual file name in the mount> is required"
need_tool "$WCODECFS" WCODECFS
N=${N:-4} REPS=${REPS:-10}
OUT=${OUT:-$(mktemp -d /tmp/bench-ab.XXXXXX)}
MNT=$OUT/mnt
mkdir -p "$MNT"
: > "$OUT/runs.txt"
: > "$OUT/costs.txt"

# machine-wide counters from /proc/stat: busy ticks (user nice system irq
# softirq), context switches, interrupts
stat_now() {
	awk '$1 == "cpu" { b = $2 + $3 + $4 + $7 + $8 } $1 == "ctxt" { c = $2 } $1 == "intr" { i = $2 }
	     END { print b, c, i }' /proc/stat
}
TRACEFS=/sys/kernel/tracing
TRACE_EVENTS="fuse/fuse_request_send fuse/fuse_request_end sched/sched_switch sched/sched_wakeup"
trace_setup() {
	mountpoint -q "$TRACEFS" || mount -t tracefs nodev "$TRACEFS" || die "cannot mount tracefs"
	[ -d "$TRACEFS/events/fuse/fuse_request_send" ] || die "this kernel has no FUSE request tracepoints"
	echo 0 > "$TRACEFS/tracing_on"
	echo 16384 > "$TRACEFS/buffer_size_kb"
	echo mono > "$TRACEFS/trace_clock"
	echo 'prev_comm == "dd" || next_comm == "dd"' > "$TRACEFS/events/sched/sched_switch/filter"
	echo 'comm == "dd"' > "$TRACEFS/events/sched/sched_wakeup/filter"
	for e in $TRACE_EVENTS; do echo 1 > "$TRACEFS/events/$e/enable"; done
	trap trace_off EXIT
}
trace_off() {
	echo 0 > "$TRACEFS/tracing_on"
	for e in $TRACE_EVENTS; do echo 0 > "$TRACEFS/events/$e/enable"; done
	echo 0 > "$TRACEFS/events/sched/sched_switch/filter"
	echo 0 > "$TRACEFS/events/sched/sched_wakeup/filter"
}
[ "${TRACE:-0}" = 1 ] && trace_setup

# utime + stime of process PID in ticks
proc_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }

run_one() { # run_one INDEX CONFIG
	local i=$1 cfg=$2 env='' envs='' bin=$WCODECFS kv opts f pid s t log=$OUT/daemon.$1.log ddp='' k mib q
	local dcpus='' rcpus=''
	opts=$cfg
	case $cfg in *@*) env=${cfg%%@*}; opts=${cfg#*@} ;; esac
	# WCODECFS=PATH picks another build's daemon (an A/B of builds); the
	# CPU sets pin the daemon and the readers; the rest is the daemon's
	# environment
	for kv in $env; do
		case $kv in
		WCODECFS=*) bin=${kv#WCODECFS=} ;;
		DAEMON_CPUS=*) dcpus=${kv#*=} ;;
		READER_CPUS=*) rcpus=${kv#*=} ;;
		*) envs="$envs $kv" ;;
		esac
	done
	local dpin=(env) rpin=(env)
	[ -n "$dcpus" ] && dpin=(taskset -c "$dcpus")
	[ -n "$rcpus" ] && rpin=(taskset -c "$rcpus")
	if [ "${opts#ramfs}" != "$opts" ]; then
		# ramfs:FILE, or ramfs,OPTS:FILE (ramfs -o OPTS)
		local rfile=${opts#*:} ropts=${opts%%:*}
		ropts=${ropts#ramfs}
		ropts=${ropts#,}
		need_tool "$RAMFS" RAMFS
		"${dpin[@]}" "$RAMFS" -f ${ropts:+-o "$ropts"} "$rfile" "$MNT" 2>>"$log" &
		pid=$!
		f=$MNT/$(basename "$rfile")
	else
		# shellcheck disable=SC2086 # envs: VAR=VALUE words, or nothing
		"${dpin[@]}" env $envs "$bin" -f "$SRC" "$MNT" -o "$opts" 2>>"$log" &
		pid=$!
		f=$MNT/$NAME
	fi
	wait_mount "$MNT" "$pid" 30 || { echo "config $i: mount failed" >&2; kill "$pid" 2>/dev/null; return 1; }
	drop_caches || die "cannot drop the page cache (run as root)"
	if [ "${SRCWARM:-1}" = 1 ]; then cat "$SRC"/* > /dev/null; fi
	mib=$((($(stat -c %s "$f") + 1048575) / 1048576))
	q=$(((mib + N - 1) / N))
	: > "$OUT/readers.txt"
	local m0 p0
	m0=$(stat_now) p0=$(proc_ticks "$pid")
	if [ "${TRACE:-0}" = 1 ]; then echo > "$TRACEFS/trace"; echo 1 > "$TRACEFS/tracing_on"; fi
	s=$(date +%s%N)
	for ((k = 0; k < N; k++)); do
		{ "${rpin[@]}" dd if="$f" of=/dev/null bs=1M skip=$((k * q)) count=$q status=none
		  echo "$((($(date +%s%N) - s) / 1000000)):$k" >> "$OUT/readers.txt"; } &
		ddp="$ddp $!"
	done
	# shellcheck disable=SC2086 # a list of pids
	wait $ddp
	t=$((($(date +%s%N) - s) / 1000000))
	if [ "${TRACE:-0}" = 1 ]; then
		echo 0 > "$TRACEFS/tracing_on"
		grep -v '^#' "$TRACEFS/trace" | gzip > "$OUT/trace.$i.$rep.gz"
	fi
	local m1 p1
	m1=$(stat_now) p1=$(proc_ticks "$pid")
	fusermount3 -u "$MNT" 2>/dev/null || umount "$MNT"
	wait "$pid" 2>/dev/null
	echo "$i $t $(sort -n "$OUT/readers.txt" | tr '\n' ' ')" >> "$OUT/runs.txt"
	# config, daemon ticks, machine busy ticks, context switches, interrupts
	echo "$i $((p1 - p0)) $m0 $m1" | awk '{ print $1, $2, $6 - $3, $7 - $4, $8 - $5 }' >> "$OUT/costs.txt"
}

echo "$(machine_line); $N readers, $REPS runs per configuration, SRCWARM=${SRCWARM:-1}; logs in $OUT"
for ((rep = 0; rep < REPS; rep++)); do
	for ((j = 0; j < $#; j++)); do
		i=$(((j + rep) % $#)) # rotate the order every repetition
		cfg=${*:$((i + 1)):1}
		run_one "$i" "$cfg"
	done
done

base=
for ((i = 0; i < $#; i++)); do
	cfg=${*:$((i + 1)):1}
	# shellcheck disable=SC2046 # the times as separate arguments
	m=$(median $(awk -v i="$i" '$1 == i { print $2 }' "$OUT/runs.txt"))
	[ -z "$base" ] && base=$m
	echo "| $cfg | $(awk -v i="$i" '$1 == i { print $2 }' "$OUT/runs.txt" | sort -n | tr '\n' ' ')| $m ms | $(awk -v m="$m" -v b="$base" 'BEGIN { printf "%+.1f%%", (b / m - 1) * 100 }') |"
done
echo "(ms until the last of $N readers was done, sorted; median; speed against the first configuration)"
echo
echo "| configuration | daemon CPU s | machine busy CPU s | context switches | interrupts |"
echo "|---|---:|---:|---:|---:|"
tck=$(getconf CLK_TCK)
for ((i = 0; i < $#; i++)); do
	row="| ${*:$((i + 1)):1} |"
	for col in 2 3 4 5; do
		# shellcheck disable=SC2046 # the values as separate arguments
		v=$(median $(awk -v i="$i" -v c="$col" '$1 == i { print $c }' "$OUT/costs.txt"))
		case $col in 2 | 3) v=$(awk -v v="$v" -v t="$tck" 'BEGIN { printf "%.2f", v / t }') ;; esac
		row="$row $v |"
	done
	echo "$row"
done
echo "(medians over the read of each run: /proc/PID/stat and /proc/stat deltas; $OUT/costs.txt has every run)"
echo "Per-reader times: $OUT/runs.txt (config index, wall ms, then each reader as MS:PART, PART"
echo "the one of the file's $N equal parts it read, 0 first); daemon logs: $OUT/daemon.INDEX.log"
# which part of the file finished last, per configuration: a part that is
# always last points at its data (its tensors, their tiles), not at chance
for ((i = 0; i < $#; i++)); do
	echo "${*:$((i + 1)):1}: runs in which each part finished last: $(awk -v i="$i" '$1 == i { split($NF, a, ":"); n[a[2]]++ } END { for (k in n) printf "part %s %d  ", k, n[k] }' "$OUT/runs.txt")"
done
if [ "${TRACE:-0}" = 1 ]; then
	echo
	python3 "$(dirname "$0")/fuse_trace_summary.py" "$OUT" "$@"
fi
