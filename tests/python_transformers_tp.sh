#!/bin/sh
# wcodec.transformers.from_pretrained(..., tp_plan="auto") against
# transformers' own tensor-parallel from_pretrained of the original, 2 CPU
# ranks (gloo) under torch.distributed.run, a small LLaMA-shaped model:
# every rank's parameter shards and the logits of a fixed input equal
# (bench/bench_tp_transformers.py, which exits 1 otherwise; its timings are
# not checked here). Skips (77) without torch with gloo or transformers 5
# (transformers.distributed).
: "${PYTHON3:=python3}" "${top_srcdir:=.}" "${top_builddir:=.}" "${WCODEC:=$top_builddir/wcodec}"
if ! "$PYTHON3" -c 'import torch.distributed as d, transformers.distributed; assert d.is_gloo_available()' \
	2>/dev/null; then
	echo "SKIP: $PYTHON3 has no torch with gloo, or no transformers 5 (transformers.distributed)"
	exit 77
fi
. "$top_srcdir/tests/python_env.sh"
T=$(mktemp -d "${TMPDIR:-/tmp}/wc-tp.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
mkdir "$T/bin" && ln -s "$(cd "$(dirname "$WCODEC")" && pwd)/$(basename "$WCODEC")" "$T/bin/wcodec"
PATH="$T/bin:$PATH" CUDA_VISIBLE_DEVICES= "$PYTHON3" -m torch.distributed.run --nproc-per-node 2 \
	--master-port "$("$PYTHON3" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')" \
	"$top_srcdir/bench/bench_tp_transformers.py" "$T/work" --hidden 256 --layers 2 --inter 512 --heads 8 \
	--kv-heads 4 --vocab 1000 --repeat 1 >"$T/out" 2>"$T/err"
rc=$?
grep '^{' "$T/out"
[ $rc = 0 ] || { tail -20 "$T/err"; echo "FAIL: shards or logits differ, or a rank failed (exit $rc)"; exit 1; }
[ "$(grep -c '"logits_equal": true' "$T/out")" = 2 ] || { echo "FAIL: not every rank reported"; exit 1; }
echo "PASS: 2 ranks: shards and logits equal to transformers' own tensor-parallel load"
