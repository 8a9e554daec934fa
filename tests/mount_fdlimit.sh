#!/bin/sh
# The descriptor limit: files and symlinks hold no descriptor of the daemon
# (they are found again by name), directories and containers hold one until
# a cap that keeps a quarter of the limit free, and are found by name beyond
# it. With the daemon's limit at 256, a walk of 2000 files, 300 directories
# (past the cap of 192), a 24-deep chain and containers looked up past the cap
# answers every lookup, every file reads back byte for byte, the daemon's
# descriptors stay below the limit, and passing the cap is logged once.
# Then a fresh daemon whose descriptors are all taken by open files, below
# the cap, still answers lookups of new directories (found by name). And
# 1,000 containers are listed and read, twice, under the same limit.
. "${top_srcdir:-.}/tests/mount_lib.sh"

# dirs_with_file PARENT PREFIX N TEXT: directories PARENT/PREFIX0..N-1, each
# holding a file x that reads "TEXT i".
dirs_with_file() {
	mkdir -p "$1"
	i=0
	while [ $i -lt "$3" ]; do
		mkdir "$1/$2$i"
		printf '%s %d\n' "$4" $i > "$1/$2$i/x"
		i=$((i + 1))
	done
}

# start_limited LOG: the daemon on $S at $M, its descriptor limit 256 (the
# hard limit too, so it cannot raise it), logging to LOG.
start_limited() {
	( ulimit -n 256 && ulimit -Hn 256 && exec $drop "$WCODECFS" "$S" "$M" -f -o timeout=3600 ) 2> "$1" &
	limited=$!
	wait_mounted "$M" "$1"
}

S=$TMP/src
O=$TMP/orig
mkdir -p "$S/files" "$O"
i=0
while [ $i -lt 2000 ]; do
	printf 'file %d\n' $i > "$S/files/f$i"
	i=$((i + 1))
done
dirs_with_file "$S/dirs" d 300 "in directory"
deep=$S/deep
i=0
while [ $i -lt 24 ]; do
	deep=$deep/n$i
	i=$((i + 1))
done
mkdir -p "$deep"
printf 'at the bottom\n' > "$deep/leaf"
ln -s leaf "$deep/link"
gen "$O/m.safetensors" --profile weights --params 20000 --seed 7
pack "$O/m.safetensors" "$deep/m.wcodec" 16384
pack "$O/m.safetensors" "$S/dirs/d299/m.wcodec" 16384

M=$TMP/mnt
mkdir -p "$M"
MOUNTS="$MOUNTS $M"
# As root, the daemon runs without CAP_SYS_RESOURCE, with which it would
# raise the hard limit as well.
drop=
if [ "$(id -u)" = 0 ] && command -v setpriv > /dev/null 2>&1 &&
	setpriv --bounding-set=-sys_resource true 2> /dev/null; then
	drop="setpriv --bounding-set=-sys_resource"
fi
start_limited "$TMP/log"
pid=$(daemon_pid_of "$M") || fail "no daemon pid"
limit=$(awk '/^Max open files/ { print $4 }' "/proc/$pid/limits")
if [ "$limit" != 256 ]; then
	echo "SKIP: the daemon's descriptor limit is $limit, not 256 (privileged, and no setpriv)"
	exit 77
fi

# Every lookup of the walk answered: files, then directories past the cap,
# then what lies under them.
"$PYTHON3" - "$M" <<'PY' || fail "walk"
import os, sys
m = sys.argv[1]
for sub in ("files", "dirs"):
    for name in sorted(os.listdir(os.path.join(m, sub))):
        os.lstat(os.path.join(m, sub, name))
for dirpath, dirnames, filenames in os.walk(m):
    for f in filenames:
        os.lstat(os.path.join(dirpath, f))
PY
fds=$(ls "/proc/$pid/fd" | wc -l)
note "daemon descriptors after the walk: $fds"
[ "$fds" -lt 256 ] || fail "the daemon holds $fds descriptors"

