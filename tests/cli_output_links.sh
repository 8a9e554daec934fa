#!/bin/sh
# Writers stay inside their output: a symbolic link already in the output
# tree (to a directory outside it) is refused, not followed, by `wcodec
# unpack` of an archive with subdirectories and by `wcodec pack DIR
# OUTDIR` (and -u); nothing is written outside the tree. A link where a
# file goes is replaced by the file, not written through.
. "$top_srcdir/tests/cli_lib.sh"

mkdir -p "$T/img/a/b" "$T/victim" "$T/victim2"
"$PY" - "$T/img" <<'PY'
import os, random, sys
rng = random.Random(9)
for sub in ("a/b", "a", "."):
    for i in range(2):
        w, h = rng.randrange(8, 20), rng.randrange(8, 20)
        with open(os.path.join(sys.argv[1], sub, "p%d.ppm" % i), "wb") as f:
            f.write(b"P6\n%d %d\n255\n" % (w, h) + bytes(rng.randrange(256) for _ in range(w * h * 3)))
PY
"$WCODEC" pack-images -q "$T/img" "$T/deep.qvq" --codebook 16 --seed 1 > /dev/null || fail "pack-images"

# unpack into a tree whose a/ is a link out of it
mkdir -p "$T/out"
ln -s "$T/victim" "$T/out/a"
if "$WCODEC" unpack -q -f "$T/deep.qvq" "$T/out" 2>"$T/err"; then fail "unpack wrote through a link"; fi
grep -q "symbolic link" "$T/err" || fail "no reason given: $(cat "$T/err")"
[ -z "$(ls -A "$T/victim")" ] || fail "unpack wrote outside its output: $(ls -R "$T/victim")"

# a link where a file goes is replaced, its target untouched
rm "$T/out/a"
echo keep > "$T/victim/keep.txt"
ln -s "$T/victim/keep.txt" "$T/out/p0.ppm"
"$WCODEC" unpack -q -f "$T/deep.qvq" "$T/out" || fail "unpack over a link to a file"
[ "$(cat "$T/victim/keep.txt")" = keep ] || fail "unpack wrote through a link to a file"
[ -f "$T/out/p0.ppm" ] && [ ! -L "$T/out/p0.ppm" ] || fail "the link was not replaced by the file"

# pack DIR OUTDIR (and -u) with OUTDIR/sub a link out of the tree
"$PY" "$GEN" --profile all --seed 5 "$T/m.safetensors"
mkdir -p "$T/dir/sub" "$T/pout"
cp "$T/m.safetensors" "$T/dir/sub/m.safetensors"
ln -s "$T/victim2" "$T/pout/sub"
for u in -f -u; do
	if "$WCODEC" pack -q $u "$T/dir" "$T/pout" 2>"$T/err"; then fail "pack $u wrote through a link"; fi
	grep -q "symbolic link" "$T/err" || fail "pack $u: no reason given: $(cat "$T/err")"
	[ -z "$(ls -A "$T/victim2")" ] || fail "pack $u wrote outside its output: $(ls "$T/victim2")"
done
echo "PASS: cli_output_links.sh"
