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
from . import _safe_open
from ._file import TensorFile, open_checkpoint_dir, open_files
from ._torch_framework import FW as _FW
from ._torch_framework import torch_dtype
from .packed import PackedModule, empty_weights, load_packed, pack_module
from .torch_images import QVQDataset, QVQLoader, load_images

__all__ = ["load_file", "safe_open", "load_checkpoint", "load", "load_images", "QVQDataset", "QVQLoader",
           "pack_module", "load_packed", "PackedModule", "empty_weights"]

def load_file(filename, device="cpu"):
    """All tensors of `filename` (.wcodec or .safetensors) as a dict name ->
    torch.Tensor on `device`, in the file's order: the same keys, dtypes,
    shapes and bytes as safetensors.torch.load_file of the original file.
    Raises WcodecError (the file is unreadable, malformed or damaged; the
    GPU is not usable), TypeError (a dtype torch lacks)."""
    with TensorFile(filename) as f:
        return _safe_open.load_tensors(_FW, [f], device)


def load_checkpoint(directory, device="cpu", process_group=None, tp_plan=None, exchange_bytes=None):
    """Every tensor of a model directory (sharded or not; an
    *.safetensors.index.json is honoured, its shards read from .wcodec
    files where `wcodec pack -u` packed them) as one dict, all shards read
    in one pipelined load.

    process_group (a torch.distributed ProcessGroup; every rank calls with
    the same arguments but its own device) loads across the ranks
    (wcodec.distributed): each rank gets every tensor, the ranks reading
    each byte of the packed files once between them and exchanging packed
    bytes. tp_plan {glob: "colwise" | "rowwise"} (fnmatch globs over tensor
    names; with no process_group the default group) gives rank r exactly
    `tensor.tensor_split(world_size, 0)[r]` of a colwise tensor and
    `tensor.tensor_split(world_size, -1)[r]` of a rowwise one; other tensors
    are replicated. exchange_bytes: payload bytes exchanged per round
    (default wcodec.distributed.EXCHANGE_BYTES, 64 MiB), which bounds the
    memory the load uses beyond the tensors (two rounds in flight with
    gloo: see wcodec.distributed).

    Raises FileNotFoundError (no checkpoint, a missing shard), KeyError (a
    tensor the index names is not in its shard), ValueError (a mode other
    than colwise/rowwise), WcodecError; with a process group, every rank
    raises what any rank raised, prefixed with "rank N: "."""
    if process_group is None and tp_plan is not None:
        import torch.distributed as dist
        if not dist.is_initialized():
            raise ValueError("tp_plan needs a process group: torch.distributed is not initialized")
        process_group = dist.group.WORLD
    files, err = [], None
    try:
        paths, weight_map = open_checkpoint_dir(directory)
        if process_group is None and weight_map is None and len(paths) > 1 and paths[0].startswith("s3://"):
            return _safe_open.load_objects(_FW, paths, device)  # opens overlapped with loads
        files = open_files(paths)
        if weight_map is not None:
            for name, path in weight_map.items():
                files[paths.index(path)].info(name)
    except Exception as e:
        if process_group is None:
            for f in files:
                f.close()
            raise
        err = e  # the other ranks must learn of it
    try:
        if process_group is None:
            return _safe_open.load_tensors(_FW, files, device)
        from . import distributed
        if err is not None:
            distributed.agree_failure(_FW, process_group, device, err)
        return distributed.load_tensors(_FW, files, [list(f.tensors) for f in files], device, process_group,
                                        tp_plan, exchange_bytes or distributed.EXCHANGE_BYTES)
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
