#!/bin/sh
# cli_pack_tree.sh - `wcodec pack DIR OUTDIR`: a model directory (shards, index,
# config, a subdirectory, symlinks as in the Hugging Face cache) mirrored into
# one that wcodecfs mounts as the original: every .safetensors packed and
# byte-identical when unpacked, other files copied with mode and mtime,
# symlinks kept; --update skips what is done; bad input names the file.
. "${top_srcdir:-.}/tests/cli_lib.sh"

M=$T/model
mkdir -p "$M/sub" "$M/blobs" "$M/empty"
"$PY" "$GEN" --profile weights --dtype BF16 --params 30000 --seed 21 "$M/model-00001-of-00002.safetensors"
"$PY" "$GEN" --profile weights --dtype F32 --params 20000 --seed 22 "$M/model-00002-of-00002.safetensors"
"$PY" "$GEN" --profile all --seed 23 "$M/blobs/3f2a9c"
"$PY" "$GEN" --profile quantized --seed 24 "$M/sub/adapter.safetensors"
echo '{"weight_map": {}}' >"$M/model.safetensors.index.json"
printf '{"model_type": "test"}\n' >"$M/config.json"
chmod 600 "$M/config.json"
touch -d '2020-01-02 03:04:05' "$M/config.json"
printf 'tok' >"$M/sub/tokenizer.model"
ln -s blobs/3f2a9c "$M/linked.safetensors"   # HF cache style: a link to a blob
printf '{"a": 1}\n' >"$M/blobs/77c0de"
ln -s blobs/77c0de "$M/generation_config.json" # a link to a blob of another kind
ln -s sub "$M/subdir-link"                   # a link to a directory: kept as a link
ln -s nowhere "$M/dangling"                  # kept as a link too
ln -s model-00002-of-00002.safetensors "$M/alias.safetensors" # to a file packed too: a link to its .wcodec

O=$T/out/models/m  # parents made as with mkdir -p
"$WCODEC" pack -j 2 --tile-size 8K "$M" "$O" >"$T/pack.txt" || { cat "$T/pack.txt"; fail "pack DIR OUTDIR"; }
grep -q "4 packed" "$T/pack.txt" || fail "summary: $(tail -1 "$T/pack.txt")"
grep -q "4 copied" "$T/pack.txt" || fail "summary: $(cat "$T/pack.txt")"
grep -q "^1 files reached through X.safetensors links" "$T/pack.txt" || fail "summary: $(cat "$T/pack.txt")"
for f in model-00001-of-00002 model-00002-of-00002 sub/adapter linked; do
	[ -f "$O/$f.wcodec" ] || fail "$f.wcodec missing"
	[ ! -L "$O/$f.wcodec" ] || fail "$f.wcodec is a link"
	"$WCODEC" unpack -q -f "$O/$f.wcodec" "$T/back.safetensors" || fail "unpack $f"
	cmp "$M/$f.safetensors" "$T/back.safetensors" || fail "$f: not byte-identical"
done
[ ! -e "$O/model-00001-of-00002.safetensors" ] || fail "an original was copied too"
# The blob a .safetensors link leads to is served packed under the link's
# name, not stored twice; a blob other links lead to is copied as it is,
# and those links stay links (a Hugging Face snapshot's config.json).
[ ! -e "$O/blobs/3f2a9c" ] || fail "the weights' blob was copied besides being packed"
for f in model.safetensors.index.json config.json sub/tokenizer.model blobs/77c0de generation_config.json; do
	cmp "$M/$f" "$O/$f" || fail "$f not copied"
done
[ "$(readlink "$O/generation_config.json")" = blobs/77c0de ] ||
	fail "a link to a blob became: $(ls -l "$O/generation_config.json")"
[ "$(stat -c %a "$O/config.json")" = 600 ] || fail "config.json mode not kept"
[ "$(stat -c %Y "$O/config.json")" = "$(stat -c %Y "$M/config.json")" ] || fail "config.json mtime not kept"
[ -d "$O/empty" ] || fail "empty directory not made"
[ "$(readlink "$O/subdir-link")" = sub ] || fail "directory link not kept"
[ "$(readlink "$O/dangling")" = nowhere ] || fail "dangling link not kept"
[ "$(readlink "$O/alias.wcodec")" = model-00002-of-00002.wcodec ] ||
	fail "a link to a packed file is not a link to its .wcodec: $(ls -l "$O/alias.wcodec")"
grep -q "4 symlinks" "$T/pack.txt" || fail "summary: $(cat "$T/pack.txt")"
[ "$(find "$O" -name '*.tmp.*' | wc -l)" = 0 ] || fail "temporary files left"

# Mounted, OUTDIR shows DIR's files (where FUSE can be used here).
if [ -x "${WCODECFS:-}" ] && command -v fusermount3 >/dev/null 2>&1 && [ -c /dev/fuse ] &&
	(exec 3<>/dev/fuse) 2>/dev/null; then
	mkdir "$T/mnt"
	"$WCODECFS" "$O" "$T/mnt" || fail "mount OUTDIR"
	ok=1
	for f in model-00001-of-00002.safetensors model-00002-of-00002.safetensors sub/adapter.safetensors \
		linked.safetensors model.safetensors.index.json config.json sub/tokenizer.model \
		generation_config.json alias.safetensors; do
		cmp "$M/$f" "$T/mnt/$f" || ok=0
	done
	fusermount3 -u "$T/mnt"
	[ $ok = 1 ] || fail "the mounted OUTDIR differs from DIR"
	echo "mounted OUTDIR: the files of DIR"
