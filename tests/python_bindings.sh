#!/bin/sh
# The Python package's ctypes declarations against the C headers' layouts,
# its one binding module and its import graph (tests/test_bindings.py).
# The CUDA plugin's structures are checked where cuda_runtime_api.h is
# found (the configured toolkit, else /usr/local/cuda).
: "${PYTHON3:=python3}" "${top_srcdir:=.}" "${top_builddir:=.}"
cuda_inc=${CUDA_INCDIR:-}
if [ -z "$cuda_inc" ] && [ -f /usr/local/cuda/include/cuda_runtime_api.h ]; then
	cuda_inc=/usr/local/cuda/include
fi
exec "$PYTHON3" "$top_srcdir/tests/test_bindings.py" "$top_srcdir" "$top_builddir" $cuda_inc
