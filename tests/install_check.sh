#!/bin/sh
# `make installcheck` (distcheck runs it): the installed headers and
# wcodec.pc are what a program outside the tree builds with. Compiles
# contrib/examples/wcodec_extract.c as C11 with -Werror against
# `pkg-config --cflags --libs wcodec` only, and a C++ file that includes
# every public header (extern "C" linkage), then runs the example on a file
# packed by the installed wcodec. With the CUDA plugin installed (cuda_incdir
# set), contrib/examples/wcodec_gpu_load.c is built against it too, and run
# when a GPU is usable: every tensor decoded into GPU memory equals the CPU's.
# Environment: CC, PKG_CONFIG, libdir, bindir, pkgincludedir, pkglibdir,
# srcdir, PYTHON3, pythondir (empty without Python), cuda_incdir and
# cuda_libdir (empty without CUDA). The installed Python package, where
# there is one, imports from pythondir alone (its _paths.py names libdir)
# and reads the file packed here as the original's bytes.
set -eu
fail() { echo "FAIL: install_check: $*" >&2; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/wcodec_install.XXXXXX")
trap 'rm -rf "$T"' EXIT
export PKG_CONFIG_PATH="$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
flags=$($PKG_CONFIG --cflags --libs wcodec) || fail "pkg-config finds no wcodec in $libdir/pkgconfig"
case "$flags" in *"-I$pkgincludedir"*) ;; *) fail "wcodec.pc's Cflags lack -I$pkgincludedir: $flags" ;; esac
# shellcheck disable=SC2086 # flags are words
$CC -std=c11 -Wall -Wextra -Werror "$srcdir/contrib/examples/wcodec_extract.c" $flags \
	-Wl,-rpath,"$libdir" -o "$T/wcodec_extract" || fail "the example does not build against the installed headers"
CXX=${CXX:-c++}
if command -v "$CXX" > /dev/null 2>&1; then
	{
		for h in core/wc_error.h codec/rans.h codec/planes.h codec/tile_codec.h \
			container/container.h engine/tile_source.h engine/backend.h loader/loader.h loader/images.h; do
			echo "#include \"$h\""
		done
		cat <<'CC'
int main(int argc, char **argv)
{
	wc_container *c = nullptr;
	wc_err e = wc_container_open(argc > 1 ? argv[1] : "", &c);
	if (e == WC_OK)
		wc_container_release(c);
	return e == WC_OK ? 0 : 1;
}
CC
	} > "$T/all.cc"
	# shellcheck disable=SC2086
	"$CXX" -Wall -Wextra -Werror "$T/all.cc" $flags -Wl,-rpath,"$libdir" -o "$T/all" ||
		fail "the public headers do not build and link as C++"
fi
"$PYTHON3" "$srcdir/tests/gen_safetensors.py" --profile all --seed 5 "$T/a.safetensors"
# The installed wcodec finds the installed library even before ldconfig has
# run for a prefix such as /usr/local (libtool sets no rpath there).
LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$bindir/wcodec" pack -q \
	"$T/a.safetensors" "$T/a.wcodec" > /dev/null 2> "$T/pack.err" ||
	fail "the installed wcodec cannot pack: $(cat "$T/pack.err")"
"$T/wcodec_extract" "$T/a.wcodec" > "$T/a.out" || fail "the example failed"
cmp "$T/a.safetensors" "$T/a.out" || fail "the example's output differs from the original"
if [ -x "$T/all" ]; then
	"$T/all" "$T/a.wcodec" || fail "the C++ program cannot open the file"
fi
py="not installed"
if [ -n "${pythondir:-}" ] && [ -f "$pythondir/wcodec/_paths.py" ] && "$PYTHON3" -c 'import numpy' 2>/dev/null; then
	env -u WCODEC_LIBRARY -u WCODEC_PLUGIN_DIR PYTHONPATH="$pythondir" "$PYTHON3" - "$T/a.safetensors" "$T/a.wcodec" <<'PY' ||
import sys
import wcodec.numpy as wn
with wn.safe_open(sys.argv[1]) as a, wn.safe_open(sys.argv[2]) as b:
    n = 0
    for k in a.keys():
        try:
            x = a.get_tensor(k)
        except TypeError:  # F4, F6: no numpy dtype
            continue
        assert x.tobytes() == b.get_tensor(k).tobytes(), k
        n += 1
    assert n > 100, n
PY
		fail "the installed Python package does not load the packed file as the original"
	py="imported from $pythondir, loads the packed file as the original"
fi
gpu="not built (no CUDA plugin)"
if [ -n "${cuda_incdir:-}" ] && [ -f "$pkgincludedir/wcodec_cuda.h" ]; then
	[ "$($PKG_CONFIG --variable=pkglibdir wcodec)" = "$pkglibdir" ] || fail "wcodec.pc's pkglibdir"
	# shellcheck disable=SC2086
	$CC -std=c11 -Wall -Wextra -Werror "$srcdir/contrib/examples/wcodec_gpu_load.c" \
		$($PKG_CONFIG --cflags wcodec) -I"$cuda_incdir" $($PKG_CONFIG --libs wcodec) \
		-L"$pkglibdir" -l:wcodec-cuda.so -Wl,-rpath,"$pkglibdir" \
		-L"$cuda_libdir" -lcudart -Wl,-rpath,"$cuda_libdir" -Wl,-rpath,"$libdir" -o "$T/gpu_load" ||
		fail "the GPU example does not build against the installed plugin"
	rc=0
	"$T/gpu_load" "$T/a.wcodec" > "$T/gpu.out" 2> "$T/gpu.err" || rc=$?
	case $rc in
	0) [ "$(grep -c 'equal$' "$T/gpu.out")" -eq "$(wc -l < "$T/gpu.out")" ] || fail "GPU example output"
	   gpu="built, and $(wc -l < "$T/gpu.out") tensors decoded into GPU memory equal the CPU's" ;;
	3) gpu="built and linked; not run: $(cat "$T/gpu.err")" ;;
	*) fail "the GPU example failed ($rc): $(cat "$T/gpu.err")" ;;
	esac
fi
echo "PASS: install_check.sh (the installed headers and wcodec.pc build the example, as C and C++; Python: $py; GPU example: $gpu)"
