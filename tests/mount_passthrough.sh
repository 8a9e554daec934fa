#!/bin/sh
# Passthrough: files, directories, symlinks and a sharded model layout are
# mirrored unchanged; X.wcodec is hidden under its own name; a real file
# beats a provider's virtual name; files replaced, renamed or linked in the
# source while mounted read right; every write fails with EROFS, both on the
# default read-only mount and with -o rw (then the daemon itself refuses).
. "${top_srcdir:-.}/tests/mount_lib.sh"

S=$TMP/src
mkdir -p "$S/sub/deeper" "$S/empty"
printf '{"architectures": ["LlamaForCausalLM"]}\n' > "$S/config.json"
printf 'tokenizer\n' > "$S/tokenizer.json"
head -c 1000003 /dev/urandom > "$S/sub/blob.bin"
head -c 5000 /dev/urandom > "$S/sub/deeper/small.bin"
: > "$S/zero.bin"
ln -s config.json "$S/link.json"
ln -s sub/deeper "$S/dirlink"
ln -s /nonexistent/target "$S/dangling"
printf '{"metadata": {"total_size": 16}, "weight_map": {"a": "model-00001-of-00002.safetensors"}}\n' \
	> "$S/model.safetensors.index.json"
head -c 777 /dev/urandom > "$S/model-00001-of-00002.safetensors"
# Name clash: the real file wins and its .wcodec stays hidden.
printf 'real bytes\n' > "$S/clash.safetensors"
printf 'not a container\n' > "$S/clash.wcodec"
chmod 640 "$S/tokenizer.json"

M=$TMP/mnt
mount_fs "$S" "$M"

# Same names (with clash.wcodec hidden), same types.
(cd "$S" && find . ! -name clash.wcodec | sort) > "$TMP/want"
(cd "$M" && find . | sort) > "$TMP/got"
cmp -s "$TMP/want" "$TMP/got" || { diff "$TMP/want" "$TMP/got"; fail "tree differs"; }
[ -e "$M/clash.wcodec" ] && fail "clash.wcodec is visible"

# Same bytes, sizes, modes (less the write bits: the mount is read-only)
# and mtimes of regular files.
ro_attrs() { set -- $(stat -c '%s %a %Y' "$1"); printf '%s %o %s\n' "$1" $((0$2 & ~0222)) "$3"; }
for f in config.json tokenizer.json sub/blob.bin sub/deeper/small.bin zero.bin \
	model.safetensors.index.json model-00001-of-00002.safetensors; do
	cmp "$S/$f" "$M/$f" || fail "$f differs"
	[ "$(ro_attrs "$S/$f")" = "$(stat -c '%s %a %Y' "$M/$f")" ] && [ "$(stat -c %F "$M/$f")" = "$(stat -c %F "$S/$f")" ] ||
		fail "$f: attributes differ: $(stat -c '%s %a %Y %F' "$S/$f") vs $(stat -c '%s %a %Y %F' "$M/$f")"
done
[ "$(cat "$M/clash.safetensors")" = "real bytes" ] || fail "clash.safetensors is not the real file"

# Symlinks pass through as symlinks, with the same targets.
[ -L "$M/link.json" ] || fail "link.json is not a symlink"
[ "$(readlink "$M/link.json")" = config.json ] || fail "link.json target"
[ "$(readlink "$M/dangling")" = /nonexistent/target ] || fail "dangling target"
cmp "$S/sub/deeper/small.bin" "$M/dirlink/small.bin" || fail "read through a directory symlink"
[ -d "$M/empty" ] && [ -z "$(ls -A "$M/empty")" ] || fail "empty directory"

