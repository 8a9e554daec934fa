#!/bin/sh
# .wcodec files appear as the safetensors files they were packed from: same
# sha256, size, st_blksize = tile size, st_mtime = the container's; random
# pread and mmap slices equal; a sharded layout with an index works; the
# source stays hidden; the daemon logs nothing alarming.
. "${top_srcdir:-.}/tests/mount_lib.sh"

O=$TMP/orig
S=$TMP/src
mkdir -p "$O" "$S/shards"
gen "$O/all.safetensors" --profile all
gen "$O/bf16.safetensors" --profile weights --dtype BF16 --params 3000000 --seed 2
gen "$O/f32.safetensors" --profile weights --dtype F32 --params 700000 --seed 3
gen "$O/f16.safetensors" --profile weights --dtype F16 --params 500000 --seed 4 --no-metadata
pack "$O/all.safetensors" "$S/all.wcodec" 65536
pack "$O/bf16.safetensors" "$S/bf16.wcodec"
pack "$O/f32.safetensors" "$S/f32.wcodec" 262144
pack "$O/f16.safetensors" "$S/f16.wcodec" 4096
# A sharded checkpoint: index + two packed shards + config, as transformers
# lays it out.
gen "$O/s1.safetensors" --profile weights --params 400000 --seed 5
gen "$O/s2.safetensors" --profile weights --params 300000 --seed 6
pack "$O/s1.safetensors" "$S/shards/model-00001-of-00002.wcodec" 131072
pack "$O/s2.safetensors" "$S/shards/model-00002-of-00002.wcodec" 131072
printf '{"metadata": {"total_size": 1}, "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}\n' \
	> "$S/shards/model.safetensors.index.json"
printf '{"model_type": "llama"}\n' > "$S/shards/config.json"
touch -d '2024-01-02 03:04:05' "$S/bf16.wcodec"

M=$TMP/mnt
mount_fs "$S" "$M" -o cache_size=64M

[ "$(ls "$M" | tr '\n' ' ')" = "all.safetensors bf16.safetensors f16.safetensors f32.safetensors shards " ] ||
	fail "listing: $(ls "$M" | tr '\n' ' ')"
[ "$(ls "$M/shards" | tr '\n' ' ')" = "config.json model-00001-of-00002.safetensors model-00002-of-00002.safetensors model.safetensors.index.json " ] ||
	fail "shard listing: $(ls "$M/shards" | tr '\n' ' ')"
[ -e "$M/bf16.wcodec" ] && fail "the .wcodec source is visible"

for f in all bf16 f32 f16 shards/model-00001-of-00002 shards/model-00002-of-00002; do
	case $f in
	shards/model-00001*) o=$O/s1.safetensors; w=$S/$f.wcodec ;;
	shards/model-00002*) o=$O/s2.safetensors; w=$S/$f.wcodec ;;
	*) o=$O/$f.safetensors; w=$S/$f.wcodec ;;
	esac
	v=$M/$f.safetensors
	[ "$(sha "$v")" = "$(sha "$o")" ] || fail "$f: sha256 differs"
	[ "$(stat -c %s "$v")" = "$(stat -c %s "$o")" ] || fail "$f: size"
	[ "$(stat -c %F "$v")" = "regular file" ] || fail "$f: not a regular file"
	[ "$(stat -c %Y "$v")" = "$(stat -c %Y "$w")" ] || fail "$f: mtime is not the container's"
	[ "$(stat -c %b "$v")" = "$(stat -c %b "$w")" ] || fail "$f: st_blocks are not the container's"
	check slices "$v" "$o" 40 7 || fail "$f: slices"
