#!/bin/sh
# cli_docreader.sh - docs/FORMAT.md is enough to read a .wcodec file: an
# independent reader written from it alone (tests/doc_reader.py, standard
# library only) reproduces the packed BF16, F32 and F16 files byte for byte.
. "${top_srcdir:-.}/tests/cli_lib.sh"

for dt in BF16 F32 F16; do
	"$PY" "$GEN" --profile weights --dtype $dt --params 20000 --seed 31 "$T/$dt.safetensors"
	"$WCODEC" pack -q --tile-size 8K --chunk 1024 "$T/$dt.safetensors" "$T/$dt.wcodec" || fail "pack $dt"
	"$PY" "$top_srcdir/tests/doc_reader.py" "$T/$dt.wcodec" "$T/$dt.out" || fail "doc_reader $dt"
	cmp "$T/$dt.safetensors" "$T/$dt.out" || fail "$dt: the document's reader disagrees"
done
exit 0
