#!/bin/sh
# The daemon's life: readiness without -f, clear non-zero exits for a bad
# SOURCE, MOUNTPOINT or option, unmount on SIGTERM and SIGINT, counters on
# SIGUSR1, --help, the warning for a cache_size above half the memory, a
# mountpoint inside SOURCE or on it, a mount made as /etc/fstab makes it.
. "${top_srcdir:-.}/tests/mount_lib.sh"

S=$TMP/src
M=$TMP/mnt
mkdir -p "$S" "$M"
echo hello > "$S/hello.txt"

# expect_fail STATUS PATTERN ARGS...: wcodecfs ARGS exits STATUS, says PATTERN.
expect_fail() {
	want=$1 pat=$2
	shift 2
	out=$("$WCODECFS" "$@" 2>&1)
	st=$?
	[ "$st" = "$want" ] || fail "wcodecfs $*: exit $st, expected $want ($out)"
	case $out in
	*$pat*) ;;
	*) fail "wcodecfs $*: message '$out' does not mention '$pat'" ;;
	esac
	grep -qs " $M fuse" /proc/mounts && fail "wcodecfs $* left a mount"
	return 0
}
expect_fail 2 "$TMP/missing" "$TMP/missing" "$M"
expect_fail 2 "Not a directory" "$S/hello.txt" "$M"
expect_fail 3 "$TMP/nomnt" "$S" "$TMP/nomnt"
expect_fail 3 "$S/hello.txt" "$S" "$S/hello.txt"
expect_fail 1 "SOURCE and MOUNTPOINT" "$S"
expect_fail 1 "cache_size" "$S" "$M" -o cache_size=lots
expect_fail 1 "backend" "$S" "$M" -o backend=abacus
expect_fail 1 "threads" "$S" "$M" -o threads=0
expect_fail 1 "unknown option" "$S" "$M" --frobnicate
# A mount option libfuse rejects: the failure still comes back as an exit
# status (usage), and it is the first and only thing said: nothing starts
# (no decode backend) before the options are known to be good.
out=$("$WCODECFS" "$S" "$M" -o no_such_mount_option 2>&1) && fail "unknown mount option accepted"
[ $? = 1 ] || fail "a bad mount option: exit status $?, expected 1 ($out)"
grep -qs " $M fuse" /proc/mounts && fail "a bad mount option left a mount"
case $(printf '%s\n' "$out" | head -1) in
*no_such_mount_option*) ;;
*) fail "the first line does not name the bad option: $out" ;;
esac
case $out in *"decode backend"*) fail "the backend started before the options were checked: $out" ;; esac

"$WCODECFS" --help | grep -q "cache_size=SIZE" || fail "--help does not document cache_size"
"$WCODECFS" --version | grep -q "wcodecfs" || fail "--version"

mount_fs "$S" "$M"
[ "$(cat "$M/hello.txt")" = hello ] || fail "not serving right after wcodecfs returned"
# The connection's async request limit (max_background, default 64), where
# the fuse control filesystem shows it; the kernel lowers it for non-root
# mounts above max_user_bgreq.
dev=$(stat -c %d "$M") # st_dev encoding of a major-0 device: the minor is split
conn=/sys/fs/fuse/connections/$(((dev & 0xff) | ((dev >> 12) & 0xfff00)))
if [ "$(id -u)" = 0 ] && [ -r "$conn/max_background" ]; then
	[ "$(cat "$conn/max_background")" = 64 ] ||
		fail "max_background is $(cat "$conn/max_background"), expected 64"
fi

# SIGTERM, SIGINT and SIGHUP unmount cleanly and end the daemon, also one
# started with SIGINT and SIGHUP ignored, as a shell's & and nohup leave
# them (a daemon starts from the default dispositions).
for sig in TERM INT HUP; do
	pid=$(daemon_pid_of "$M") || fail "no daemon pid for $M"
	kill -s $sig "$pid"
	wait_gone "$pid" "$M"
	grep -qs " $M fuse" /proc/mounts && fail "still mounted after SIG$sig"
	[ "$sig" = HUP ] && break
	(trap '' INT HUP && exec "$WCODECFS" "$S" "$M") || fail "wcodecfs with SIGINT and SIGHUP ignored exited with $?"
	grep -qs " $M fuse" /proc/mounts || fail "$M is not mounted after wcodecfs returned"
