#!/usr/bin/env bash
# Build from a clean tree and run every test. With --sanitizers, build with
# ASan + UBSan in build/asan and run `make check`; otherwise build with
# -Werror in build/ci and run `make distcheck` (which builds again from the
# tarball and runs `make check` there). With --cuda, build with the CUDA
# plugin in build/cuda and run `make check` (skipped when there is no nvcc).
# Prints "N passed, N failed, N skipped".
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
jobs=$(nproc)
[ -x configure ] || autoreconf -fi >/dev/null

summarize() {  # sum automake's test-suite.log counters
	local logs=("$@") pass=0 fail=0 skip=0 n
	for l in "${logs[@]}"; do
		[ -f "$l" ] || continue
		n=$(sed -n 's/^# PASS: *//p' "$l" | head -1); pass=$((pass + ${n:-0}))
		n=$(sed -n 's/^# FAIL: *//p' "$l" | head -1); fail=$((fail + ${n:-0}))
		n=$(sed -n 's/^# ERROR: *//p' "$l" | head -1); fail=$((fail + ${n:-0}))
		n=$(sed -n 's/^# SKIP: *//p' "$l" | head -1); skip=$((skip + ${n:-0}))
	done
	echo "$pass passed, $fail failed, $skip skipped"
}

if [ "${1:-}" = --cuda ]; then
	# A build with the CUDA plugin (nvcc needed, no GPU needed): every test
	# runs (the GPU ones skip without a device), and on a machine without a
	# usable GPU the "auto" backend must fall back to the CPU and say so.
	nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
	[ -x "$nvcc" ] || { echo "cuda: no nvcc, skipped"; exit 0; }
	nvcc=$(readlink -f "$nvcc")
	rm -rf build/cuda && mkdir -p build/cuda && cd build/cuda
	if ! "$top"/configure --with-cuda="$(dirname "$(dirname "$nvcc")")" --enable-werror >configure.out 2>&1; then
		# nvcc alone (no runtime headers or libcudart_static) cannot build
		# the plugin: say so and skip, as with no nvcc at all.
		if grep -q 'CUDA toolkit incomplete' configure.out; then
			echo "cuda: skipped: $(grep -o 'CUDA toolkit incomplete.*' configure.out)"
			exit 0
		fi
		cat configure.out; exit 1
	fi
	make -j"$jobs" >/dev/null
	rc=0; make -j"$jobs" check >check.out 2>&1 || rc=$?
	grep -E '^(PASS|FAIL|SKIP|ERROR|XFAIL|XPASS):' check.out || true
	[ $rc = 0 ] || cat test-suite.log
	if ! nvidia-smi >/dev/null 2>&1; then
		python3 "$top"/tests/gen_safetensors.py --profile weights --dtype BF16 --params 200000 w.safetensors
		./wcodec pack -q w.safetensors w.wcodec
		log=$(WCODEC_PLUGIN_DIR=$PWD/cuda/.libs ./wcodec -v verify --backend auto w.wcodec 2>&1) || rc=1
		echo "$log" | grep -q 'decode backend: cpu (CUDA unusable' ||
			{ echo "FAIL: auto did not fall back to the CPU with a log line: $log"; rc=1; }
		echo "cuda build without a GPU: $(echo "$log" | grep 'decode backend')"
	fi
	echo "cuda: $(summarize test-suite.log)"
	exit $rc
fi

if [ "${1:-}" = --sanitizers ]; then
	rm -rf build/asan && mkdir -p build/asan && cd build/asan
	"$top"/configure --enable-sanitizers --enable-werror >/dev/null
	make -j"$jobs" >/dev/null
	export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
	rc=0; make -j"$jobs" check >check.out 2>&1 || rc=$?
	grep -E '^(PASS|FAIL|SKIP|ERROR|XFAIL|XPASS):' check.out || true
	[ $rc = 0 ] || { cat test-suite.log; }
	echo "sanitizers: $(summarize test-suite.log)"
	exit $rc
fi

rm -rf build/ci && mkdir -p build/ci && cd build/ci
"$top"/configure --enable-werror >/dev/null
make -j"$jobs" >/dev/null
rc=0; make -j"$jobs" distcheck DISTCHECK_CONFIGURE_FLAGS=--enable-werror >check.out 2>&1 || rc=$?
grep -E '^(PASS|FAIL|SKIP|ERROR|XFAIL|XPASS):' check.out || true
log=$(find . -path '*/_build/*' -name test-suite.log | head -1)
[ $rc = 0 ] || { tail -50 check.out; [ -n "$log" ] && cat "$log"; }
summarize ${log:-check.out}
exit $rc
