"""wcodec.packed (re-exported by wcodec.torch): a torch model whose large
weights stay packed, each decoded just before its module runs and dropped
after, with outputs bit-identical to the plain model's.

    from wcodec.torch import pack_module
    packed = pack_module(model)          # model now holds its weights packed
    logits = model(tokens)               # each Linear's weight decoded for its call
    packed.packed_bytes, packed.original_bytes
    packed.close()                       # the hooks and the packed file go

This is the reference path: the packed file lives on the host (the page
cache) and each module's weights are decoded by the library on every CPU,
or on a GPU model by the CUDA plugin's loader, into a tensor allocated for
that call (torch's caching allocator reuses the memory). Packing is
lossless (docs/FORMAT.md), so every decoded weight equals the original
byte for byte.
"""
import ctypes
import json
import os
import shutil
import struct
import tempfile

import torch as _torch

from . import _lib, _safe_open
from ._file import TensorFile

__all__ = ["pack_module", "PackedModule"]


class _PackOpts(ctypes.Structure):
    """wc_pack_opts (src/container/container.h)."""
    _fields_ = [("tile_size", ctypes.c_uint32), ("chunk_symbols", ctypes.c_uint32), ("threads", ctypes.c_uint),
                ("verify", ctypes.c_int), ("progress", ctypes.c_void_p), ("progress_ctx", ctypes.c_void_p),
                ("temp_file", ctypes.c_void_p), ("lossy_bits", ctypes.c_int), ("lossy_group", ctypes.c_uint32),
                ("lossy_select", ctypes.c_void_p), ("lossy_ctx", ctypes.c_void_p)]


_ST_DTYPES = {_torch.float32: "F32", _torch.float16: "F16", _torch.bfloat16: "BF16", _torch.float64: "F64",
              _torch.int8: "I8", _torch.uint8: "U8", _torch.int16: "I16", _torch.int32: "I32",
              _torch.int64: "I64", _torch.bool: "BOOL"}


def _write_safetensors(path, tensors):
    """tensors: list of (name, CPU contiguous tensor), written in the
    safetensors format (header JSON padded to 8 bytes, data in order)."""
    header, off = {}, 0
    for name, t in tensors:
        n = t.numel() * t.element_size()
        header[name] = {"dtype": _ST_DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for _, t in tensors:
            f.write(t.reshape(-1).view(_torch.uint8).numpy().tobytes() if t.numel() else b"")


def _pack(src, dst, threads=0):
    L = _lib.lib()
    L.wc_pack_safetensors.restype = ctypes.c_int
    L.wc_pack_safetensors.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(_PackOpts), ctypes.c_void_p]
    o = _PackOpts(threads=threads, verify=1)
    _lib.check(L.wc_pack_safetensors(os.fspath(src).encode(), os.fspath(dst).encode(), ctypes.byref(o), None))


class PackedModule:
    """The packed state of a model (pack_module's result): path (the
    .wcodec file), names (the packed parameters), packed_bytes and
    original_bytes (of those parameters). close() removes the hooks and,
    if pack_module made it, the file; the model is unusable after."""

    def __init__(self, model, path, owned_dir, entries):
        self.model, self.path, self._dir = model, path, owned_dir
        self.file = TensorFile(path)
        from .torch import _TorchFramework
        self._fw = _TorchFramework()
        self.names = sorted({name for _, _, name, _ in entries})
        self.original_bytes = sum(self.file.info(n).nbytes for n in self.names)
        self.packed_bytes = os.path.getsize(path)  # the whole file: payloads, index, header
        self._by_module = {}
        for mod, attr, name, dev in entries:
            self._by_module.setdefault(mod, []).append((attr, name, dev))
        self._hooks = []
        for mod in self._by_module:
            self._hooks.append(mod.register_forward_pre_hook(self._before))
            self._hooks.append(mod.register_forward_hook(self._after))

    def _before(self, mod, args):
        for attr, name, dev in self._by_module[mod]:
            info = self.file.info(name)
            d = self._fw.device(dev)
            t = self._fw.empty(info, info.shape, d)
            _safe_open._read(self._fw, [self.file], [(0, info.begin, info.nbytes, t)], d)
            mod._parameters[attr] = _torch.nn.Parameter(t, requires_grad=False)

    def _after(self, mod, args, out):
        for attr, name, dev in self._by_module[mod]:
            mod._parameters[attr] = _placeholder(self.file.info(name), dev)

    def close(self):
        for h in self._hooks:
            h.remove()
        self._hooks = []
        if getattr(self, "file", None) is not None:
            self.file.close()
            self.file = None
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass


def _placeholder(info, dev):
    from .torch import torch_dtype
    return _torch.nn.Parameter(_torch.empty(0, dtype=torch_dtype(info.dtype), device=dev), requires_grad=False)


def pack_module(model, path=None, min_bytes=1 << 16, threads=0):
    """Keep model's large weights packed: the weight of every nn.Linear and
    nn.Embedding and every other parameter of at least min_bytes bytes is
    packed losslessly into the .wcodec file `path` (default: a temporary
    file removed by close()) and replaced in its module by an empty
    placeholder; a forward pre-hook decodes it (every CPU, or the CUDA
    plugin for a parameter on a GPU) into a new tensor on its device before
    the module runs, and a forward hook drops it after. A parameter shared
    by several modules (tied weights) is packed once. For inference: the
    packed parameters do not train (requires_grad False), and the model's
    state_dict holds the placeholders. Returns a PackedModule. Errors:
    WcodecError (packing, or a damaged file when a module runs), TypeError
    (a dtype the packer does not take)."""
    seen, tensors, entries = {}, [], []
    for mname, mod in model.named_modules():
        for attr, p in list(mod.named_parameters(recurse=False)):
            if p is None or p.numel() == 0:
                continue
            big = p.numel() * p.element_size() >= min_bytes
            if not (big or (attr == "weight" and isinstance(mod, (_torch.nn.Linear, _torch.nn.Embedding)))):
                continue
            if p.dtype not in _ST_DTYPES:
                raise TypeError(f"{mname}.{attr}: dtype {p.dtype} is not packed")
            key = id(p)
            if key not in seen:
                seen[key] = f"{mname}.{attr}" if mname else attr
                tensors.append((seen[key], p.detach().to("cpu").contiguous()))
            entries.append((mod, attr, seen[key], p.device))
    owned = None
    if path is None:
        owned = tempfile.mkdtemp(prefix="wcodec-packed-")
        path = os.path.join(owned, "weights.wcodec")
    src = os.fspath(path) + ".in.safetensors"
    try:
        _write_safetensors(src, tensors)
        _pack(src, path, threads)
    except BaseException:
        if owned:
            shutil.rmtree(owned, ignore_errors=True)
        raise
    finally:
        if os.path.exists(src):
            os.remove(src)
    del tensors
    packed = PackedModule(model, os.fspath(path), owned, entries)
    for mod, attr, name, dev in entries:
        mod._parameters[attr] = _placeholder(packed.file.info(name), dev)
    return packed
