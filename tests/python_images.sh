#!/bin/sh
# Images of .qvq archives from the Python package (tests/test_python_images.py),
# from the build tree (tests/python_env.sh). Skips (77) when $PYTHON3 has no numpy.
: "${PYTHON3:=python3}" "${top_srcdir:=.}" "${top_builddir:=.}"
if ! "$PYTHON3" -c 'import numpy' 2>/dev/null; then
	echo "SKIP: $PYTHON3 has no numpy"
	exit 77
fi
. "$top_srcdir/tests/python_env.sh"
exec "$PYTHON3" "$top_srcdir/tests/test_python_images.py"