done

# Foreground mode: -f stays attached and logs to stderr, under its own name.
# SIGUSR1 logs the counters and the daemon serves on; unmount logs them too.
gen "$TMP/w.safetensors" --profile weights --dtype BF16 --params 600000 --seed 5
pack "$TMP/w.safetensors" "$S/w.wcodec" 65536
# SIGTERM with files still open (the kernel sends no RELEASE for them):
# the daemon frees their handles and exits 0 (under the sanitizer build,
# LeakSanitizer would fail the exit status otherwise).
"$WCODECFS" "$S" "$M" -f 2> "$TMP/open.log" &
fg=$!
wait_mounted "$M" "$TMP/open.log"
exec 3< "$M/hello.txt" 4< "$M/w.safetensors"
head -c 1000 <&4 > /dev/null
kill -TERM $fg
wait $fg || fail "the daemon with files open exited with $?: $(cat "$TMP/open.log")"
exec 3<&- 4<&-
grep -qs " $M fuse" /proc/mounts && fusermount3 -u -z "$M"

# A container whose shown name would pass NAME_MAX (255 bytes) is left out
# of listings, with a warning that names it.
long=$(printf 'L%.0s' $(seq 245))
cp "$S/w.wcodec" "$S/$long.wcodec"
"$WCODECFS" "$S" "$M" -f 2> "$TMP/fg.log" &
fg=$!
MOUNTS="$MOUNTS $M"
wait_mounted "$M" "$TMP/fg.log"
[ "$(cat "$M/hello.txt")" = hello ] || fail "-f mount does not serve"
ls "$M" | grep -q "^L" && fail "a name longer than NAME_MAX listed"
grep -q "warning: $long.wcodec: not shown: its name as .safetensors would be longer than 255" \
	"$TMP/fg.log" || fail "no warning for the long name: $(cat "$TMP/fg.log")"
rm "$S/$long.wcodec"
cmp -s "$M/w.safetensors" "$TMP/w.safetensors" || fail "-f mount serves wrong bytes"
tiles=$("$WCODEC" info --json "$S/w.wcodec" |
	"$PYTHON3" -c 'import json, sys; print(json.load(sys.stdin)["ntiles"])') || fail "wcodec info --json"
[ "$tiles" -gt 10 ] || fail "only $tiles tiles: the test needs several"
grep -q "SIGUSR1" "$TMP/fg.log" && fail "counters logged before SIGUSR1"
kill -s USR1 $fg
i=0
until grep -q "SIGUSR1: cache: " "$TMP/fg.log"; do
	i=$((i + 1))
	[ $i -lt 100 ] || fail "no counters 5 s after SIGUSR1: $(cat "$TMP/fg.log")"
	sleep 0.05
done
kill -0 $fg 2>/dev/null || fail "SIGUSR1 ended the daemon"
# Every tile was read once, from a fresh cache: decoded once each, none failed.
grep -q "SIGUSR1: cache: .* $tiles decodes (0 failed)" "$TMP/fg.log" ||
	fail "SIGUSR1 counters do not show $tiles decodes: $(grep SIGUSR1 "$TMP/fg.log")"
grep -q "SIGUSR1: reads: [1-9][0-9]* of .*; cache [0-9.]* of [0-9]* MiB; daemon RSS [0-9.]* MiB" \
	"$TMP/fg.log" || fail "SIGUSR1 read counters: $(grep SIGUSR1 "$TMP/fg.log")"
[ "$(cat "$M/hello.txt")" = hello ] || fail "not serving after SIGUSR1"
fusermount3 -u "$M" || fail "fusermount3 -u (foreground)"
wait $fg || fail "foreground daemon exited with $?"
grep -q "^wcodecfs: info: mounted" "$TMP/fg.log" || fail "foreground log: $(cat "$TMP/fg.log")"
# The default cache_size (at most a quarter of the memory the daemon may
# use) draws no warning; one above half of it does, naming both sizes.
grep -q "more than half" "$TMP/fg.log" && fail "the default cache_size was warned about: $(cat "$TMP/fg.log")"
"$WCODECFS" "$S" "$M" -f -o cache_size=64T 2> "$TMP/big.log" &
big=$!
wait_mounted "$M" "$TMP/big.log"
[ "$(cat "$M/hello.txt")" = hello ] || fail "cache_size=64T mount does not serve"
fusermount3 -u "$M" || fail "fusermount3 -u (cache_size=64T)"
wait $big || fail "cache_size=64T daemon exited with $?"
grep -q "warning: cache_size=67108864 MiB is more than half of the [0-9]* MiB of memory this process may use" \
	"$TMP/big.log" || fail "no warning for cache_size=64T: $(cat "$TMP/big.log")"
