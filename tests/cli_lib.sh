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

# Sanitizer builds: a sanitizer report exits 86, never mistaken for a clean rejection.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}exitcode=86"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}halt_on_error=1:exitcode=86"

# rejects CMD...: true if CMD exits 1 or 2 (a clean error); a success is
# false, and a crash (signal, sanitizer report) fails the test at once.
rejects() {
	set +e
	"$@"
	rc=$?
	set -e
	case $rc in
	0) return 1 ;;
	1 | 2) return 0 ;;
	*) fail "$* crashed or was killed (status $rc)" ;;
	esac
}
