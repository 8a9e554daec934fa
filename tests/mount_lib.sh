# mount_lib.sh - shared helpers of the tests/mount_*.sh tests (sourced).
#
# Skips (exit 77) only when FUSE cannot be used here: no wcodecfs (built
# without libfuse3), no usable /dev/fuse or no fusermount3. Every mount made with mount_fs is unmounted by the EXIT
# trap, whatever happens; daemons still alive then are killed by their pid.

set -u

fail() { echo "FAIL: $*" >&2; exit 1; }
note() { echo "# $*"; }

: "${WCODECFS:?WCODECFS must name the built wcodecfs}"
: "${top_srcdir:?}"
PYTHON3=${PYTHON3:-/usr/bin/python3}

[ -x "$WCODECFS" ] || { echo "SKIP: wcodecfs was not built (configured without libfuse3)"; exit 77; }
command -v fusermount3 >/dev/null 2>&1 || { echo "SKIP: fusermount3 not found"; exit 77; }
if ! [ -c /dev/fuse ] || ! ( exec 3<>/dev/fuse ) 2>/dev/null; then
	echo "SKIP: /dev/fuse is not usable here"
	exit 77
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/wcfs-test.XXXXXX") || fail "mktemp"
MOUNTS=
cleanup() {
	for m in $MOUNTS; do
		if grep -qs " $m fuse" /proc/mounts; then
			fusermount3 -u "$m" 2>/dev/null || fusermount3 -u -z "$m" 2>/dev/null
		fi
	done
	for p in $(daemon_pids); do kill "$p" 2>/dev/null; done
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# Pids of the wcodecfs daemons of this test (their argv names our $TMP).
daemon_pids() {
	for d in /proc/[0-9]*; do
		[ -r "$d/cmdline" ] || continue
		cmd=$(tr '\0' ' ' < "$d/cmdline" 2>/dev/null) || continue
		case $cmd in
		*wcodecfs*\ "$TMP"/*) echo "${d#/proc/}" ;;
		esac
	done
}

# mount_fs SRC MNT [ARGS...]: mount, fail the test if wcodecfs fails. The
# daemon returns only once the mount is ready, so no polling is needed.
mount_fs() {
	src=$1 mnt=$2
	shift 2
	mkdir -p "$mnt"
	MOUNTS="$MOUNTS $mnt"
	"$WCODECFS" "$src" "$mnt" "$@" || fail "wcodecfs $src $mnt $* exited with $?"
	grep -qs " $mnt fuse" /proc/mounts || fail "$mnt is not mounted after wcodecfs returned"
}

# wait_mounted MNT [LOG]: wait (up to 5 s) until a daemon started in the
# foreground has mounted MNT and its root answers (the kernel holds requests
# until INIT); on failure, show LOG.
wait_mounted() {
	i=0
	until grep -qs " $1 fuse" /proc/mounts; do
		i=$((i + 1))
		[ $i -lt 100 ] || fail "$1 not mounted after 5 s${2:+: $(cat "$2")}"
		sleep 0.05
	done
	ls "$1" > /dev/null || fail "ls $1"
}

# The pid of the daemon serving MNT.
daemon_pid_of() {
	for p in $(daemon_pids); do
		case $(tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null) in
		*" $1 "* | *" $1") echo "$p"; return 0 ;;
		esac
	done
	return 1
}

# unmount MNT: fusermount3 -u, then wait (up to 5 s) for its daemon to exit.
unmount_fs() {
	pid=$(daemon_pid_of "$1") || pid=
	fusermount3 -u "$1" || fail "fusermount3 -u $1 failed"
	wait_gone "$pid" "$1"
}

wait_gone() {
	[ -n "$1" ] || return 0
	i=0
	while kill -0 "$1" 2>/dev/null; do
		i=$((i + 1))
		if [ $i -ge 50 ]; then
			daemon_state "$1" "$2"
			fail "daemon $1 of $2 still running 5 s after unmount"
		fi
		sleep 0.1
	done
}

# What a daemon that will not end is doing: its signal masks, pending
# signals, and each thread's name, state and kernel wait channel.
daemon_state() {
	grep -E '^(SigPnd|ShdPnd|SigBlk|SigCgt)' "/proc/$1/status" 2>/dev/null | sed 's/^/# /'
	for t in /proc/"$1"/task/*; do
		echo "# thread ${t##*/} $(cat "$t/comm" 2>/dev/null): state $(cut -d' ' -f3 "$t/stat" 2>/dev/null)," \
			"wchan $(cat "$t/wchan" 2>/dev/null), $(grep -E '^(SigPnd|SigBlk)' "$t/status" 2>/dev/null | tr '\n\t' '  ')"
	done
	grep -qs " $2 fuse" /proc/mounts && echo "# $2 still mounted"
	return 0
}

sha() { sha256sum < "$1" | cut -d' ' -f1; }

# pack IN OUT [TILE_BYTES]: IN.safetensors -> OUT.wcodec with the wcodec CLI.
pack() {
	: "${WCODEC:?WCODEC must name the built wcodec}"
	if [ $# -ge 3 ]; then
		"$WCODEC" pack -q --tile-size "$3" "$1" "$2" >/dev/null || fail "wcodec pack $1 failed"
	else
		"$WCODEC" pack -q "$1" "$2" >/dev/null || fail "wcodec pack $1 failed"
	fi
}

# gen OUT ARGS...: a deterministic safetensors file (tests/gen_safetensors.py).
gen() {
	out=$1
	shift
	"$PYTHON3" "$top_srcdir/tests/gen_safetensors.py" "$out" "$@" || fail "gen_safetensors $*"
}

check() { "$PYTHON3" "$top_srcdir/tests/mount_check.py" "$@"; }

# wait_bounded PID MNT SECS WHAT: the exit status of background process PID;
# if it still runs after SECS seconds, the daemon serving MNT is killed (which
# fails the requests it left unanswered, so PID ends: a process waiting on
# FUSE cannot always be killed itself) and the test fails: WHAT hung.
wait_bounded() {
	i=0
	while kill -0 "$1" 2>/dev/null; do
		i=$((i + 1))
		if [ $i -gt $(($3 * 10)) ]; then
			kill -9 $(daemon_pid_of "$2") 2>/dev/null
			wait "$1" 2>/dev/null
			fail "$4 hung: the daemon was killed after $3 s"
		fi
		sleep 0.1
	done
	wait "$1"
}

# check_peak_rss PID LIMIT_MIB WHAT: the daemon PID's peak RSS (VmHWM) is
# at most LIMIT_MIB, noted; not checked in a sanitizer build, whose shadow
# memory makes it no measure of ours.
check_peak_rss() {
	hwm=$(awk '/^VmHWM:/ { print $2 }' "/proc/$1/status")
	note "daemon peak RSS: $((hwm / 1024)) MiB"
	if ldd "${top_builddir:-.}/.libs/libwcodec.so.0" 2>/dev/null | grep -q libasan; then
		note "a sanitizer build: its shadow memory makes the peak RSS no measure of ours; not checked"
	else
		[ "$hwm" -le $(($2 * 1024)) ] || fail "peak RSS $((hwm / 1024)) MiB exceeds $3"
	fi
}
