#!/bin/sh
# Ownership through the mount: -o uid=,gid=,umask= set every entry's owner
# and clear permission bits (passed-through files, decoded files, virtual
# directories alike); no entry shows write bits (writes fail); the options
# come through the mount(8) helper (mount.fuse.wcodecfs) as mount passes
# them; as root, a user of that uid reads the files and another does not.
. "$top_srcdir/tests/mount_lib.sh"
: "${WCODEC:?}"

S=$TMP/src
mkdir -p "$S/sub"
"$PYTHON3" "$top_srcdir/tests/gen_safetensors.py" --profile all --seed 3 "$TMP/m.safetensors"
"$WCODEC" pack -q "$TMP/m.safetensors" "$S/m.wcodec" || fail "pack"
echo '{"a": 1}' > "$S/config.json"
chmod 0664 "$S/config.json" "$S/m.wcodec"
chmod 0775 "$S/sub"

# mode(PATH): octal permission bits; owner(PATH): uid:gid
mode() { stat -c %a "$1"; }
owner() { stat -c %u:%g "$1"; }

# Without options: the source's owners, no write bits (read-only mount).
mount_fs "$S" "$TMP/m1"
[ "$(mode "$TMP/m1/config.json")" = 444 ] || fail "passthrough mode $(mode "$TMP/m1/config.json"), want 444"
[ "$(mode "$TMP/m1/m.safetensors")" = 444 ] || fail "decoded mode $(mode "$TMP/m1/m.safetensors")"
[ "$(mode "$TMP/m1/sub")" = 555 ] || fail "directory mode $(mode "$TMP/m1/sub"), want 555"
[ "$(owner "$TMP/m1/config.json")" = "$(owner "$S/config.json")" ] || fail "owner changed without uid="

# Through the helper, as mount(8) calls it: uid, gid, umask.
sed "s|@bindir@|$(dirname "$WCODECFS")|" "$top_srcdir/src/fuse/mount.fuse.wcodecfs.in" > "$TMP/helper"
mkdir -p "$TMP/m2"
MOUNTS="$MOUNTS $TMP/m2"
sh "$TMP/helper" "$S" "$TMP/m2" -o rw,uid=12345,gid=23456,umask=027 -n ||
	fail "mount.fuse.wcodecfs exited with $?"
grep -qs " $TMP/m2 fuse.wcodecfs" /proc/mounts || fail "the helper did not mount"
for f in config.json m.safetensors sub; do
	[ "$(owner "$TMP/m2/$f")" = 12345:23456 ] || fail "$f: owner $(owner "$TMP/m2/$f")"
done
[ "$(mode "$TMP/m2/config.json")" = 440 ] || fail "passthrough mode $(mode "$TMP/m2/config.json"), want 440"
[ "$(mode "$TMP/m2/m.safetensors")" = 440 ] || fail "decoded mode $(mode "$TMP/m2/m.safetensors")"
[ "$(mode "$TMP/m2/sub")" = 550 ] || fail "directory mode $(mode "$TMP/m2/sub"), want 550"
cmp "$TMP/m.safetensors" "$TMP/m2/m.safetensors" || fail "bytes through the helper's mount"

# A bad value is refused before anything is mounted.
if "$WCODECFS" "$S" "$TMP/m3" -o umask=999 2>"$TMP/err"; then fail "umask=999 accepted"; fi
grep -q "bad umask" "$TMP/err" || fail "no reason for umask=999: $(cat "$TMP/err")"

# The owner and its group read, another user does not (the kernel checks
# the modes shown).
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1; then
	chmod 711 "$TMP" # let other users reach the mount point
	setpriv --reuid=12345 --regid=12345 --clear-groups cat "$TMP/m2/m.safetensors" | cmp - "$TMP/m.safetensors" ||
		fail "uid 12345 cannot read its file"
	setpriv --reuid=34567 --regid=23456 --clear-groups cat "$TMP/m2/sub/../config.json" >/dev/null ||
		fail "group 23456 cannot read a file of mode 440"
	if setpriv --reuid=34567 --regid=34567 --clear-groups cat "$TMP/m2/config.json" >/dev/null 2>&1; then
		fail "another user read a file of mode 440"
	fi
	note "uid 12345 and gid 23456 read their files, uid 34567 is refused"
else
	note "not root or no setpriv: the other users' reads are not tried"
fi
echo "PASS: mount_owner.sh"
