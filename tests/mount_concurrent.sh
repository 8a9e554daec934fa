#!/bin/sh
# 16 concurrent readers over several virtual files through a 4 MiB cache of
# 1 MiB tiles (far smaller than the data): every byte read is right, the
# daemon stays within its budget and keeps serving.
. "${top_srcdir:-.}/tests/mount_lib.sh"

O=$TMP/orig
S=$TMP/src
mkdir -p "$O" "$S"
gen "$O/a.safetensors" --profile weights --dtype BF16 --params 4000000 --seed 11
gen "$O/b.safetensors" --profile weights --dtype F32 --params 1500000 --seed 12
pack "$O/a.safetensors" "$S/a.wcodec" 1048576
pack "$O/b.safetensors" "$S/b.wcodec" 1048576

M=$TMP/mnt
mount_fs "$S" "$M" -o cache_size=4M,readahead=2
pid=$(daemon_pid_of "$M") || fail "no daemon"

check readers "$M/a.safetensors" "$O/a.safetensors" 8 1 &
r1=$!
check readers "$M/b.safetensors" "$O/b.safetensors" 6 2 &
r2=$!
check slices "$M/a.safetensors" "$O/a.safetensors" 60 3 &
r3=$!
check slices "$M/b.safetensors" "$O/b.safetensors" 60 4 &
r4=$!
wait $r1 || fail "readers of a"
wait $r2 || fail "readers of b"
wait $r3 || fail "slices of a"
wait $r4 || fail "slices of b"

kill -0 "$pid" || fail "daemon died"
[ "$(sha "$M/a.safetensors")" = "$(sha "$O/a.safetensors")" ] || fail "a: sha256 after the storm"
unmount_fs "$M"
echo "PASS"
