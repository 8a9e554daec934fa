#!/bin/sh
# Running as a service: the systemd unit template passes systemd-analyze
# verify (where it exists); in the foreground wcodecfs tells systemd when
# the mount is ready and when it stops (sd_notify, Type=notify; in a build
# with libsystemd); -o log=FILE keeps a detached daemon's messages, its
# counters on SIGUSR1 among them, in FILE.
. "$top_srcdir/tests/mount_lib.sh"

S=$TMP/src
mkdir -p "$S"
echo hello > "$S/hello.txt"

# The unit, as installed, with this build's wcodecfs.
if command -v systemd-analyze >/dev/null 2>&1; then
	sed "s|@bindir@|$(cd "$(dirname "$WCODECFS")" && pwd)|" "$top_srcdir/contrib/systemd/wcodecfs@.service.in" \
		> "$TMP/wcodecfs@mnt-test.service"
	systemd-analyze verify --man=no "$TMP/wcodecfs@mnt-test.service" 2> "$TMP/verify.err" ||
		fail "systemd-analyze verify: $(cat "$TMP/verify.err")"
	note "unit verified"
else
	note "no systemd-analyze: the unit is not verified"
fi

# Readiness: a datagram socket standing in for systemd's.
if "$WCODECFS" --version | grep -q "sd_notify"; then
	"$PYTHON3" - "$TMP/notify" "$TMP/states" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
s.settimeout(20)
with open(sys.argv[2], "w") as out:
    try:
        while True:
            msg = s.recv(4096).decode()
            out.write(msg.replace("\n", " ") + "\n")
            out.flush()
            if "STOPPING=1" in msg:
                break
    except socket.timeout:
        pass
PY
	listener=$!
	i=0
	until [ -S "$TMP/notify" ]; do i=$((i + 1)); [ $i -lt 100 ] || fail "no notify socket"; sleep 0.05; done
	mkdir -p "$TMP/m1"
	MOUNTS="$MOUNTS $TMP/m1"
	NOTIFY_SOCKET=$TMP/notify "$WCODECFS" -f "$S" "$TMP/m1" 2> "$TMP/fg.log" &
	fg=$!
	wait_mounted "$TMP/m1" "$TMP/fg.log"
	i=0
	until grep -q "READY=1" "$TMP/states" 2>/dev/null; do i=$((i + 1)); [ $i -lt 100 ] || fail "no READY=1"; sleep 0.05; done
	grep -q "STATUS=serving $S on $TMP/m1" "$TMP/states" || fail "no status line: $(cat "$TMP/states")"
	kill -TERM $fg
	wait $fg || fail "the daemon exited with $?"
	wait $listener
	grep -q "STOPPING=1" "$TMP/states" || fail "no STOPPING=1: $(cat "$TMP/states")"
	note "READY=1 once mounted, STOPPING=1 when stopped"
else
	note "built without libsystemd: readiness not tried"
fi

# -o log=FILE: the detached daemon's messages, with time and pid.
mount_fs "$S" "$TMP/m2" -o "log=$TMP/daemon.log"
cat "$TMP/m2/hello.txt" > /dev/null
pid=$(daemon_pid_of "$TMP/m2") || fail "no daemon for m2"
kill -USR1 "$pid"
i=0
until grep -q "SIGUSR1" "$TMP/daemon.log" 2>/dev/null; do i=$((i + 1)); [ $i -lt 100 ] || fail "no counters in the log"; sleep 0.05; done
fusermount3 -u "$TMP/m2" || fail "unmount m2"
i=0
until grep -q "unmounting" "$TMP/daemon.log"; do i=$((i + 1)); [ $i -lt 100 ] || fail "no unmount line: $(cat "$TMP/daemon.log")"; sleep 0.05; done
grep -Eq "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z wcodecfs\[$pid\]: info: mounted $S on $TMP/m2" "$TMP/daemon.log" ||
	fail "no timed mount line: $(cat "$TMP/daemon.log")"
mkdir -p "$TMP/m3"
if "$WCODECFS" "$S" "$TMP/m3" -o log=/nonexistent/dir/x.log 2> "$TMP/err"; then fail "an unwritable log= accepted"; fi
grep -q "log=/nonexistent/dir/x.log" "$TMP/err" || fail "no reason for the unwritable log: $(cat "$TMP/err")"

# -o stats=FILE (relative: resolved before the daemon leaves the directory):
# the counters as JSON on SIGUSR1, and again at unmount.
(cd "$TMP" && mount_fs "$S" "$TMP/m4" -o stats=stats.json) || exit 1
cat "$TMP/m4/hello.txt" > /dev/null
pid=$(daemon_pid_of "$TMP/m4") || fail "no daemon for m4"
kill -USR1 "$pid"
i=0
until [ -s "$TMP/stats.json" ]; do i=$((i + 1)); [ $i -lt 100 ] || fail "no stats file"; sleep 0.05; done
"$PYTHON3" - "$TMP/stats.json" "$S" SIGUSR1 <<'PY' || fail "stats file: $(cat "$TMP/stats.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["when"] == sys.argv[3] and d["source"] == sys.argv[2], d
for k in ("reads", "read_bytes", "cache_bytes", "cache_size", "rss_bytes", "peak_rss_bytes"):
    assert isinstance(d[k], int) and d[k] >= 0, k
assert d["peak_rss_bytes"] >= d["rss_bytes"] > 0
assert {"hits", "misses", "decodes", "decode_errors", "evictions"} <= set(d["cache"])
PY
fusermount3 -u "$TMP/m4" || fail "unmount m4"
i=0
until grep -q '"when": "unmount"' "$TMP/stats.json"; do i=$((i + 1)); [ $i -lt 100 ] || fail "no stats at unmount"; sleep 0.05; done
ls -A "$TMP" | grep -q "stats.json.tmp" && fail "a temporary stats file left"
note "stats=FILE: JSON counters on SIGUSR1 and at unmount"

# -o idle_unmount=SECONDS: not while a file is open, then once idle; the
# daemon exits 0 as on SIGTERM.
mkdir -p "$TMP/m5"
MOUNTS="$MOUNTS $TMP/m5"
"$WCODECFS" -f "$S" "$TMP/m5" -o idle_unmount=1 2> "$TMP/idle.log" &
fg=$!
wait_mounted "$TMP/m5" "$TMP/idle.log"
exec 3< "$TMP/m5/hello.txt"
sleep 3
grep -qs " $TMP/m5 fuse" /proc/mounts || fail "idle_unmount unmounted with a file open"
exec 3<&-
i=0
while grep -qs " $TMP/m5 fuse" /proc/mounts; do i=$((i + 1)); [ $i -lt 100 ] || fail "not unmounted when idle"; sleep 0.1; done
wait $fg || fail "the daemon exited with $? after idle_unmount"
grep -q "idle for 1 s" "$TMP/idle.log" || fail "no idle line: $(cat "$TMP/idle.log")"
if "$WCODECFS" "$S" "$TMP/m5" -o idle_unmount=-3 2> "$TMP/err"; then fail "idle_unmount=-3 accepted"; fi
grep -q "bad idle_unmount" "$TMP/err" || fail "no reason for a bad idle_unmount: $(cat "$TMP/err")"
note "idle_unmount: unmounted once idle, not before"
echo "PASS: mount_service.sh"
