#!/bin/sh
# Test of contrib/tfjs2safetensors.py: synthetic TensorFlow.js models with
# every stored type and quantization, converted to every --dtype and checked
# byte by byte against values computed independently; bad inputs refused.
# Runs under $PYTHON3 (numpy path and pure path) and, when it differs, also
# under a python3 without numpy from PATH.
set -eu
export PYTHONDONTWRITEBYTECODE=1
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${PYTHON3:=python3}"
work=$(mktemp -d "${TMPDIR:-/tmp}/tfjs2st.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
"$PYTHON3" "$top_srcdir/contrib/tests/check_tfjs2safetensors.py" "$top_srcdir" "$work/a"
other=$(command -v python3 || true)
if [ -n "$other" ] && [ "$(readlink -f "$other")" != "$(readlink -f "$(command -v "$PYTHON3")")" ]; then
	"$other" "$top_srcdir/contrib/tests/check_tfjs2safetensors.py" "$top_srcdir" "$work/b"
fi
