#!/usr/bin/env bash
# bench-ratio.sh - compression ratio of `wcodec pack` against `zstd -19` and
# the order-0 entropy bound, per model file and per dtype. Prints markdown
# on stdout (progress on stderr). A benchmark, not a test.
#
# Usage: bench-ratio.sh [-w WORKDIR] FILE_OR_DIR...
#   Every *.safetensors file given or found (recursively) in a directory is
#   measured: its size, `zstd -19` size and time (one thread, `zstd -19 -T1
#   -c`), `wcodec pack` size and time (default threads), and from `wcodec
#   info --json` of the packed file: the data-section ratio (tensor bytes /
#   coded tile payloads), the entropy bound (sum over tensor-planes of
#   order-0 entropy x symbols / 8) and both per dtype. Every packed file is
#   checked with `wcodec unpack` + cmp before its numbers count. With more
#   than one file, totals per file kind (F32, BF16, F16 by file name) follow.
# Environment: BUILD, WCODEC, PYTHON3 (see lib.sh).
set -euo pipefail
# shellcheck source=contrib/bench/lib.sh
. "$(dirname "$0")/lib.sh"

work=
while getopts "w:h" o; do
	case $o in
	w) work=$OPTARG ;;
	h) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || die "usage: bench-ratio.sh [-w WORKDIR] FILE_OR_DIR..."
need_tool "$WCODEC" WCODEC
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

now() { date +%s.%N; }
rows=$work/rows.tsv
: > "$rows"
for f in "${files[@]}"; do
	echo "$f ..." >&2
	b=$(basename "$f" .safetensors)
	t0=$(now); zs=$(zstd -19 -T1 -q -c "$f" | wc -c); t1=$(now)
	t2=$(now); "$WCODEC" pack "$f" "$work/$b.wcodec" >/dev/null; t3=$(now)
	"$WCODEC" unpack "$work/$b.wcodec" "$work/$b.check" >/dev/null
	cmp "$f" "$work/$b.check" || die "$f: wcodec unpack does not give the original back"
	rm -f "$work/$b.check"
	"$WCODEC" info --json "$work/$b.wcodec" > "$work/$b.json"
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$f" "$(stat -c %s "$f")" "$zs" \
		"$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')" "$(stat -c %s "$work/$b.wcodec")" \
		"$(awk -v a="$t2" -v b="$t3" 'BEGIN{print b-a}')" "$work/$b.json" >> "$rows"
done

echo "### Compression ratio"
echo
machine_line
echo
"$PYTHON3" "$bench_src/ratio_table.py" "$rows"