fi

# unpack DIR OUTDIR: the tree as the mount shows it, as files; links kept
# (a link to a packed file leads to its unpacked name).
U=$T/unpacked/m
"$WCODEC" unpack "$O" "$U" >"$T/unpack.txt" || { cat "$T/unpack.txt"; fail "unpack DIR OUTDIR"; }
grep -q "4 unpacked.*4 copied.*4 symlinks" "$T/unpack.txt" || fail "unpack summary: $(tail -1 "$T/unpack.txt")"
for f in model-00001-of-00002.safetensors model-00002-of-00002.safetensors sub/adapter.safetensors \
	linked.safetensors model.safetensors.index.json config.json sub/tokenizer.model blobs/77c0de \
	generation_config.json alias.safetensors; do
	cmp "$M/$f" "$U/$f" || fail "unpack DIR: $f differs"
done
[ "$(readlink "$U/alias.safetensors")" = model-00002-of-00002.safetensors ] ||
	fail "unpack DIR: the link to a packed file became: $(ls -l "$U/alias.safetensors")"
[ "$(readlink "$U/generation_config.json")" = blobs/77c0de ] || fail "unpack DIR: a link to a blob not kept"
[ "$(readlink "$U/subdir-link")" = sub ] && [ "$(readlink "$U/dangling")" = nowhere ] ||
	fail "unpack DIR: links not kept"
[ "$(stat -c %a "$U/config.json")" = 600 ] || fail "unpack DIR: config.json mode not kept"
[ -d "$U/empty" ] && [ ! -e "$U/model-00001-of-00002.wcodec" ] || fail "unpack DIR: tree differs"
[ "$(find "$U" -name '*.tmp.*' | wc -l)" = 0 ] || fail "unpack DIR: temporary files left"
if "$WCODEC" unpack -q "$O" "$U" 2>"$T/err.txt"; then fail "unpack DIR into a non-empty OUTDIR without -f"; fi
grep -q "not empty" "$T/err.txt" || fail "unpack DIR: no reason for refusing: $(cat "$T/err.txt")"
"$WCODEC" unpack -q -f "$O" "$U" || fail "unpack -f DIR into a non-empty OUTDIR"
if "$WCODEC" unpack -q "$O" 2>"$T/err.txt"; then fail "unpack DIR without OUTDIR succeeded"; fi
grep -q "needs OUTDIR" "$T/err.txt" || fail "unpack DIR without OUTDIR: $(cat "$T/err.txt")"
# A link already in OUTDIR is not followed: nothing is written outside.
mkdir "$T/victim" "$T/u2"
ln -s "$T/victim" "$T/u2/sub"
if "$WCODEC" unpack -q -f "$O" "$T/u2" 2>"$T/err.txt"; then fail "unpack DIR followed a link in OUTDIR"; fi
[ -z "$(ls -A "$T/victim")" ] || fail "unpack DIR wrote through a link: $(ls "$T/victim")"

# --update: nothing to do the second time; a touched input is packed again.
"$WCODEC" pack -u "$M" "$O" >"$T/again.txt" || fail "pack -u"
grep -q "0 packed.*0 copied.*8 up to date" "$T/again.txt" || fail "update: $(cat "$T/again.txt")"
grep -q "ratio" "$T/again.txt" && fail "update with nothing packed shows a ratio: $(cat "$T/again.txt")"
sleep 1
touch "$M/sub/adapter.safetensors"
"$WCODEC" pack -u -q "$M" "$O" || fail "pack -u after touch"
[ "$O/sub/adapter.wcodec" -nt "$M/model-00001-of-00002.safetensors" ] || fail "touched input not packed again"
rejects "$WCODEC" pack -u "$M/config.json" "$T/x.wcodec" 2>/dev/null || fail "--update with a file accepted"
# Into an OUTDIR that holds files: only with -u (update) or -f (overwrite).
rejects "$WCODEC" pack -q "$M" "$O" 2>"$T/err.txt" || fail "pack into a non-empty OUTDIR without -u or -f"
grep -q "is not empty (-f writes into it anyway)" "$T/err.txt" || fail "no reason: $(cat "$T/err.txt")"

# OUTDIR inside DIR is refused; so is a malformed .safetensors, by name.
rejects "$WCODEC" pack "$M" "$M/sub/out/deeper" 2>"$T/err.txt" || fail "OUTDIR inside DIR accepted"
grep -q "inside" "$T/err.txt" || fail "no reason: $(cat "$T/err.txt")"
[ ! -e "$M/sub/out" ] || fail "a refused OUTDIR was left inside DIR"
mkdir -p "$T/bad"
"$PY" "$GEN" --malform overlap "$T/bad/broken.safetensors"
rejects "$WCODEC" pack -q "$T/bad" "$T/badout" 2>"$T/err.txt" || fail "malformed input accepted"
grep -q "broken.safetensors" "$T/err.txt" || fail "error does not name the file: $(cat "$T/err.txt")"
[ "$(find "$T/badout" -type f | wc -l)" = 0 ] || fail "output left for a malformed input"
echo "pack DIR OUTDIR: ok"
