#!/bin/sh
# wcodec.torch.load_checkpoint across 2 and 3 ranks of a gloo process group
# (tests/test_distributed.py) from the build tree (tests/python_env.sh).
# Skips (77) when $PYTHON3 has no numpy or no torch with gloo.
: "${PYTHON3:=python3}" "${top_srcdir:=.}" "${top_builddir:=.}" "${WCODEC:=$top_builddir/wcodec}"
if ! "$PYTHON3" -c 'import numpy, torch.distributed as d; assert d.is_available() and d.is_gloo_available()' \
	2>/dev/null; then
	echo "SKIP: $PYTHON3 has no numpy, or no torch with the gloo backend"
	exit 77
fi
. "$top_srcdir/tests/python_env.sh"
exec "$PYTHON3" "$top_srcdir/tests/test_distributed.py" "$top_srcdir" "$WCODEC"
