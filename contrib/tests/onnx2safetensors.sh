#!/bin/sh
# Test of contrib/onnx2safetensors.py: a small ONNX graph built with
# onnx.helper, its initializers of every type safetensors has (raw_data and
# typed fields alike), converted; every tensor's dtype, shape and bytes
# checked against the arrays it was made from, the header against the
# safetensors layout; an initializer of a type safetensors lacks refused.
# Skips (77) when $PYTHON3 has no onnx module (Debian: python3-onnx).
set -eu
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${PYTHON3:=python3}"
if ! "$PYTHON3" -c 'import onnx, numpy' 2>/dev/null; then
	echo "SKIP: $PYTHON3 has no onnx module"
	exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/onnx2st.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
"$PYTHON3" - "$top_srcdir/contrib/onnx2safetensors.py" "$work" <<'PY'
import json, os, struct, subprocess, sys
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto
conv, work = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(5)
arrays = {
    "conv.weight": rng.standard_normal((8, 3, 3, 3)).astype(np.float32),
    "conv.half": rng.standard_normal((5, 7)).astype(np.float16),
    "q.u8": rng.integers(0, 256, (33,), dtype=np.uint8),
    "shape.i64": np.array([1, -1, 4096], dtype=np.int64),
    "idx.i32": rng.integers(-9, 9, (2, 2), dtype=np.int32),
    "mask.bool": np.array([True, False, True]),
    "scalar.f64": np.array(2.5, dtype=np.float64),
    "empty.f32": np.zeros((0, 4), dtype=np.float32),
}
inits = [numpy_helper.from_array(a, name) for name, a in arrays.items()]
# one initializer in the typed field instead of raw_data
inits.append(helper.make_tensor("typed.f32", TensorProto.FLOAT, [3], [1.0, -2.0, 3.5]))
arrays["typed.f32"] = np.array([1.0, -2.0, 3.5], dtype=np.float32)
graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])], initializer=inits)
model = os.path.join(work, "m.onnx")
onnx.save(helper.make_model(graph), model)
out = os.path.join(work, "m.safetensors")
subprocess.run([sys.executable, conv, model, out], check=True, stdout=subprocess.DEVNULL)
blob = open(out, "rb").read()
(n,) = struct.unpack_from("<Q", blob)
assert n % 8 == 0, n
hdr = json.loads(blob[8:8 + n])
meta = hdr.pop("__metadata__")
assert meta["format"] == "onnx", meta
names = {"float32": "F32", "float16": "F16", "uint8": "U8", "int64": "I64", "int32": "I32", "bool": "BOOL",
         "float64": "F64"}
off = 0
for name, a in arrays.items():
    t = hdr[name]
    assert t["dtype"] == names[str(a.dtype)] and t["shape"] == list(a.shape), (name, t)
    b, e = t["data_offsets"]
    assert b == off, (name, b, off)
    assert blob[8 + n + b: 8 + n + e] == a.astype(a.dtype.newbyteorder("<")).tobytes(), name
    off = e
assert 8 + n + off == len(blob)
# a string initializer has no safetensors dtype
bad = helper.make_graph([], "g", [], [], initializer=[helper.make_tensor("s", TensorProto.STRING, [1], [b"x"])])
onnx.save(helper.make_model(bad), os.path.join(work, "bad.onnx"))
r = subprocess.run([sys.executable, conv, os.path.join(work, "bad.onnx"), os.path.join(work, "bad.safetensors")],
                   capture_output=True, text=True)
assert r.returncode != 0 and "safetensors lacks" in r.stderr, r
assert not os.path.exists(os.path.join(work, "bad.safetensors"))
print("PASS: onnx2safetensors (%d tensors)" % len(arrays))
PY
