#!/bin/sh
# Models whose weights stay packed in GPU memory (tests/test_python_packed.py)
# from the build tree (tests/python_env.sh). Skips (77) without torch, a GPU
# or the CUDA plugin.
: "${PYTHON3:=python3}" "${top_srcdir:=.}" "${top_builddir:=.}"
if ! "$PYTHON3" -c 'import numpy, torch' 2>/dev/null; then
	echo "SKIP: $PYTHON3 has no numpy or torch"
	exit 77
fi
. "$top_srcdir/tests/python_env.sh"
exec "$PYTHON3" "$top_srcdir/tests/test_python_packed.py"
