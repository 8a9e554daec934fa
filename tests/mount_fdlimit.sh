#!/bin/sh
# The descriptor limit: every inode the kernel holds keeps a descriptor of its
# source entry. With the daemon's limit at 256 (a quarter, 64, kept for open
# files), a walk of 400 files fails with EMFILE past about 190 lookups; the
# reason is logged once; a file looked up before still opens and reads right,
# and the daemon keeps serving.
. "${top_srcdir:-.}/tests/mount_lib.sh"

S=$TMP/src
mkdir -p "$S/d"
i=0
while [ $i -lt 400 ]; do
	printf 'file %d\n' $i > "$S/d/f$i"
	i=$((i + 1))
done

M=$TMP/mnt
mkdir -p "$M"
MOUNTS="$MOUNTS $M"
# The hard limit too, so the daemon cannot raise it; as root, also without
# CAP_SYS_RESOURCE, with which it would raise the hard limit as well.
drop=
if [ "$(id -u)" = 0 ] && command -v setpriv > /dev/null 2>&1 &&
	setpriv --bounding-set=-sys_resource true 2> /dev/null; then
	drop="setpriv --bounding-set=-sys_resource"
fi
( ulimit -n 256 && ulimit -Hn 256 && exec $drop "$WCODECFS" "$S" "$M" -f -o timeout=3600 ) 2> "$TMP/log" &
wait_mounted "$M" "$TMP/log"
pid=$(daemon_pid_of "$M") || fail "no daemon pid"
limit=$(awk '/^Max open files/ { print $4 }' "/proc/$pid/limits")
if [ "$limit" != 256 ]; then
	echo "SKIP: the daemon's descriptor limit is $limit, not 256 (privileged, and no setpriv)"
	exit 77
fi

cat "$M/d/f0" > "$TMP/first" || fail "first lookup"
ok=0 refused=0 i=0
while [ $i -lt 400 ]; do
	if stat "$M/d/f$i" > /dev/null 2> "$TMP/err"; then
		ok=$((ok + 1))
	else
		grep -q "Too many open files" "$TMP/err" || fail "f$i: $(cat "$TMP/err")"
		refused=$((refused + 1))
	fi
	i=$((i + 1))
done
note "$ok lookups answered, $refused refused"
[ $refused -gt 0 ] || fail "no lookup was refused at a limit of 256 descriptors"
[ $ok -ge 150 ] || fail "only $ok lookups answered"
# Opening needs a descriptor of the reserve: f0 (held since the start) reads.
cmp "$TMP/first" "$M/d/f0" || fail "f0 does not read back after the refusals"
[ "$(cat "$M/d/f1")" = "file 1" ] || fail "f1 does not read right"
n=$(grep -c "Too many open files" "$TMP/log")
[ "$n" -eq 1 ] || fail "the reason was logged $n times: $(cat "$TMP/log")"
grep -q "limit is 256" "$TMP/log" || fail "the log does not give the limit: $(cat "$TMP/log")"
unmount_fs "$M"
exit 0
