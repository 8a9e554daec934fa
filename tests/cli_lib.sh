# cli_lib.sh - sourced by the cli_*.sh tests: tools, a scratch directory, helpers.
set -eu
: "${WCODEC:=./wcodec}"
: "${top_srcdir:=.}"
PY=${PYTHON3:-python3}
GEN="$top_srcdir/tests/gen_safetensors.py"
if ! command -v "$PY" >/dev/null 2>&1; then
	echo "SKIP: no python3" >&2
	exit 77
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/wcodec_cli.XXXXXX")
trap 'rm -rf "$T"' EXIT

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

# Files in $1 whose names contain ".tmp." (leftover temporaries).
leftovers() {
	ls -A "$1" | grep -c '\.tmp\.' || true
}
