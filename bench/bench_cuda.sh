#!/bin/bash
# bench_cuda.sh - everything docs/BENCHMARKS.md reports, on a machine
# with a GPU: build with CUDA, run test_cuda plainly and under the four
# compute-sanitizer tools, the benchmark (16384- and 65536-symbol chunks),
# and an end-to-end pack/verify/unpack of a 2 GB BF16 file through the CLI.
# Usage, from a source checkout: bench/bench_cuda.sh [OUTDIR]
# Needs nvcc, compute-sanitizer, python3 with torch and safetensors.
set -u
out=${1:-/tmp/bench_cuda}
mkdir -p "$out"
cd "$(dirname "$0")/.."
(autoreconf -fi && ./configure --with-cuda --enable-werror) > "$out/configure.log" 2>&1 || { tail -20 "$out/configure.log"; exit 1; }
(make -j"$(nproc)" && make -j"$(nproc)" tests/test_cuda) > "$out/make.log" 2>&1 || { grep -B2 -A3 error "$out/make.log" | head -40; exit 1; }
export top_builddir=$PWD WCODEC_PLUGIN_DIR=$PWD/cuda/.libs
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
./libtool --mode=execute ./tests/test_cuda > "$out/test_cuda.log" 2>&1; echo "test_cuda rc=$?"
for tool in memcheck racecheck synccheck initcheck; do
	WCODEC_TEST_NO_FAULT=1 ./libtool --mode=execute compute-sanitizer --tool $tool --error-exitcode 9 \
		./tests/test_cuda > "$out/$tool.log" 2>&1
	echo "$tool rc=$? $(grep -E 'SUMMARY' "$out/$tool.log" | head -1)"
done
./bench/bench_cuda > "$out/bench.txt" 2>&1; echo "bench rc=$?"; grep -v '^wcodec: info' "$out/bench.txt"
./bench/bench_cuda --chunk 65536 > "$out/bench65536.txt" 2>&1; echo "bench --chunk 65536 rc=$?"
python3 - <<'PY' || exit 1
import torch
from safetensors.torch import save_file
g = torch.Generator().manual_seed(1)
t = {f"layer{i}.weight": (torch.randn(4096, 16384, generator=g) * 0.02).to(torch.bfloat16) for i in range(16)}
t["norm.weight"] = torch.ones(16384, dtype=torch.bfloat16)
t["embed.f32"] = torch.randn(1000, 4096, generator=g) * 0.05
save_file(t, "/tmp/bench_cuda_m.safetensors")
PY
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
s=$(date +%s%N); ./wcodec pack -q -f /tmp/bench_cuda_m.safetensors /tmp/bench_cuda_m.wcodec || exit 1; echo "pack: $(ms $s) ms"
./wcodec verify -q -b cpu /tmp/bench_cuda_m.wcodec > /dev/null
for b in cpu cuda; do
	s=$(date +%s%N); ./wcodec verify -q -b $b /tmp/bench_cuda_m.wcodec > /dev/null; echo "verify -b $b: rc=$? $(ms $s) ms"
	s=$(date +%s%N); ./wcodec unpack -q -f -b $b /tmp/bench_cuda_m.wcodec /tmp/bench_cuda_out.safetensors
	echo "unpack -b $b: rc=$? $(ms $s) ms"
	cmp /tmp/bench_cuda_m.safetensors /tmp/bench_cuda_out.safetensors && echo "unpack -b $b: byte-identical"
	rm -f /tmp/bench_cuda_out.safetensors
done
rm -f /tmp/bench_cuda_m.safetensors /tmp/bench_cuda_m.wcodec
