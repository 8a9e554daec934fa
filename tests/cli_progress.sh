#!/bin/sh
# The progress bar on a terminal (script(1) gives the command one): the
# rate in MB/s, and while packing a directory the file's place, "(i/N)";
# without a terminal, no bar at all.
. "$top_srcdir/tests/cli_lib.sh"
command -v script >/dev/null 2>&1 || { echo "SKIP: no script(1) to give a terminal"; exit 77; }
mkdir -p "$T/in/sub"
"$PY" "$GEN" --profile all --seed 4 "$T/in/a.safetensors"
"$PY" "$GEN" --profile all --seed 5 "$T/in/sub/b.safetensors"
script -qc "\"$WCODEC\" pack \"$T/in\" \"$T/out\"" /dev/null > "$T/tty.txt" 2>&1 || fail "pack on a terminal"
tr '\r' '\n' < "$T/tty.txt" > "$T/lines.txt"
grep -q "a.safetensors (1/2) .*MB/s" "$T/lines.txt" || fail "no rate or count for the first file: $(cat "$T/lines.txt")"
grep -q "sub/b.safetensors (2/2) .*MB/s" "$T/lines.txt" || fail "no count for the second file: $(cat "$T/lines.txt")"
script -qc "\"$WCODEC\" unpack \"$T/out/a.wcodec\" \"$T/a.back\"" /dev/null > "$T/tty2.txt" 2>&1 || fail "unpack on a terminal"
tr '\r' '\n' < "$T/tty2.txt" | grep -q "unpacking .*MB/s" || fail "no rate while unpacking: $(cat "$T/tty2.txt")"
"$WCODEC" pack -f "$T/in/a.safetensors" "$T/a2.wcodec" 2> "$T/notty.txt" > /dev/null || fail "pack"
grep -q "MB/s" "$T/notty.txt" && fail "a bar without a terminal: $(cat "$T/notty.txt")"
echo "PASS: cli_progress.sh"
