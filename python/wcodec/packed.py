"""wcodec.packed (re-exported by wcodec.torch): a torch model whose large
weights stay packed, each decoded just before its module runs and dropped
after, with outputs bit-identical to the plain model's.

    from wcodec.torch import pack_module
    packed = pack_module(model)          # model now holds its weights packed
    logits = model(tokens)               # each Linear's weight decoded for its call
    packed.packed_bytes, packed.original_bytes
    packed.close()                       # the hooks and the packed file go

On a GPU model with the CUDA plugin the packed tiles live in GPU memory
and each unit is decoded there (wcodec.packed_cuda). Otherwise, the
reference path: the packed file lives on the host (the page cache) and each
module's weights are decoded by the library on every CPU, or by the CUDA
plugin's loader, into a tensor allocated for that call (torch's caching
allocator reuses the memory). Packing is
lossless (docs/FORMAT.md), so every decoded weight equals the original
byte for byte.
"""
import concurrent.futures as _futures
import contextlib
import ctypes
import json
import os
import shutil
import struct
import tempfile

import torch as _torch

from . import _lib, _safe_open
from ._file import TensorFile
from ._torch_framework import TorchFramework, torch_dtype

__all__ = ["pack_module", "load_packed", "PackedModule", "empty_weights"]


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


# rANS chunk (symbols) of weights that will be decoded from GPU memory: a
# block's decode is a few hundred tiles, and shorter chunks spread it over
# more warps (a 13B-shaped block at 1,123 GB/s against 940 with the file
# default of 65536; docs/BENCHMARKS.md, "Models with packed weights on the GPU")
GPU_CHUNK = 16384


def _pack(src, dst, threads=0, chunk=0):
    L = _lib.lib()
    o = _lib.PackOpts(chunk_symbols=chunk, threads=threads, verify=1)
    _lib.check(L.wc_pack_safetensors(os.fspath(src).encode(), os.fspath(dst).encode(), ctypes.byref(o), None))


class PackedModule:
    """The packed state of a model (pack_module's and load_packed's
    result): path (the .wcodec file or directory), names (the packed
    parameters), packed_bytes (of the files) and original_bytes (of those
    parameters), max_live (the most units, blocks or lone modules, whose
    weights were decoded at once), device_units (the packed_cuda.DeviceUnits
    holding the tiles in GPU memory, or None). close() removes the hooks and, if
    pack_module made it, the file; the model is unusable after."""

    def __init__(self, model, path, owned_dir, files, units, blocks=(), device_units=None):
        """files: open TensorFiles; units: [(root module, [(module, attr,
        name, device, file)])], file an index into files; device_units: a
        packed_cuda.DeviceUnits holding the units' tiles on the GPU, or
        None (decoded by the loaders from the file)."""
        self.model, self.path, self._dir, self.files = model, path, owned_dir, files
        self.device_units = device_units
        self._fw = TorchFramework()
        self.names = sorted({e[2] for _, entries in units for e in entries})
        where = {e[2]: files[e[4]] for _, entries in units for e in entries}
        self.original_bytes = sum(where[n].info(n).nbytes for n in self.names)
        self.packed_bytes = sum(os.path.getsize(f.path) for f in files)  # payloads, index, header
        self._units = {root: entries for root, entries in units}
        # each block's successor, decoded ahead while the block runs
        roots = [b for b in blocks if b in self._units]
        self._next = {a: b for a, b in zip(roots, roots[1:])}
        self._pending, self._live, self.max_live = {}, 0, 0
        self._pool = _futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="wcodec-packed")
        self._hooks = []
        for root in self._units:
            self._hooks.append(root.register_forward_pre_hook(self._before))
            self._hooks.append(root.register_forward_hook(self._after))

    def _decode(self, root):
        """The unit's weights: [(module, attr, tensor)], in one loader call
        per device (its tiles decoded in parallel)."""
        out, by_dev = [], {}
        for mod, attr, name, dev, fi in self._units[root]:
            info = self.files[fi].info(name)
            d = self._fw.device(dev)
            t = self._fw.empty(info, info.shape, d)
            out.append((mod, attr, t))
            by_dev.setdefault(d, []).append((fi, info.begin, info.nbytes, t))
        for d, items in by_dev.items():
            _safe_open._read(self._fw, self.files, items, d)
        return out

    def _count(self, k):
        self._live += k
        self.max_live = max(self.max_live, self._live + len(self._pending))

    def _before(self, root, args):
        if self.device_units is not None:
            self.device_units.before(root)
            self._count(1)
            return
        f = self._pending.pop(root, None)
        got = f.result() if f is not None else self._decode(root)
        self._count(1)
        for mod, attr, t in got:
            mod._parameters[attr] = _torch.nn.Parameter(t, requires_grad=False)
        nxt = self._next.get(root)
        if nxt is not None and nxt not in self._pending:
            self._pending[nxt] = self._pool.submit(self._decode, nxt)
            self._count(0)

    def _after(self, root, args, out):
        if self.device_units is not None:
            self.device_units.after(root)
            self._count(-1)
            return
        for mod, attr, name, dev, fi in self._units[root]:
            mod._parameters[attr] = _placeholder(self.files[fi].info(name), dev)
        self._count(-1)

    def close(self):
        for h in self._hooks:
            h.remove()
        self._hooks = []
        if getattr(self, "_pool", None) is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        self._pending = {}
        if getattr(self, "device_units", None) is not None:
            self.device_units.close()
            self.device_units = None
        for f in getattr(self, "files", None) or ():
            f.close()
        self.files = []
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass


def _placeholder(info, dev):
    return _torch.nn.Parameter(_torch.empty(0, dtype=torch_dtype(info.dtype), device=dev), requires_grad=False)


def pack_module(model, path=None, min_bytes=1 << 16, threads=0, blocks=None, resident=None, check_decoded=False):
    """Keep model's large weights packed: the weight of every nn.Linear and
    nn.Embedding and every other parameter of at least min_bytes bytes is
    packed losslessly into the .wcodec file `path` (default: a temporary
    file removed by close()) and replaced in its module by an empty
    placeholder; a forward pre-hook decodes it (every CPU, or the CUDA
    plugin for a parameter on a GPU) into a new tensor on its device before
    the module runs, and a forward hook drops it after. blocks: modules of
    the model run in this order (a transformer's layers, say): each one's
    weights are decoded together in one loader call before it runs, and the
    next block's on a background thread while it runs, so that at most two
    blocks' weights are decoded at once; weights outside blocks are decoded
    per module. A parameter shared by several modules (tied weights) is
    packed once. resident: on a model on one GPU, None (the default) or
    True keeps the packed tiles in GPU memory and decodes each unit there
    (wcodec.packed_cuda: two scratch buffers of the largest unit, the next
    unit decoded on a second stream; True fails without the CUDA plugin,
    None then falls back to the file; the file is then packed in rANS
    chunks of GPU_CHUNK symbols, which the GPU decodes faster), False
    decodes from the file. With the tiles on the GPU, every payload's
    checksum (chash) is checked as it is read and every decode runs the rANS
    stream checks (docs/FORMAT.md 4), as load_checkpoint does;
    check_decoded=True also decodes each unit once at load and checks every
    tile's bytes against their checksum (dhash) on the host, as `wcodec
    verify` does (a copy of all the decoded weights to the host: 0.4 s more
    for a 7B model). For inference: the packed parameters do not train
    (requires_grad False), and the model's state_dict holds the
    placeholders. Returns a PackedModule. Errors: WcodecError (packing, or a
    damaged file when a module runs), TypeError (a dtype the packer does
    not take), ValueError (a block given twice, inside another, or not a
    module of the model)."""
    blocks, owner = _blocks_of(model, blocks)
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
            entries.append((mod, attr, seen[key], p.device, 0))
    owned = None
    if path is None:
        owned = tempfile.mkdtemp(prefix="wcodec-packed-")
        path = os.path.join(owned, "weights.wcodec")
    src = os.fspath(path) + ".in.safetensors"
    try:
        _write_safetensors(src, tensors)
        _pack(src, path, threads, GPU_CHUNK if resident is not False and _one_gpu(entries) else 0)
    except BaseException:
        if owned:
            shutil.rmtree(owned, ignore_errors=True)
        raise
    finally:
        if os.path.exists(src):
            os.remove(src)
    del tensors
    return _attach(model, os.fspath(path), owned, [TensorFile(path)], entries, blocks, owner, resident,
                   check_decoded)


def _blocks_of(model, blocks):
    """blocks as a list, and each module of them -> its block."""
    blocks = list(blocks or ())
    owner, mods = {}, set(model.modules())
    for b in blocks:
        if b not in mods:
            raise ValueError(f"block {type(b).__name__} is not a module of the model")
        for m in b.modules():
            if m in owner:
                raise ValueError("a block is given twice, or lies inside another")
            owner[m] = b
    return blocks, owner


def _one_gpu(entries):
    """The GPU every entry's parameter lives on, or None (none, several
    devices, or the CPU): where the units' tiles can stay resident."""
    devs = {_torch.device(e[3]) for e in entries}
    dev = next(iter(devs)) if len(devs) == 1 else None
    return dev if dev is not None and dev.type == "cuda" else None


def _attach(model, path, owned, files, entries, blocks, owner, resident, check_decoded):
    """Group entries into units (blocks, lone modules), keep their tiles on
    the GPU if asked and possible, hook them, and put the placeholders in."""
    units = {}
    for e in entries:
        units.setdefault(owner.get(e[0], e[0]), []).append(e)
    lone = [(r, es) for r, es in units.items() if r not in owner]  # modules outside every block
    ulist = [(b, units[b]) for b in blocks if b in units] + lone
    dev = _one_gpu(entries)
    if resident and dev is None:
        raise ValueError("resident=True needs every packed parameter on one GPU")
    du = None
    if dev is not None and resident is not False:
        from ._lib import WcodecError
        from .packed_cuda import DeviceUnits
        try:
            du = DeviceUnits(files, ulist, dev, order=blocks, verify=check_decoded)
        except WcodecError as e:
            if resident or e.code != "BACKEND":
                raise
    packed = PackedModule(model, path, owned, files, ulist, blocks, du)
    for mod, attr, name, dev, fi in entries:
        mod._parameters[attr] = _placeholder(files[fi].info(name), dev)
    return packed