# A python loader-like pass: list the directory, parse the index, mmap a shard.
"$PYTHON3" - "$M" <<'PY' || fail "python pass over the mount"
import json, mmap, os, sys
m = sys.argv[1]
names = set(os.listdir(m))
assert {"config.json", "model.safetensors.index.json", "tokenizer.json"} <= names, names
idx = json.load(open(os.path.join(m, "model.safetensors.index.json")))
shard = os.path.join(m, idx["weight_map"]["a"])
with open(shard, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
    assert mm[:] == open(shard, "rb").read()
PY

# The source changes while mounted, with names and attributes cached for an
# hour: a file replaced by rename reads with its new bytes and size through
# the cached name, while a handle opened before keeps reading and fstat-ing
# the file it opened; a renamed file and a hard link read right under their
# new names; a symlink replaced by another shows the new target.
M3=$TMP/mnt-changes
printf 'old bytes\n' > "$S/changing.txt"
ln -s config.json "$S/changing.link"
mount_fs "$S" "$M3" -o timeout=3600
[ "$(cat "$M3/changing.txt")" = "old bytes" ] || fail "changing.txt before the change"
[ "$(readlink "$M3/changing.link")" = config.json ] || fail "changing.link before the change"
"$PYTHON3" - "$S" "$M3" <<'PY' &
import os, sys
s, m = sys.argv[1:]
held = open(os.path.join(m, "changing.txt"), "rb")
os.rename(os.path.join(s, "changing.txt"), os.path.join(s, "moved.txt"))
with open(os.path.join(s, "changing.new"), "w") as f:
    f.write("new and longer bytes\n")
os.rename(os.path.join(s, "changing.new"), os.path.join(s, "changing.txt"))
os.link(os.path.join(s, "moved.txt"), os.path.join(s, "hardlink.txt"))
os.unlink(os.path.join(s, "changing.link"))
os.symlink("tokenizer.json", os.path.join(s, "changing.link"))
got = open(os.path.join(m, "changing.txt")).read()
assert got == "new and longer bytes\n", got
assert os.stat(os.path.join(m, "changing.txt")).st_size == 21
assert os.fstat(held.fileno()).st_size == 10, os.fstat(held.fileno())
assert held.read() == b"old bytes\n"
for name in ("moved.txt", "hardlink.txt"):
    assert open(os.path.join(m, name)).read() == "old bytes\n", name
assert os.readlink(os.path.join(m, "changing.link")) == "tokenizer.json"
# A cached name that now holds a FIFO: opening it must not make the daemon
# open the FIFO (which would block it until a writer came).
os.mkfifo(os.path.join(s, "fifo.new"))
os.rename(os.path.join(s, "fifo.new"), os.path.join(s, "moved.txt"))
fd = os.open(os.path.join(m, "moved.txt"), os.O_RDONLY | os.O_NONBLOCK)
import stat
assert stat.S_ISFIFO(os.fstat(fd).st_mode), os.fstat(fd)
os.close(fd)
PY
wait_bounded $! "$M3" 20 "reading names changed in the source" || fail "source changes while mounted"
unmount_fs "$M3"
rm -f "$S/changing.txt" "$S/moved.txt" "$S/hardlink.txt" "$S/changing.link"

# Read-only, enforced by the kernel (ro mount) ...
check_erofs() {
	m=$1
	for what in "touch $m/new" "sh -c 'echo x >> $m/config.json'" "rm -f $m/config.json" \
		"mkdir $m/newdir" "rmdir $m/empty" "mv $m/config.json $m/c2.json" \
		"ln -s x $m/newlink" "chmod 600 $m/config.json" "truncate -s 0 $m/config.json" \
		"ln $m/config.json $m/hard.json"; do
		if err=$(eval "$what" 2>&1); then
			fail "'$what' succeeded on a read-only mount"
		fi
		case $err in
		*"Read-only file system"*) ;;
		*) fail "'$what' failed without EROFS: $err" ;;
		esac
	done
	"$PYTHON3" -c '
import errno, os, sys
for flags in (os.O_WRONLY, os.O_RDWR, os.O_RDONLY | os.O_TRUNC, os.O_WRONLY | os.O_CREAT):
    try:
        os.close(os.open(sys.argv[1], flags))
    except OSError as e:
        assert e.errno == errno.EROFS, (flags, e)
    else:
        raise SystemExit("open with flags %#x succeeded" % flags)
# Extended attributes: not shown (ENOTSUP, twice: the kernel remembers),
# and setting one is a write.
for _ in range(2):
    for call in (lambda: os.listxattr(sys.argv[1]), lambda: os.getxattr(sys.argv[1], "user.x")):
        try:
            call()
        except OSError as e:
            assert e.errno == errno.ENOTSUP, e
        else:
            raise SystemExit("an xattr call succeeded")
try:
    os.setxattr(sys.argv[1], "user.x", b"1")
except OSError as e:
    assert e.errno == errno.EROFS, e
else:
    raise SystemExit("setxattr succeeded")
' "$m/config.json" || fail "open for writing or an xattr call did not fail as it should on $m"
	cmp -s "$S/config.json" "$m/config.json" || fail "config.json changed"
	[ -e "$S/new" ] || [ -e "$S/newdir" ] && fail "the source changed"
	return 0
}
check_erofs "$M"
grep " $M fuse" /proc/mounts | grep -q '[ ,]ro[ ,]' || fail "not mounted ro by default"
unmount_fs "$M"
grep -qs " $M fuse" /proc/mounts && fail "still mounted after fusermount3 -u"

# ... and by the daemon when the kernel lets writes through (-o rw).
M2=$TMP/mnt-rw
mount_fs "$S" "$M2" -o rw
grep " $M2 fuse" /proc/mounts | grep -q '[ ,]rw[ ,]' || fail "-o rw did not mount rw"
check_erofs "$M2"
unmount_fs "$M2"
echo "PASS"
