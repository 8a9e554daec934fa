# python_env.sh - sourced by the tests that run the Python package from the
# build tree: python/ from the source tree, libwcodec and the CUDA plugin
# (where built) from the build tree. In a sanitizer build (--enable-
# sanitizers) python3 itself is not built with ASan, so its runtime is
# loaded first; CPython's own allocations that live until exit are not
# leaks of ours. Needs top_srcdir and top_builddir.
WCODEC_LIBRARY="$top_builddir/.libs/libwcodec.so.0"
WCODEC_PLUGIN_DIR="$top_builddir/cuda/.libs"
PYTHONPATH="$top_srcdir/python${PYTHONPATH:+:$PYTHONPATH}"
export WCODEC_LIBRARY WCODEC_PLUGIN_DIR PYTHONPATH
asan=$(ldd "$WCODEC_LIBRARY" 2>/dev/null | sed -n 's/^[[:space:]]*libasan[^ ]* => \([^ ]*\).*/\1/p')
if [ -n "$asan" ]; then
	ubsan=$(ldd "$WCODEC_LIBRARY" | sed -n 's/^[[:space:]]*libubsan[^ ]* => \([^ ]*\).*/\1/p')
	LD_PRELOAD="$asan${ubsan:+ $ubsan}"
	ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
	export LD_PRELOAD ASAN_OPTIONS
fi