@contextlib.contextmanager
def empty_weights():
    """Within it, modules built put their parameters on the meta device (no
    memory, no initialisation) while their buffers (a rotary embedding's
    table, say, which no checkpoint holds) are made as usual: build a model
    under it, then give it its weights with load_packed (or
    load_state_dict(..., assign=True)). Parameters are made by the module
    (uninitialised torch.empty) and moved to the meta device as each is
    registered (torch.nn.Module.register_parameter, patched for the
    duration; not thread-safe)."""
    orig = _torch.nn.Module.register_parameter

    def register(module, name, param):
        orig(module, name, param)
        if param is not None and not param.is_meta:
            module._parameters[name] = type(param)(param.to("meta"), requires_grad=param.requires_grad)

    _torch.nn.Module.register_parameter = register
    try:
        yield
    finally:
        _torch.nn.Module.register_parameter = orig


def load_packed(model, source, device="cpu", min_bytes=1 << 16, blocks=None, resident=None, check_decoded=False):
    """Attach a packed checkpoint to a model without unpacking it: source is
    a .wcodec (or safetensors) file or a model directory (shards, an
    *.safetensors.index.json honoured, as load_checkpoint). Each parameter
    of the model is looked up by its name (a tied parameter by any of its
    names); the weight of every nn.Linear and nn.Embedding and every other
    parameter of at least min_bytes bytes stays packed and is decoded on
    `device` around each call of its module (or block), as pack_module
    does; the other parameters, and the buffers the checkpoint holds, are
    loaded onto `device` now. Build the model on the CPU or the meta device
    (buffers the checkpoint lacks keep the values the model gave them and
    move to `device`; under empty_weights() building takes no memory for
    the parameters).
    resident, check_decoded: as pack_module's, for device "cuda" or "cuda:N"
    (the tiles of the packed parameters in GPU memory; files packed
    with `wcodec pack --chunk 16384` (GPU_CHUNK) decode faster there).
    Returns a PackedModule. Errors: KeyError (a parameter the checkpoint
    lacks), ValueError (shape or dtype differs; a buffer on the meta device
    that the checkpoint lacks; blocks as pack_module), FileNotFoundError,
    WcodecError."""
    from ._file import open_checkpoint_dir
    blocks, owner = _blocks_of(model, blocks)
    source = os.fspath(source)
    paths = open_checkpoint_dir(source)[0] if os.path.isdir(source) else [source]
    files = [TensorFile(p) for p in paths]
    try:
        at = {n: i for i, f in enumerate(files) for n in f.tensors}
        names = {}
        for mname, mod in model.named_modules():
            for attr, p in list(mod.named_parameters(recurse=False)):
                names.setdefault(id(p), []).append(f"{mname}.{attr}" if mname else attr)
        fw, dev, entries, now = TorchFramework(), _torch.device(device), [], []
        d = fw.device(dev)
        for mname, mod in model.named_modules():
            for attr, p in list(mod.named_parameters(recurse=False)) + list(mod.named_buffers(recurse=False)):
                full = f"{mname}.{attr}" if mname else attr
                if attr in mod._buffers:
                    if full in at:
                        now.append((mod, attr, full, at[full], True))
                    elif p.is_meta:
                        raise ValueError(f"{full}: a buffer on the meta device that {source} lacks: build the "
                                         f"model under wcodec.torch.empty_weights() (buffers then stay real)")
                    else:  # computed by the model (a rotary table, say): where the model runs
                        mod._buffers[attr] = p.to(dev)
                    continue
                name = next((n for n in names[id(p)] if n in at), None)
                if name is None:
                    raise KeyError(f"{source}: no tensor for parameter {full}")
                info = files[at[name]].info(name)
                if tuple(info.shape) != tuple(p.shape) or torch_dtype(info.dtype) != p.dtype:
                    raise ValueError(f"{full}: {info.dtype} {tuple(info.shape)} in {source}, {p.dtype} "
                                     f"{tuple(p.shape)} in the model")
                big = info.nbytes >= min_bytes
                if big or (attr == "weight" and isinstance(mod, (_torch.nn.Linear, _torch.nn.Embedding))):
                    entries.append((mod, attr, name, dev, at[name]))
                else:
                    now.append((mod, attr, name, at[name], False))
        items, made = [], []
        for mod, attr, name, fi, buf in now:
            info = files[fi].info(name)
            t = fw.empty(info, info.shape, d)
            items.append((fi, info.begin, info.nbytes, t))
            made.append((mod, attr, t, buf))
        _safe_open._read(fw, files, items, d)
        for mod, attr, t, buf in made:
            if buf:
                mod._buffers[attr] = t
            else:
                mod._parameters[attr] = _torch.nn.Parameter(t, requires_grad=False)
        return _attach(model, source, None, files, entries, blocks, owner, resident, check_decoded)
    except BaseException:
        for f in files:
            f.close()
        raise
