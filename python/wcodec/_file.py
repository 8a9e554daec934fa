"""Checkpoint files as libwcodec sees them (src/loader/loader.h): the
safetensors header, the tensors' byte ranges, and reads of those ranges into
host memory (every CPU) or device memory (the CUDA plugin)."""
import ctypes
import json
import os

from . import _lib
from ._lib import LoadRange, WcodecError

# Element size in bytes of each safetensors dtype (its README's "Format").
DTYPE_SIZES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
    "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8,
}


class TensorInfo:
    """One tensor of a file: dtype (safetensors name), shape (tuple of
    ints), and its bytes [begin, end) in the data section."""
    __slots__ = ("name", "dtype", "shape", "begin", "end")

    def __init__(self, name, dtype, shape, begin, end):
        self.name, self.dtype, self.shape, self.begin, self.end = name, dtype, tuple(shape), begin, end

    @property
    def nbytes(self):
        return self.end - self.begin


class TensorFile:
    """An open .wcodec or safetensors file (told apart by its first bytes).

    tensors: dict name -> TensorInfo, in the header's order; metadata: the
    "__metadata__" dict of strings or None; packed: True for .wcodec.
    Raises WcodecError (code IO, FORMAT, CORRUPT, RANGE, ...) when the file
    cannot be opened or its header or index is malformed or damaged.
    Close it (or use `with`) to release the descriptor and index memory.
    """

    def __init__(self, path):
        L = _lib.lib()
        self.path = os.fspath(path)
        h = ctypes.c_void_p()
        _lib.check(L.wc_tensor_file_open(self.path.encode(), ctypes.byref(h)))
        self._h = h
        n = ctypes.c_size_t()
        p = L.wc_tensor_file_header(h, ctypes.byref(n))
        header = json.loads(ctypes.string_at(p, n.value).decode("utf-8"))
        self.metadata = header.pop("__metadata__", None)
        self.tensors = {}
        for name, t in header.items():
            b, e = t["data_offsets"]
            self.tensors[name] = TensorInfo(name, t["dtype"], t["shape"], b, e)
        self.data_size = L.wc_tensor_file_data_size(h)
        self.packed = bool(L.wc_tensor_file_container(h))

    @property
    def handle(self):
        if self._h is None:
            raise ValueError(f"{self.path}: file is closed")
        return self._h

    def close(self):
        if getattr(self, "_h", None) is not None:
            _lib.lib().wc_tensor_file_close(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass

    def info(self, name):
        """The TensorInfo of `name`; KeyError if the file has no such tensor."""
        try:
            return self.tensors[name]
        except KeyError:
            raise KeyError(f"{self.path}: no tensor named {name!r}") from None

    def lossy_codes(self, name):
        """A lossy tensor's codes as stored (docs/FORMAT.md 2.2), or None
        for a lossless one: a dict with "codes" (numpy int8 array of the
        tensor's shape), "scales" (numpy float32: [C] for int8, one per
        output channel; [C, G] for int4, one per group of `group` of a
        channel's elements), "axis" (0: the channels are the first axis,
        as torch.nn.Linear's [out, in] weight; 1: the last), "bits" (8 or
        4) and "group" (0 for int8). The tensor's value is codes * scale
        per element, rounded to its dtype. Every tile is checked; errors:
        WcodecError (CORRUPT for a damaged tile), KeyError."""
        import numpy as np
        self.info(name)
        c = _lib.lib().wc_tensor_file_container(self.handle)
        if not c:
            return None
        L = _lib.lib()
        i, d = ctypes.c_uint32(), _lib.LossyDesc()
        _lib.check(L.wc_container_find_tensor(c, name.encode(), ctypes.byref(i)))
        if L.wc_container_lossy_desc(c, i, ctypes.byref(d)) != 0:
            return None  # lossless
        codes = np.empty(d.elems, dtype=np.int8)
        scales = np.empty(d.nscales, dtype=np.float32)
        _lib.check(L.wc_container_lossy_codes(c, i, codes.ctypes.data, scales.ctypes.data))
        return {"codes": codes.reshape(self.tensors[name].shape), "axis": d.axis, "bits": d.bits,
                "group": d.group, "scales": scales.reshape(d.channels, -1) if d.group else scales}

    def ntiles(self):
        """Tiles of a .wcodec file (0 for a plain one)."""
        c = _lib.lib().wc_tensor_file_container(self.handle)
        return _lib.lib().wc_container_ntiles(c) if c else 0

    def tiles(self, offset, length):
        """(first, last): the tiles (inclusive) holding data-section bytes
        [offset, offset + length), length > 0, of a .wcodec file."""
        a, b = ctypes.c_uint32(), ctypes.c_uint32()
        _lib.check(_lib.lib().wc_tensor_file_tiles(self.handle, offset, length, ctypes.byref(a), ctypes.byref(b)))
        return a.value, b.value

    def tile_extent(self, first, last):
        """(data_offset, data_length, payload_offset, payload_length) of
        tiles first..last: their decoded bytes in the data section and
        their payloads in the file, in bytes."""
        v = [ctypes.c_uint64() for _ in range(4)]
        _lib.check(_lib.lib().wc_tensor_file_tile_extent(self.handle, first, last, *[ctypes.byref(x) for x in v]))
        return tuple(x.value for x in v)

    def read_payloads(self, first, last, address):
        """The payloads of tiles first..last into host memory at address
        (payload_length bytes of tile_extent), each checked against its
        checksum. Raises WcodecError (CORRUPT naming the tile, IO)."""
        _lib.check(_lib.lib().wc_tensor_file_read_payloads(self.handle, first, last, address))

    def tile_span(self, offset, length):
        """(offset, length) of the whole tiles covering data-section bytes
        [offset, offset + length); the range itself for a plain file."""
        so, sl = ctypes.c_uint64(), ctypes.c_uint64()
        _lib.check(_lib.lib().wc_tensor_file_tile_span(self.handle, offset, length, ctypes.byref(so),
                                                       ctypes.byref(sl)))
        return so.value, sl.value


def _ranges(files, items):
    """ctypes arrays for items of (file_index, offset, length, address)."""
    handles = (ctypes.c_void_p * len(files))(*[f.handle for f in files])
    arr = (LoadRange * len(items))()
    for i, (fi, off, n, addr) in enumerate(items):
        arr[i].file, arr[i].reserved, arr[i].offset, arr[i].length, arr[i].dst = fi, 0, off, n, addr
    return handles, arr


def load_host(files, items):
    """Read items [(file_index, offset, length, address), ...] (offsets and
    lengths in bytes of the data section; addresses of host memory with
    room for length bytes) on every CPU (wc_load_host). Raises WcodecError."""
    if not items:
        return
    handles, arr = _ranges(files, items)
    _lib.check(_lib.lib().wc_load_host(handles, len(files), arr, len(items)))


def _runs(runs):
    rr = (_lib.PayloadRun * max(len(runs), 1))()
    for i, (fi, a, b, addr) in enumerate(runs):
        rr[i].file, rr[i].first_tile, rr[i].last_tile, rr[i].reserved, rr[i].bytes = fi, a, b, 0, addr
    return rr


def load_host_payloads(files, runs, items):
    """load_host with the payloads of the tiles the items touch taken from
    runs [(file_index, first_tile, last_tile, address), ...] in host memory
    instead of the files (wc_load_host_payloads); each is checked against
    its checksum before it is decoded. Raises WcodecError."""
    if not items:
        return
    handles, arr = _ranges(files, items)
    _lib.check(_lib.lib().wc_load_host_payloads(handles, len(files), _runs(runs), len(runs), arr, len(items)))


def load_cuda_payloads(files, runs, items, gpu, staging_bytes=0):
    """load_cuda with the payloads taken from runs in host memory, as
    load_host_payloads (wcodec_cuda_load_payloads): decoded on GPU `gpu`
    into device memory. Raises WcodecError ("BACKEND" without the plugin)."""
    P = _lib.cuda()
    if P is None:
        raise WcodecError("BACKEND", _lib.cuda_error())
    if not items:
        return
    handles, arr = _ranges(files, items)
    opts, stats = _lib.CudaLoadOpts(staging_bytes, 0), _lib.CudaLoadStats()
    _lib.check(P.wcodec_cuda_load_payloads(handles, len(files), _runs(runs), len(runs), arr, len(items), gpu,
                                           ctypes.byref(opts), ctypes.byref(stats)))


def load_cuda(files, items, gpu, staging_bytes=0, readers=0):
    """The same into device memory of GPU ordinal `gpu` (wcodec_cuda_load).
    Returns the loader's CudaLoadStats. Raises WcodecError("BACKEND") when
    the CUDA plugin cannot be loaded or no GPU is usable."""
    P = _lib.cuda()
    if P is None:
        raise WcodecError("BACKEND", _lib.cuda_error())
    stats = _lib.CudaLoadStats()
    if not items:
        return stats
    handles, arr = _ranges(files, items)
    opts = _lib.CudaLoadOpts(staging_bytes, readers)
    _lib.check(P.wcodec_cuda_load(handles, len(files), arr, len(items), gpu, ctypes.byref(opts),
                                  ctypes.byref(stats)))
    return stats


def list_objects(prefix):
    """[(key, size)] of the objects under "s3://BUCKET/PREFIX", in key
    order (wc_object_list). Raises WcodecError."""
    found = []

    def each(_ctx, key, size):
        found.append((key.decode("utf-8", "surrogateescape"), size))
        return 0
    _lib.check(_lib.lib().wc_object_list(os.fspath(prefix).encode(), _lib.OBJECT_FN(each), None))
    return found


def _checkpoint_objects(prefix):
    """open_checkpoint_dir for "s3://BUCKET/PREFIX/": the objects directly
    under the prefix named *.wcodec or *.safetensors (a real X.safetensors
    winning over X.wcodec, as in a directory), sorted."""
    if not prefix.endswith("/"):
        prefix += "/"
    bucket = prefix[5:].split("/", 1)[0]
    stems = {}
    for key, _ in list_objects(prefix):
        name = key.rsplit("/", 1)[-1]
        if key.count("/") != prefix[5 + len(bucket) + 1:].count("/"):
            continue  # deeper than the prefix
        for suffix in (".safetensors", ".wcodec"):
            if name.endswith(suffix):
                stem = name[: -len(suffix)]
                if suffix == ".safetensors" or stem not in stems:
                    stems[stem] = f"s3://{bucket}/{key}"
    if not stems:
        raise FileNotFoundError(f"{prefix}: no *.safetensors or *.wcodec object")
    return [stems[s] for s in sorted(stems)], None


def open_checkpoint_dir(directory):
    """The checkpoint files of a model directory, as `wcodec pack -u` writes
    it or as Hugging Face saves it: the shards named by a
    *.safetensors.index.json (its "weight_map"; a shard named X.safetensors
    is read from X.wcodec when only that exists), else every *.wcodec and
    *.safetensors file (a real X.safetensors wins over X.wcodec, as in the
    mount). Returns (paths, weight_map or None), the map's values resolved
    to the paths. An "s3://BUCKET/PREFIX/" directory is the objects directly
    under that prefix (its index is not read: every shard is loaded). Raises
    FileNotFoundError when there is no checkpoint, or a shard the index
    names is missing; WcodecError when a listing fails."""
    directory = os.fspath(directory)
    if directory.startswith("s3://"):
        return _checkpoint_objects(directory)
    idx = sorted(p for p in os.listdir(directory) if p.endswith(".safetensors.index.json"))
    if idx:
        with open(os.path.join(directory, idx[0]), encoding="utf-8") as fh:
            weight_map = json.load(fh).get("weight_map", {})
        resolved = {shard: _resolve_shard(directory, shard) for shard in dict.fromkeys(weight_map.values())}
        return list(resolved.values()), {k: resolved[v] for k, v in weight_map.items()}
    names = sorted(os.listdir(directory))
    stems = {}
    for n in names:
        for suffix in (".safetensors", ".wcodec"):
            if n.endswith(suffix) and os.path.isfile(os.path.join(directory, n)):
                stem = n[: -len(suffix)]
                if suffix == ".safetensors" or stem not in stems:
                    stems[stem] = os.path.join(directory, n)
    if not stems:
        raise FileNotFoundError(f"{directory}: no *.safetensors or *.wcodec file and no index")
    return [stems[s] for s in sorted(stems)], None


def gather(futures):
    """The results of futures in order, those that raised left out, and the
    first exception raised (None if none), once every one has ended."""
    out, err = [], None
    for fu in futures:
        try:
            out.append(fu.result())
        except BaseException as e:  # noqa: BLE001 - the caller raises it once it has cleaned up
            err = err or e
    return out, err


def open_files(paths):
    """TensorFile of each path, in order. Objects of a store (s3://) are
    opened 8 at a time: each open waits on a request's latency, which a
    checkpoint of many shards would otherwise pay one after another. On an
    error every file opened is closed and the first error raised."""
    from concurrent.futures import ThreadPoolExecutor
    remote = any(str(p).startswith("s3://") for p in paths)
    with ThreadPoolExecutor(max_workers=8 if remote else 1) as pool:
        files, err = gather([pool.submit(TensorFile, p) for p in paths])
    if err is not None:
        for f in files:
            f.close()
        raise err
    return files


def _resolve_shard(directory, shard):
    path = os.path.join(directory, shard)
    if os.path.isfile(path):
        return path
    if shard.endswith(".safetensors"):
        packed = os.path.join(directory, shard[: -len(".safetensors")] + ".wcodec")
        if os.path.isfile(packed):
            return packed
    raise FileNotFoundError(f"{directory}: the index names {shard}, which is missing (nor is its .wcodec)")


def cuda_loader_memory(gpu=0):
    """(pinned_bytes, device_bytes): the page-locked host memory and device
    scratch the GPU loader keeps for GPU `gpu` between loads (staging ring,
    lanes, frequency tables), beyond the tensors it fills; (0, 0) before its
    first load there or without the CUDA plugin."""
    P = _lib.cuda()
    if P is None:
        return 0, 0
    pinned, device = ctypes.c_size_t(), ctypes.c_size_t()
    _lib.check(P.wcodec_cuda_loader_memory(gpu, ctypes.byref(pinned), ctypes.byref(device)))
    return pinned.value, device.value
