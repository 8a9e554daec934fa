"""wcodec.numpy: the safetensors.numpy loading API over .wcodec files (and
plain safetensors files), decoding on every CPU; numpy is the only
dependency.

dtypes numpy lacks come back as their raw bits: BF16 as numpy.uint16 (the
upper 16 bits of the float32 with the same value: `(a.astype(np.uint32) <<
16).view(np.float32)` widens it exactly), F8_E4M3, F8_E5M2 and F8_E8M0 as
numpy.uint8. Errors: WcodecError (code "CORRUPT" for a damaged tile, "IO",
"FORMAT"), KeyError for a missing tensor.
"""
import numpy as _np

from . import _safe_open
from ._file import TensorFile

__all__ = ["load_file", "safe_open", "numpy_dtype"]

_DTYPES = {
    "BOOL": _np.bool_, "U8": _np.uint8, "I8": _np.int8, "I16": _np.int16, "U16": _np.uint16,
    "F16": _np.float16, "BF16": _np.uint16, "I32": _np.int32, "U32": _np.uint32, "F32": _np.float32,
    "I64": _np.int64, "U64": _np.uint64, "F64": _np.float64, "F8_E4M3": _np.uint8, "F8_E5M2": _np.uint8,
    "F8_E8M0": _np.uint8,
}


def numpy_dtype(name):
    """The numpy dtype (little-endian) a safetensors dtype is returned as."""
    try:
        return _np.dtype(_DTYPES[name]).newbyteorder("<")
    except KeyError:
        raise TypeError(f"dtype {name} has no numpy equivalent") from None


class _NumpyFramework(_safe_open._Framework):
    name = "np"

    def device(self, device):
        if str(device) != "cpu":
            raise ValueError(f"device {device!r}: numpy arrays live on the CPU (use wcodec.torch for GPUs)")
        return ("cpu", 0)

    def empty(self, info, shape, device):
        return _np.empty(tuple(shape), dtype=numpy_dtype(info.dtype))

    def address(self, a):
        return a.ctypes.data

    def index(self, a, idx):
        return _np.array(a[idx], copy=True, order="C")  # keeps 0-d results 0-d


_FW = _NumpyFramework()


def load_file(filename):
    """All tensors of `filename` (.wcodec or .safetensors) as a dict name ->
    numpy.ndarray (see the module's note on BF16 and F8), in the file's
    order. Raises WcodecError, TypeError (an unknown dtype)."""
    with TensorFile(filename) as f:
        return _safe_open.load_tensors(_FW, [f], "cpu")


def safe_open(filename, framework="np", device="cpu"):
    """safetensors.safe_open returning numpy arrays (see wcodec.torch.safe_open)."""
    if framework not in ("np", "numpy"):
        raise ValueError(f"framework {framework!r}: wcodec.numpy gives 'np' arrays")
    return _safe_open.SafeOpen(_FW, filename, device)