done
[ "$(stat -c %o "$M/all.safetensors")" = 65536 ] || fail "st_blksize of all: $(stat -c %o "$M/all.safetensors")"
[ "$(stat -c %o "$M/f16.safetensors")" = 4096 ] || fail "st_blksize of f16"
[ "$(stat -c %o "$M/bf16.safetensors")" = 1048576 ] || fail "st_blksize of bf16"
[ "$(stat -c %Y "$M/bf16.safetensors")" = "$(date -d '2024-01-02 03:04:05' +%s)" ] || fail "bf16 mtime"
# Stable attributes: a second stat after reading gives the same answer.
[ "$(stat -c '%s %Y %i' "$M/bf16.safetensors")" = "$(stat -c '%s %Y %i' "$M/bf16.safetensors")" ] ||
	fail "unstable attributes"
# Read-only in every way.
touch "$M/bf16.safetensors" 2>/dev/null && fail "touch of a virtual file succeeded"
"$PYTHON3" -c 'import os,sys; os.open(sys.argv[1], os.O_RDWR)' "$M/bf16.safetensors" 2>/dev/null &&
	fail "open O_RDWR of a virtual file succeeded"

# A loader's view: parse the header through mmap like safetensors does.
"$PYTHON3" - "$M/shards" <<'PY' || fail "loader pass"
import json, mmap, os, struct, sys
d = sys.argv[1]
idx = json.load(open(os.path.join(d, "model.safetensors.index.json")))
for shard in sorted(set(idx["weight_map"].values())):
    with open(os.path.join(d, shard), "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        n = struct.unpack("<Q", mm[:8])[0]
        hdr = json.loads(mm[8:8 + n])
        end = max(v["data_offsets"][1] for k, v in hdr.items() if k != "__metadata__")
        assert len(mm) == 8 + n + end, (shard, len(mm), n, end)
        for k, v in hdr.items():
            if k != "__metadata__":
                b, e = v["data_offsets"]
                assert len(mm[8 + n + b:8 + n + e]) == e - b
PY

# Containers are held per inode: open while a handle is open, released
# (descriptors closed, tiles dropped) once the handle is closed and the
# kernel forgets the inode (forced here by dropping dentries and inodes).
pid=$(daemon_pid_of "$M") || fail "no daemon pid"
held() { ls -l /proc/$pid/fd 2>/dev/null | grep -c "$S/f32.wcodec"; }
exec 5< "$M/f32.safetensors"
[ "$(held)" -ge 1 ] || fail "f32.wcodec is not open in the daemon while a handle is open"
if { echo 2 > /proc/sys/vm/drop_caches; } 2>/dev/null; then
	[ "$(held)" -ge 1 ] || fail "f32.wcodec closed while a handle is still open"
	exec 5<&-
	i=0
	while [ "$(held)" -ne 0 ]; do
		echo 2 > /proc/sys/vm/drop_caches
		i=$((i + 1)); [ $i -lt 50 ] || fail "f32.wcodec still open after close and forget"
		sleep 0.1
	done
	[ "$(sha "$M/f32.safetensors")" = "$(sha "$O/f32.safetensors")" ] || fail "f32 after reopen"
else
	exec 5<&-
	note "cannot drop the dentry cache here: release on forget not checked"
fi

unmount_fs "$M"

# SOURCE may be its own mount point (the directory shows itself decoded):
# the daemon must never walk a path through its own mount, or it deadlocks.
echo junk > "$S/broken.wcodec"
mount_fs "$S" "$S"
timeout 20 sh -c "ls -l '$S' > '$TMP/self.ls' 2>&1"
[ $? -eq 124 ] && fail "ls of a self-mount hung"
grep -q "bf16.safetensors" "$TMP/self.ls" || fail "self-mount listing: $(cat "$TMP/self.ls")"
[ "$(timeout 20 sha256sum < "$S/f16.safetensors" | cut -d' ' -f1)" = "$(sha "$O/f16.safetensors")" ] ||
	fail "self-mount: f16 differs"
timeout 20 cat "$S/broken.safetensors" > /dev/null 2>&1 && fail "a broken container opened"
[ $? -eq 124 ] && fail "a broken container hung the self-mount"
unmount_fs "$S"
echo "PASS"
