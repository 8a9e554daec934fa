#!/bin/sh
# The Python package `wcodec` (tests/test_python.py) from the build tree:
# python/ from the source tree, libwcodec and the CUDA plugin (where built)
# from the build tree. Skips (77) when $PYTHON3 has no numpy.
: "${PYTHON3:=python3}" "${top_srcdir:=.}" "${top_builddir:=.}"
if ! "$PYTHON3" -c 'import numpy' 2>/dev/null; then
	echo "SKIP: $PYTHON3 has no numpy"
	exit 77
fi
WCODEC_LIBRARY="$top_builddir/.libs/libwcodec.so.0"
WCODEC_PLUGIN_DIR="$top_builddir/cuda/.libs"
export WCODEC_LIBRARY WCODEC_PLUGIN_DIR
# A sanitizer build (--enable-sanitizers): python3 itself is not built with
# ASan, so its runtime must be loaded first; CPython's own allocations that
# live until exit are not leaks of ours.
asan=$(ldd "$WCODEC_LIBRARY" 2>/dev/null | sed -n 's/^[[:space:]]*libasan[^ ]* => \([^ ]*\).*/\1/p')
if [ -n "$asan" ]; then
	ubsan=$(ldd "$WCODEC_LIBRARY" | sed -n 's/^[[:space:]]*libubsan[^ ]* => \([^ ]*\).*/\1/p')
	LD_PRELOAD="$asan${ubsan:+ $ubsan}"
	ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
	export LD_PRELOAD ASAN_OPTIONS
fi
exec "$PYTHON3" "$top_srcdir/tests/test_python.py"
