"""The torch side of the loaders, shared by wcodec.torch, wcodec.packed and
wcodec.packed_cuda (which sit above it; it imports none of them): the
safetensors dtype names as torch dtypes, and the framework object through
which wcodec._safe_open allocates and addresses torch tensors."""
import torch as _torch

from . import _safe_open
from ._lib import WcodecError

_DTYPES = {
    "BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16", "U16": "uint16", "F16": "float16",
    "BF16": "bfloat16", "I32": "int32", "U32": "uint32", "F32": "float32", "I64": "int64",
    "U64": "uint64", "F64": "float64", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2",
    "F8_E8M0": "float8_e8m0fnu",  # F4, F6_*: no element of their own in torch or numpy
}


def torch_dtype(name):
    """The torch.dtype of a safetensors dtype name; TypeError if this torch
    has none (U16/U32/U64 need torch >= 2.3, F8_* >= 2.1)."""
    attr = _DTYPES.get(name)
    dt = getattr(_torch, attr, None) if attr else None
    if not isinstance(dt, _torch.dtype):
        raise TypeError(f"dtype {name} is not supported by torch {_torch.__version__}")
    return dt


class TorchFramework(_safe_open._Framework):
    name = "pt"

    def device(self, device):
        d = _torch.device(f"cuda:{device}" if isinstance(device, int) else device)
        if d.type == "cpu":
            return ("cpu", 0)
        if d.type != "cuda":
            raise ValueError(f"device {device!r}: wcodec loads to 'cpu' or 'cuda[:N]'")
        if not _torch.cuda.is_available():
            raise WcodecError("BACKEND", f"device {device!r}: torch sees no usable CUDA GPU")
        return ("cuda", d.index if d.index is not None else _torch.cuda.current_device())

    def empty(self, info, shape, device):
        dev = "cpu" if device[0] == "cpu" else f"cuda:{device[1]}"
        return _torch.empty(tuple(shape), dtype=torch_dtype(info.dtype), device=dev)

    def address(self, t):
        return t.data_ptr()

    def index(self, t, idx):
        return t[idx].contiguous()

    def from_numpy(self, a):
        return _torch.from_numpy(a)

    def before_device_write(self, device):
        # Memory torch freed on its stream may still be in use by queued
        # kernels there; the loader writes from streams of its own.
        _torch.cuda.current_stream(device[1]).synchronize()


FW = TorchFramework()
