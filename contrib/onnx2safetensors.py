#!/usr/bin/env python3
"""onnx2safetensors.py - the weights of an ONNX model as a safetensors file.

Usage: onnx2safetensors.py MODEL.onnx OUT.safetensors

Every initializer of the model's graph (ONNX's TensorProto: its name, data
type and dims; onnx.numpy_helper.to_array decodes raw_data and the typed
fields alike) becomes one tensor of the same name, dtype and shape, bytes
unchanged (little-endian), laid out as the safetensors format wants
(github.com/huggingface/safetensors, "Format": u64 LE header length, JSON
header padded with spaces to 8 bytes, contiguous data in header order),
with "__metadata__" naming the source model. Written to a temporary file
and renamed. Needs the onnx package (Debian: python3-onnx) and numpy.
Initializers stored in external data files, and string or complex tensors,
are refused with a message.
"""
import json
import os
import struct
import sys
import tempfile

import numpy as np

DTYPES = {np.dtype(k): v for k, v in (
    ("float64", "F64"), ("float32", "F32"), ("float16", "F16"), ("int64", "I64"), ("int32", "I32"),
    ("int16", "I16"), ("int8", "I8"), ("uint64", "U64"), ("uint32", "U32"), ("uint16", "U16"),
    ("uint8", "U8"), ("bool", "BOOL"))}


def convert(model_path, out_path):
    """Write the initializers of model_path to out_path; returns (tensors, bytes)."""
    import onnx
    from onnx import numpy_helper
    model = onnx.load(model_path, load_external_data=False)
    header, blobs, off = {}, [], 0
    for t in model.graph.initializer:
        if t.data_location == onnx.TensorProto.EXTERNAL:
            sys.exit(f"{model_path}: initializer {t.name!r} is stored in an external file")
        a = numpy_helper.to_array(t)
        dtype = DTYPES.get(a.dtype)
        if dtype is None:
            sys.exit(f"{model_path}: initializer {t.name!r} has data type {a.dtype}, which safetensors lacks")
        if t.name in header:
            sys.exit(f"{model_path}: two initializers are named {t.name!r}")
        raw = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
        header[t.name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    header["__metadata__"] = {"format": "onnx", "source": os.path.basename(model_path)}
    js = json.dumps(header, separators=(",", ":")).encode()
    js += b" " * (-len(js) % 8)
    d = os.path.dirname(os.path.abspath(out_path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=os.path.basename(out_path) + ".tmp.")
    umask = os.umask(0)
    os.umask(umask)
    os.fchmod(fd, 0o666 & ~umask)  # mkstemp's 0600 is not what a converter should leave
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(struct.pack("<Q", len(js)) + js)
            for b in blobs:
                f.write(b)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, out_path)
    except BaseException:
        os.unlink(tmp)
        raise
    return len(blobs), off


def main(argv):
    if len(argv) != 3:
        sys.exit("usage: onnx2safetensors.py MODEL.onnx OUT.safetensors")
    n, nbytes = convert(argv[1], argv[2])
    print(f"{argv[2]}: {n} tensors, {nbytes} bytes")


if __name__ == "__main__":
    main(sys.argv)
