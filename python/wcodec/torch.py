"""wcodec.torch: the safetensors.torch loading API over .wcodec files (and
plain safetensors files), decoding on every CPU or on the GPU.

    from wcodec.torch import load_file, safe_open, load_checkpoint
    sd = load_file("model.wcodec", device="cuda:0")

device: "cpu", "cuda", "cuda:N", an int N (GPU N) or a torch.device.
On a GPU device the tensors are allocated with torch (its caching allocator)
and filled by the CUDA plugin's pipelined loader (cuda/loader.c): payloads
read by one thread per CPU into a ring of page-locked buffers (128 MiB),
checksummed, uploaded on several streams and decoded on the GPU straight
into the tensors. Errors: WcodecError (a subclass of OSError; code
"CORRUPT" for a damaged tile, "BACKEND" when the GPU or the plugin is not
usable), KeyError for a missing tensor, TypeError for a dtype this torch
lacks.
"""
import torch as _torch

from . import _safe_open
from ._file import TensorFile, open_checkpoint_dir
from .torch_images import QVQDataset, QVQLoader, load_images

__all__ = ["load_file", "safe_open", "load_checkpoint", "load", "load_images", "QVQDataset", "QVQLoader",
           "pack_module", "load_packed", "PackedModule", "empty_weights"]

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


class _TorchFramework(_safe_open._Framework):
    name = "pt"

    def device(self, device):
        d = _torch.device(f"cuda:{device}" if isinstance(device, int) else device)
        if d.type == "cpu":
            return ("cpu", 0)
        if d.type != "cuda":
            raise ValueError(f"device {device!r}: wcodec loads to 'cpu' or 'cuda[:N]'")
        if not _torch.cuda.is_available():
            from ._lib import WcodecError
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


_FW = _TorchFramework()


def load_file(filename, device="cpu"):
    """All tensors of `filename` (.wcodec or .safetensors) as a dict name ->
    torch.Tensor on `device`, in the file's order: the same keys, dtypes,
    shapes and bytes as safetensors.torch.load_file of the original file.
    Raises WcodecError (the file is unreadable, malformed or damaged; the
    GPU is not usable), TypeError (a dtype torch lacks)."""
    with TensorFile(filename) as f:
        return _safe_open.load_tensors(_FW, [f], device)


def load_checkpoint(directory, device="cpu"):
    """Every tensor of a model directory (sharded or not; an
    *.safetensors.index.json is honoured, its shards read from .wcodec
    files where `wcodec pack -u` packed them) as one dict, all shards read
    in one pipelined load. Raises FileNotFoundError (no checkpoint, a
    missing shard), KeyError (a tensor the index names is not in its shard),
    WcodecError."""
    paths, weight_map = open_checkpoint_dir(directory)
    files = [TensorFile(p) for p in paths]
    try:
        if weight_map is not None:
            for name, path in weight_map.items():
                files[paths.index(path)].info(name)
        return _safe_open.load_tensors(_FW, files, device)
    finally:
        for f in files:
            f.close()


def load(data, device="cpu"):
    """safetensors.torch.load: tensors from the bytes of a whole file
    (.wcodec or safetensors), through a temporary file."""
    import os
    import tempfile
    fd, tmp = tempfile.mkstemp(suffix=".wcodec")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        return load_file(tmp, device=device)
    finally:
        os.unlink(tmp)


def safe_open(filename, framework="pt", device="cpu"):
    """safetensors.safe_open over a .wcodec or safetensors file:
    keys(), offset_keys(), metadata(), get_tensor(name), get_slice(name)
    (whose indexing decodes only the tiles holding the first-dimension rows
    it touches). framework "pt"/"torch" gives torch tensors, "np"/"numpy"
    numpy arrays (device "cpu" only)."""
    if framework in ("np", "numpy"):
        from . import numpy as _np
        return _np.safe_open(filename, framework="np", device=device)
    if framework not in ("pt", "torch"):
        raise ValueError(f"framework {framework!r}: wcodec supports 'pt' and 'np'")
    return _safe_open.SafeOpen(_FW, filename, device)


from .packed import PackedModule, empty_weights, load_packed, pack_module  # noqa: E402  (packed.py imports this module's framework)
