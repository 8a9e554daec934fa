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

unmount_fs "$M"
echo "PASS"
