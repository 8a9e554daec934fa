#!/bin/bash
# bench-walk.sh - what walking a large tree of passed-through files costs the
# daemon: lookups answered and refused, seconds, daemon RSS per file, its
# descriptors; and, for files with bytes, the time to read every file.
#
# Usage: bench-walk.sh [-d DIRS] [-f FILES] [-s BYTES] [-r RUNS] [WCODECFS...]
#   -d, -f  the source: DIRS directories of FILES files each (100 x 1000)
#   -s      bytes per file (0: empty files, no read pass)
#   -r      fresh mounts per binary, alternating between binaries (3)
#   WCODECFS  wcodecfs binaries to compare (default: $BUILD/wcodecfs), e.g.
#           an old tree's and the current one's
# Every run: a fresh mount (-o timeout=3600) of the source, `os.walk` +
# `os.lstat` of every file (Python), then with -s: `find -type f -print0 |
# xargs -0 cat`. The daemon keeps the limits it inherits (ulimit -n).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

dirs=100 files=1000 bytes=0 runs=3
while getopts d:f:s:r: o; do
	case $o in
	d) dirs=$OPTARG ;; f) files=$OPTARG ;; s) bytes=$OPTARG ;; r) runs=$OPTARG ;;
	*) die "usage: bench-walk.sh [-d DIRS] [-f FILES] [-s BYTES] [-r RUNS] [WCODECFS...]" ;;
	esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || set -- "$WCODECFS"
for b in "$@"; do need_tool "$b" wcodecfs; done

W=$(mktemp -d /tmp/bench-walk.XXXXXX)
trap 'fusermount3 -u "$W/mnt" 2>/dev/null || true; rm -rf "$W"' EXIT
mkdir -p "$W/src" "$W/mnt"
"$PYTHON3" - "$W/src" "$dirs" "$files" "$bytes" <<'PY'
import os, sys
root, dirs, files, size = sys.argv[1], *map(int, sys.argv[2:])
blob = os.urandom(size)
for d in range(dirs):
    os.mkdir(os.path.join(root, "d%d" % d))
    for f in range(files):
        with open(os.path.join(root, "d%d" % d, "f%d" % f), "wb") as out:
            out.write(blob)
PY

machine_line
echo "source: $dirs directories x $files files of $bytes bytes; descriptor limit $(ulimit -n)"
echo
echo "| wcodecfs | run | answered | refused | walk s | read all s | daemon RSS bytes per file | descriptors |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for r in $(seq "$runs"); do
	for b in "$@"; do
		"$b" "$W/src" "$W/mnt" -o timeout=3600 2> "$W/log" || die "$b: $(cat "$W/log")"
		pid=$(pgrep -f "wcodecfs $W/src" | head -1)
		rss0=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status")
		read -r ok bad secs < <("$PYTHON3" - "$W/mnt" <<'PY'
import os, sys, time
ok = bad = 0
t = time.monotonic()
for dp, dn, fn in os.walk(sys.argv[1]):
    for f in fn:
        try:
            os.lstat(os.path.join(dp, f))
            ok += 1
        except OSError:
            bad += 1
print(ok, bad, "%.2f" % (time.monotonic() - t))
PY
)
		rss1=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status")
		fds=$(ls "/proc/$pid/fd" | wc -l)
		rd=-
		if [ "$bytes" -gt 0 ]; then
			t0=$(date +%s.%N)
			(cd "$W/mnt" && find . -type f -print0 | xargs -0 cat > /dev/null 2>&1) || true
			rd=$(echo "$(date +%s.%N) - $t0" | bc | sed 's/^\./0./' | cut -c1-5)
		fi
		fusermount3 -u "$W/mnt"
		echo "| $b | $r | $ok | $bad | $secs | $rd | $(( (rss1 - rss0) * 1024 / (ok + 1) )) | $fds |"
	done
done
