#!/bin/sh
# A .wcodec or .qvq source rewritten in place while mounted (cp onto it: same
# inode, new bytes) is opened again: the next lookup shows the new file,
# its size and bytes, or the new archive's images; a handle opened before
# reads the old bytes or fails with EIO, never bytes of neither; the
# daemon keeps serving, also with rewrites racing reads. (A file replaced
# by rename is a new inode and has always been a new file.)
. "${top_srcdir:-.}/tests/mount_lib.sh"
: "${WCODEC:?WCODEC must name the built wcodec}"

O=$TMP/orig
S=$TMP/src
mkdir -p "$O" "$S" "$TMP/img1/a" "$TMP/img2/b"
gen "$O/one.safetensors" --profile weights --dtype BF16 --params 300000 --seed 31
gen "$O/two.safetensors" --profile all --seed 32
pack "$O/one.safetensors" "$O/one.wcodec" 65536
pack "$O/two.safetensors" "$O/two.wcodec" 4096
cp "$O/one.wcodec" "$S/m.wcodec"

# Two image archives of different images (PPMs written here).
"$PYTHON3" - "$TMP" <<'EOF' || fail "writing images"
import os, random, sys
rng = random.Random(7)
for d, n in (("img1/a", 5), ("img2/b", 3)):
    for i in range(n):
        w, h = rng.randrange(4, 20), rng.randrange(4, 20)
        with open(os.path.join(sys.argv[1], d, "p%d.ppm" % i), "wb") as f:
            f.write(b"P6\n%d %d\n255\n" % (w, h) + bytes(rng.randrange(256) for _ in range(w * h * 3)))
EOF
"$WCODEC" pack-images -q "$TMP/img1" "$O/i1.qvq" --codebook 16 --seed 1 >/dev/null || fail "pack-images 1"
"$WCODEC" pack-images -q "$TMP/img2" "$O/i2.qvq" --codebook 16 --seed 1 >/dev/null || fail "pack-images 2"
"$WCODEC" unpack -q "$O/i2.qvq" "$O/i2" || fail "unpack i2"
cp "$O/i1.qvq" "$S/imgs.qvq"

M=$TMP/mnt
# timeout=0: every path walk asks the daemon again, so the test need not wait.
mount_fs "$S" "$M" -o timeout=0
pid=$(daemon_pid_of "$M") || fail "no daemon"
[ "$(sha "$M/m.safetensors")" = "$(sha "$O/one.safetensors")" ] || fail "first file"
[ -d "$M/imgs/a" ] || fail "first archive: $(ls "$M/imgs")"

# A handle held across the rewrite, reading after it.
"$PYTHON3" - "$M/m.safetensors" "$O/one.safetensors" "$S/m.wcodec" "$O/two.wcodec" <<'EOF' || fail "old handle"
import errno, shutil, sys
virt, old, src, new = sys.argv[1:]
f = open(virt, "rb", buffering=0)
head = f.read(4096)
shutil.copyfile(new, src)  # in place: the same inode
want = open(old, "rb").read()
f.seek(0)
try:
    got = f.read()
    if got != want[:len(got)] or not got:
        sys.exit("old handle read %d bytes that are not the old file's" % len(got))
except OSError as e:
    if e.errno != errno.EIO:
        sys.exit("old handle: %s, expected the old bytes or EIO" % e)
EOF
[ "$(stat -c %s "$M/m.safetensors")" = "$(stat -c %s "$O/two.safetensors")" ] ||
	fail "size after the rewrite: $(stat -c %s "$M/m.safetensors")"
[ "$(sha "$M/m.safetensors")" = "$(sha "$O/two.safetensors")" ] || fail "bytes after the rewrite"

# The archive rewritten in place: the directory shows the new images.
ino=$(stat -c %i "$S/imgs.qvq")
cp "$O/i2.qvq" "$S/imgs.qvq"
[ "$(stat -c %i "$S/imgs.qvq")" = "$ino" ] || fail "cp made a new inode; the test needs the same one"
[ -d "$M/imgs/b" ] && [ ! -e "$M/imgs/a" ] || fail "archive after the rewrite: $(ls "$M/imgs")"
for f in "$O"/i2/b/*.ppm; do
	cmp -s "$f" "$M/imgs/b/$(basename "$f")" || fail "image $(basename "$f") after the rewrite"
done

# Rewrites racing readers: one thread copies the two containers onto the
# source in turn while three read slices (some through handles kept across
# rewrites); every read gives one file's bytes or EIO, never a mix.
"$PYTHON3" - "$M/m.safetensors" "$S/m.wcodec" "$O/one" "$O/two" <<'EOF' || fail "reads racing rewrites"
import errno, random, shutil, sys, threading, time
virt, src, one, two = sys.argv[1:]
files = [open(one + ".safetensors", "rb").read(), open(two + ".safetensors", "rb").read()]
stop, bad, ok = False, [], [0]
def writer():
    i = 0
    while not stop:
        shutil.copyfile((one, two)[i % 2] + ".wcodec", src)
        i += 1
        time.sleep(0.01)
def reader(seed):
    rng, held = random.Random(seed), []
    while not stop:
        try:
            f = open(virt, "rb")
            off, n = rng.randrange(0, 400000), rng.choice((100, 4096, 70000))
            f.seek(off)
            d = f.read(n)
            if all(d != x[off:off + n] for x in files):
                bad.append("%d bytes at %d match neither file" % (len(d), off))
            ok[0] += 1
            held.append(f)
            if len(held) > 8:
                held.pop(rng.randrange(len(held))).close()
        except OSError as e:
            if e.errno != errno.EIO:
                bad.append(str(e))
    for f in held:
        f.close()
ts = [threading.Thread(target=writer)] + [threading.Thread(target=reader, args=(i,)) for i in range(3)]
for t in ts:
    t.start()
time.sleep(3)
stop = True
for t in ts:
    t.join()
print("# %d reads racing rewrites, %d bad" % (ok[0], len(bad)))
if bad or not ok[0]:
    sys.exit("; ".join(bad[:5]) or "no read succeeded")
EOF

kill -0 "$pid" || fail "daemon died"
unmount_fs "$M"
exit 0