grep -q "^wcodecfs: info: unmount: cache: .* $tiles decodes (0 failed)" "$TMP/fg.log" ||
	fail "no counters at unmount: $(cat "$TMP/fg.log")"
# A second wcodecfs on a mountpoint that has one is refused (it would hide
# the first, and one unmount would remove only the top one); the first
# keeps serving.
mount_fs "$S" "$M"
out=$("$WCODECFS" "$S" "$M" 2>&1)
st=$?
[ "$st" = 3 ] || fail "a second mount on $M: exit $st, expected 3 ($out)"
case $out in
*"already has a wcodecfs mount"*"fusermount3 -u"*) ;;
*) fail "second mount: $out" ;;
esac
[ "$(grep -c " $M fuse" /proc/mounts)" = 1 ] || fail "two mounts stacked on $M"
[ "$(cat "$M/hello.txt")" = hello ] || fail "the first mount stopped serving"
fusermount3 -u "$M" || fail "fusermount3 -u after a refused second mount"

# A mountpoint inside SOURCE: its entry would lead back into the mount (a
# loop for find, and the daemon's own handle on it made fusermount3 -u fail
# with EBUSY), so the mount hides it. Mounting over SOURCE itself shows the
# decoded view in place.
mkdir -p "$S/inner"
mount_fs "$S" "$S/inner"
ls -a "$S/inner" | grep -qx inner && fail "the mountpoint shows inside its own mount"
[ -e "$S/inner/inner" ] && fail "the mountpoint can be looked up inside its own mount"
[ "$(cat "$S/inner/hello.txt")" = hello ] || fail "mount inside SOURCE does not serve"
cmp -s "$S/inner/w.safetensors" "$TMP/w.safetensors" || fail "mount inside SOURCE serves wrong bytes"
find "$S/inner" > "$TMP/find.txt" 2>&1 || fail "find over a mount inside SOURCE: $(cat "$TMP/find.txt")"
fusermount3 -u "$S/inner" || fail "fusermount3 -u of a mountpoint inside SOURCE"
rmdir "$S/inner"
mkdir -p "$TMP/inplace"
cp "$S/w.wcodec" "$TMP/inplace/"
mount_fs "$TMP/inplace" "$TMP/inplace"
cmp -s "$TMP/inplace/w.safetensors" "$TMP/w.safetensors" || fail "mount over SOURCE serves wrong bytes"
fusermount3 -u "$TMP/inplace" || fail "fusermount3 -u of a mount over SOURCE"
[ -f "$TMP/inplace/w.wcodec" ] || fail "SOURCE changed by a mount over it"

# As /etc/fstab mounts it: mount(8) runs mount.fuse, which runs wcodecfs
# with the options, fstab's own ones among them. The program is named in the
# "PROGRAM#SOURCE" form, as it is not installed: some mount(8) versions do
# not pass the caller's PATH on to the helper. Root only.
if [ "$(id -u)" = 0 ] && command -v mount.fuse3 >/dev/null 2>&1; then
	mount -t fuse "$WCODECFS#$S" "$M" -o ro,nofail,_netdev,cache_size=64M 2> "$TMP/fstab.log" ||
		fail "mount -t fuse.wcodecfs: $(cat "$TMP/fstab.log")"
	MOUNTS="$MOUNTS $M"
	grep -qs " $M fuse.wcodecfs ro," /proc/mounts || fail "not mounted read-only as fuse.wcodecfs: $(grep " $M " /proc/mounts)"
	cmp -s "$M/w.safetensors" "$TMP/w.safetensors" || fail "fstab mount serves wrong bytes"
	pid=$(daemon_pid_of "$M") || fail "no daemon for the fstab mount"
	umount "$M" || fail "umount $M"
	wait_gone "$pid" "$M"
else
	note "not root or no mount.fuse3: the fstab-style mount is not tried"
fi
echo "PASS"
