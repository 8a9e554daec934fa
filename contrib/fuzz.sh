#!/usr/bin/env bash
# contrib/fuzz.sh [-t SECONDS] [TARGET...] - open-ended fuzzing of the
# readers of untrusted bytes with clang's libFuzzer, AddressSanitizer and
# UndefinedBehaviorSanitizer.
#
# Targets (tests/fuzz/fuzz_TARGET.c; each states the properties it checks):
#   tile         the tile decoder: round trips, damaged payloads, rANS paths
#                and part decodes agreeing
#   wcodec       the .wcodec reader, checksums made right after mutation
#   qvq          the .qvq reader and its files, likewise
#   safetensors  the safetensors parser, and pack + read back of what it accepts
#   image        the PNG, JPEG and PPM readers of pack-images, and the resize
# Builds in build/fuzz (configure CC=clang), runs each target for SECONDS
# (default 60) from tests/fuzz/corpus/TARGET, keeps the grown corpus in
# build/fuzz/corpus/TARGET and any failing input as build/fuzz/crash-TARGET-*.
# Exit status 1 if any target failed. make check replays the committed seeds
# (tests/fuzz_corpus.sh); add a failing input there once it is fixed.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
secs=60
while getopts t: opt; do
	case $opt in
	t) secs=$OPTARG ;;
	*) sed -n '2,21s/^# \{0,1\}//p' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
targets=${*:-tile wcodec qvq safetensors image}
command -v clang >/dev/null || { echo "fuzz.sh: clang is needed (libFuzzer)"; exit 2; }

san="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
mkdir -p "$top/build/fuzz" && cd "$top/build/fuzz"
[ -x "$top/configure" ] || (cd "$top" && autoreconf -fi >/dev/null)
[ -f Makefile ] || "$top/configure" CC=clang --disable-shared \
	CFLAGS="-g -O1 -fsanitize=fuzzer-no-link $san" >configure.out
make -j"$(nproc)" libwcodec.la >/dev/null
var() { sed -n "s/^$1 = //p" Makefile; }
libs="$(var ZSTD_LIBS) $(var JANSSON_LIBS) $(var XXHASH_LIBS) $(var PNG_LIBS) $(var JPEG_LIBS) $(var CURL_LIBS) $(var INIH_LIBS) $(var EXPAT_LIBS) -lm -pthread"
cflags="$(var ZSTD_CFLAGS) $(var JANSSON_CFLAGS) $(var XXHASH_CFLAGS)"

rc=0
for t in $targets; do
	src=$top/tests/fuzz/fuzz_$t.c
	[ -f "$src" ] || { echo "fuzz.sh: no target $t"; exit 2; }
	# shellcheck disable=SC2086
	clang -std=c11 -g -O1 -D_GNU_SOURCE -fsanitize=fuzzer $san -I"$top/src" -I"$top/tests" -I. $cflags \
		"$src" .libs/libwcodec.a $libs -o "fuzz_$t"
	mkdir -p "corpus/$t"
	echo "== fuzz_$t, $secs s"
	# One allocation over 2 GiB is a finding; the process as a whole may
	# grow past that (ASan keeps freed memory: fuzz_image peaked at 1.4-1.7
	# GiB in two minutes), so its limit is 4 GiB, with a smaller quarantine.
	if ! ASAN_OPTIONS=${ASAN_OPTIONS:-quarantine_size_mb=64} "./fuzz_$t" -max_total_time="$secs" -timeout=20 \
		-rss_limit_mb=4096 -malloc_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="crash-$t-" "corpus/$t" "$top/tests/fuzz/corpus/$t" >"fuzz_$t.log" 2>&1; then
		rc=1
		tail -40 "fuzz_$t.log"
	fi
	grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb)|DONE' "fuzz_$t.log" | tr '\n' ' '
	echo
done
exit $rc