# Every file reads back; the containers (looked up past the cap) show the
# files they were packed from.
(cd "$S" && find . -type f ! -name '*.wcodec' -exec sha256sum {} + | sort) > "$TMP/want"
(cd "$M" && find . -type f ! -name '*.safetensors' -exec sha256sum {} + | sort) > "$TMP/got"
cmp -s "$TMP/want" "$TMP/got" || { diff "$TMP/want" "$TMP/got" | head; fail "the trees differ"; }
[ "$(wc -l < "$TMP/got")" -eq 2301 ] || fail "$(wc -l < "$TMP/got") files, expected 2301"
rel=${deep#"$S"/}
cmp "$O/m.safetensors" "$M/$rel/m.safetensors" || fail "the deep container differs"
cmp "$O/m.safetensors" "$M/dirs/d299/m.safetensors" || fail "d299's container differs"
[ "$(readlink "$M/$rel/link")" = leaf ] || fail "the deep symlink"
[ "$(cat "$M/$rel/link")" = "at the bottom" ] || fail "read through the deep symlink"
n=$(grep -c "found again by name" "$TMP/log")
[ "$n" -eq 1 ] || fail "passing the cap was logged $n times: $(cat "$TMP/log")"
grep -q "limit 256" "$TMP/log" || fail "the log does not give the limit: $(cat "$TMP/log")"
grep -q "Too many open files" "$TMP/log" && fail "descriptors ran out: $(cat "$TMP/log")"
unmount_fs "$M"

# Below the cap, open files can still take every descriptor: a fresh daemon
# whose reader holds passed-through files open until the daemon has none
# left. Directories looked up then have no descriptor to keep: they are
# found again by name, and every lookup answers; once the files are closed
# their contents read back.
dirs_with_file "$S/late" l 40 late
start_limited "$TMP/log2"
"$PYTHON3" - "$M" <<'PY' || fail "lookups with the descriptors taken: $(cat "$TMP/log2")"
import errno, os, sys
m = sys.argv[1]
os.lstat(os.path.join(m, "late"))
held = []
try:
    for i in range(2000):
        held.append(open(os.path.join(m, "files", "f%d" % i), "rb"))
except OSError as e:
    if e.errno not in (errno.EMFILE, errno.ENFILE):
        raise
if len(held) >= 2000:
    sys.exit("the daemon never ran out of descriptors")
for i in range(40):
    st = os.lstat(os.path.join(m, "late", "l%d" % i))
    assert (st.st_mode & 0o170000) == 0o040000, i
for f in held:
    f.close()
for i in range(40):
    with open(os.path.join(m, "late", "l%d" % i, "x"), "rb") as f:
        assert f.read() == b"late %d\n" % i, i
PY
grep -q "no descriptor for directory" "$TMP/log2" ||
	fail "running out was not logged: $(cat "$TMP/log2")"
unmount_fs "$M"

# 1,000 containers under the same limit: a lookup keeps no descriptor of a
# container, and open containers keep theirs only while the budget allows
# (the least recently used are closed and opened again when read): ls -l
# shows every one, each reads back whole, one after another and again, and
# the daemon exits 0 at unmount.
mkdir "$S/many"
i=0
while [ $i -lt 1000 ]; do
	ln "$deep/m.wcodec" "$S/many/c$i.wcodec" 2> /dev/null || cp "$deep/m.wcodec" "$S/many/c$i.wcodec"
	i=$((i + 1))
done
start_limited "$TMP/log3"
pid=$(daemon_pid_of "$M") || fail "no daemon pid"
[ "$(ls -l "$M/many" 2> "$TMP/err" | grep -c '^-')" = 1000 ] || fail "ls -l of 1000 containers: $(head -3 "$TMP/err")"
[ -s "$TMP/err" ] && fail "ls -l: $(head -3 "$TMP/err")"
"$PYTHON3" - "$M/many" "$O/m.safetensors" <<'PY' || fail "reading 1000 containers: $(tail -3 "$TMP/log3")"
import sys
want = open(sys.argv[2], "rb").read()
for rnd in range(2):
    for i in range(1000):
        with open("%s/c%d.safetensors" % (sys.argv[1], i), "rb") as f:
            assert f.read() == want, (rnd, i)
PY
fds=$(ls "/proc/$pid/fd" | wc -l)
note "daemon descriptors after reading 1000 containers twice: $fds"
[ "$fds" -lt 256 ] || fail "the daemon holds $fds descriptors"
unmount_fs "$M"
wait "$limited" || fail "the daemon exited with $? at unmount"
exit 0
