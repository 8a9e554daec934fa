# tests/s3_lib.sh - sourced by the s3_*.sh tests: a real S3-compatible
# server (s3rver, from the npm registry; .ci/run installs it) on a free
# port of 127.0.0.1 with the bucket "models", a temporary directory T
# removed at exit, and helpers. Skips (77) without s3rver or curl.
#   s3_start         start (or restart, on the same port and data) the server
#   s3_stop          stop it
#   put FILE KEY     put an object, signed by curl's own SigV4
#   fail MESSAGE     print FAIL: MESSAGE and exit 1
#   proxy MODE       start tests/s3_proxy.py in front of the server and point
#                    AWS_ENDPOINT_URL at it
# The environment is then set for the server: AWS_ACCESS_KEY_ID,
# AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL, and HOME (an empty directory).
set -u
: "${WCODEC:?}" "${top_srcdir:?}"
PYTHON3=${PYTHON3:-python3}
command -v s3rver >/dev/null 2>&1 || { echo "SKIP: no s3rver (npm install -g s3rver)"; exit 77; }
command -v curl >/dev/null 2>&1 || { echo "SKIP: no curl"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/wc-s3.XXXXXX") || exit 1
PIDS=
S3_PID=
s3_cleanup_hook() { :; }
cleanup() {
	s3_cleanup_hook
	for p in $PIDS $S3_PID; do kill "$p" 2>/dev/null; done
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() { echo "FAIL: $*"; exit 1; }

PORT=$("$PYTHON3" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p "$T/data"
# The server and curl run without the sanitizer runtime a test may preload
# for Python (tests/python_env.sh): neither is ours, and curl hangs under it.
s3_start() {
	env -u LD_PRELOAD s3rver -d "$T/data" -a 127.0.0.1 -p "$PORT" -s --configure-bucket models >>"$T/s3rver.log" 2>&1 &
	S3_PID=$!
	i=0
	until env -u LD_PRELOAD curl -s -o /dev/null "http://127.0.0.1:$PORT/"; do
		i=$((i + 1))
		[ $i -lt 100 ] || fail "s3rver did not start: $(tail -5 "$T/s3rver.log")"
		sleep 0.1
	done
}
s3_stop() {
	[ -n "$S3_PID" ] && kill "$S3_PID" 2>/dev/null && wait "$S3_PID" 2>/dev/null
	S3_PID=
}
s3_start
put() { # put FILE KEY
	env -u LD_PRELOAD curl -sf -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" --aws-sigv4 "aws:amz:us-east-1:s3" \
		--user S3RVER:S3RVER -T "$1" "http://127.0.0.1:$PORT/models/$2" || fail "put $2"
}
proxy() { # proxy MODE: start it, set AWS_ENDPOINT_URL to it
	rm -f "$T/port" "$T/faults"
	"$PYTHON3" "$top_srcdir/tests/s3_proxy.py" "$T/port" "$PORT" "$1" "$T/faults" &
	PIDS="$PIDS $!"
	i=0
	until [ -s "$T/port" ]; do
		i=$((i + 1))
		[ $i -lt 100 ] || fail "the proxy did not start"
		sleep 0.1
	done
	AWS_ENDPOINT_URL="http://127.0.0.1:$(cat "$T/port")"
}
unset AWS_PROFILE AWS_CONFIG_FILE AWS_SHARED_CREDENTIALS_FILE AWS_SESSION_TOKEN AWS_ENDPOINT_URL_S3 AWS_REGION \
	AWS_DEFAULT_REGION AWS_MAX_ATTEMPTS
export HOME="$T/home" AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_ENDPOINT_URL="http://127.0.0.1:$PORT"
mkdir -p "$HOME"
