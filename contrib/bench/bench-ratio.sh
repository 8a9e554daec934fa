#!/usr/bin/env bash
# bench-ratio.sh - compression ratio of `wcodec pack` against `zstd -19` and
# the order-0 entropy bound, per model file and per dtype. Prints markdown
# on stdout (progress on stderr). A benchmark, not a test.
#
# Usage: bench-ratio.sh [-z] [-w WORKDIR] FILE_OR_DIR...
#   Every *.safetensors file given or found (recursively) in a directory is
#   measured: its size, `zstd -19` size and time (one thread, `zstd -19 -T1
#   -c`), `wcodec pack` size and time (default threads), and from `wcodec
#   info --json` of the packed file: the data-section ratio (tensor bytes /
#   coded tile payloads), the entropy bound (sum over tensor-planes of
#   order-0 entropy x symbols / 8) and both per dtype. Every packed file is
#   checked with `wcodec unpack` + cmp before its numbers count. With more
#   than one file, totals per file kind (F32, BF16, F16 by file name) follow.
#   Times: zstd in CPU seconds (user+sys, one thread, robust to other load);
#   wcodec pack in wall and CPU seconds (it uses every CPU).
#   -z: only run zstd and keep its results in WORKDIR/zstd-cache (reused by
#       a later run with the same -w), e.g. while the build is not ready.
# Environment: BUILD, WCODEC, PYTHON3 (see lib.sh).
set -euo pipefail
# shellcheck source=contrib/bench/lib.sh
. "$(dirname "$0")/lib.sh"

work='' zstd_only=0
while getopts "w:zh" o; do
	case $o in
	w) work=$OPTARG ;;
	z) zstd_only=1 ;;
	h) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || die "usage: bench-ratio.sh [-z] [-w WORKDIR] FILE_OR_DIR..."
[ "$zstd_only" = 1 ] || need_tool "$WCODEC" WCODEC
command -v zstd >/dev/null || die "zstd not found"
if [ -z "$work" ]; then work=$(mktemp -d "${TMPDIR:-/tmp}/bench-ratio.XXXXXX"); trap 'rm -rf "$work"' EXIT; fi
mkdir -p "$work"

files=()
for a in "$@"; do
	if [ -d "$a" ]; then
		while IFS= read -r -d '' f; do files+=("$f"); done < <(find "$a" -name '*.safetensors' -print0 | sort -z)
	elif [ -f "$a" ]; then files+=("$a")
	else die "$a: no such file or directory"
	fi
done
[ ${#files[@]} -gt 0 ] || die "no .safetensors files found"

# timed OUT CMD...: run CMD with stdout to OUT; prints "wall_s cpu_s" (user+sys).
timed() {
	local out=$1; shift
	/usr/bin/time -f '%e %U %S' -o "$work/time.txt" "$@" > "$out"
	awk '{ printf "%s %.2f\n", $1, $2 + $3 }' "$work/time.txt"
}
rows=$work/rows.tsv
: > "$rows"
mkdir -p "$work/zstd-cache"
for f in "${files[@]}"; do
	echo "$f ..." >&2
	b=$(basename "$f" .safetensors)
	# zstd -19 is slow and independent of this project: its result is kept
	# in WORKDIR (keyed by name, size and mtime) and reused by later runs.
	key=$work/zstd-cache/$b.$(stat -c '%s.%Y' "$f")
	if [ ! -s "$key" ]; then
		read -r zw zc < <(timed "$work/$b.zst" zstd -19 -T1 -q -c "$f")
		echo "$(stat -c %s "$work/$b.zst") $zw $zc" > "$key"
		rm -f "$work/$b.zst"
	fi
	read -r zs zw zc < "$key"
	[ "$zstd_only" = 0 ] || continue
	read -r ww wc < <(timed /dev/null "$WCODEC" pack -f "$f" "$work/$b.wcodec")
	"$WCODEC" unpack -f "$work/$b.wcodec" "$work/$b.check" >/dev/null
	cmp "$f" "$work/$b.check" || die "$f: wcodec unpack does not give the original back"
	rm -f "$work/$b.check"
	"$WCODEC" info --json "$work/$b.wcodec" > "$work/$b.json"
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$f" "$(stat -c %s "$f")" "$zs" "$zw" "$zc" \
		"$(stat -c %s "$work/$b.wcodec")" "$ww" "$wc" "$work/$b.json" >> "$rows"
	rm -f "$work/$b.wcodec"
done
[ "$zstd_only" = 0 ] || { echo "zstd results cached in $work/zstd-cache" >&2; exit 0; }

echo "### Compression ratio"
echo
machine_line
echo
"$PYTHON3" "$bench_src/ratio_table.py" "$rows"
