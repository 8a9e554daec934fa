# fuzz_corpus.sh - replay the fuzz targets' seed corpora (tests/fuzz/corpus)
# and deterministic variants of every seed (tests/fuzz/fuzz_main.c) through
# the targets built for make check. A target abort()s when the code under
# test breaks a property it states (tests/fuzz/fuzz_*.c); the sanitizer
# build runs the same inputs under ASan and UBSan.
set -eu
: "${top_srcdir:?}" "${top_builddir:?}"
corpus=$top_srcdir/tests/fuzz/corpus
work=$(mktemp -d "${TMPDIR:-/tmp}/wcfs-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work" # a failing input is saved here as fuzz-crash
run() { # TARGET VARIANTS
	out=$("$top_builddir/tests/fuzz/fuzz_$1" -m "$2" "$corpus/$1" 2>&1) || {
		echo "$out" | tail -30
		[ -f fuzz-crash ] && cp fuzz-crash "$top_builddir/fuzz-crash-$1" &&
			echo "FAIL: fuzz_$1: input kept as $top_builddir/fuzz-crash-$1"
		exit 1
	}
	echo "$out" | tail -1
}
run tile 300
run wcodec 1500
run qvq 1500
run safetensors 150
run image 300
