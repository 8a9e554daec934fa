"""safe_open and load_file over TensorFile, for either framework
(wcodec.torch and wcodec.numpy supply how to allocate an array)."""
from ._file import TensorFile, gather, load_cuda, load_host


class _Framework:
    """What a framework supplies: device parsing, allocation, addresses."""
    name = ""

    def device(self, device):  # -> (kind "cpu" | "cuda", ordinal)
        raise NotImplementedError

    def empty(self, info, shape, device):
        raise NotImplementedError

    def address(self, array):
        raise NotImplementedError

    def from_numpy(self, a):  # a numpy array as this framework's CPU array
        return a

    def before_device_write(self, device):
        """Called before the GPU loader writes arrays of `device`."""


def _read(fw, files, items, device):
    """items: [(file_index, offset, length, array)]; fills the arrays."""
    kind, ordinal = device
    ranges = [(fi, off, n, fw.address(a)) for fi, off, n, a in items if n]
    if kind == "cpu":
        load_host(files, ranges)
    else:
        fw.before_device_write(device)
        load_cuda(files, ranges, ordinal)


def load_tensors(fw, files, device, names_per_file=None):
    """Every tensor of every file (or names_per_file[i] of file i) as one
    dict name -> array, in file order and each file's header order, all read
    in one loader call (so several shards overlap on the GPU pipeline)."""
    dev = fw.device(device)
    out, items = {}, []
    for fi, f in enumerate(files):
        names = f.tensors if names_per_file is None else names_per_file[fi]
        for name in names:
            info = f.info(name)
            a = fw.empty(info, info.shape, dev)
            out[name] = a
            items.append((fi, info.begin, info.nbytes, a))
    _read(fw, files, items, dev)
    return out


def load_objects(fw, paths, device, batch=8):
    """load_tensors of the objects of a store at paths (s3://), opened 8 at
    a time: the first `batch` loaded while the others open, then those in
    one load (each load ends with threads idle as its last runs finish, so
    two loads, not one a batch): an open waits on a request's latency,
    which the first load hides. One dict in the paths' order. Every file
    is closed on return; the first error is raised once every load has
    ended."""
    from concurrent.futures import ThreadPoolExecutor
    out, opened, err = {}, [], None
    with ThreadPoolExecutor(max_workers=8) as opener, ThreadPoolExecutor(max_workers=1) as loader:
        pending, loads = [opener.submit(TensorFile, p) for p in paths], []
        for k0, k1 in ((0, batch), (batch, len(pending))):  # the first batch, then the rest at once
            fs, e = gather(pending[k0:k1])
            opened += fs
            err = err or e
            if err is None:
                loads.append(loader.submit(load_tensors, fw, fs, device))
        results, e = gather(loads)
        for f in opened:
            f.close()
    for r in results:
        out.update(r)
    if err or e:
        raise err or e
    return out


def _rows_of(index, n):
    """For an index into a first dimension of n rows: (r0, r1, new_index)
    where rows [r0, r1) cover it and new_index indexes rows relative to r0."""
    if isinstance(index, slice):
        start, stop, step = index.indices(n)
        rng = range(start, stop, step)
        if len(rng) == 0:
            return 0, 0, slice(0, 0)
        lo, hi = min(rng[0], rng[-1]), max(rng[0], rng[-1]) + 1
        if step > 0:
            return lo, hi, slice(start - lo, stop - lo if stop - lo > 0 else None, step)
        return 0, n, index
    if isinstance(index, int) or hasattr(index, "__index__"):
        i = index.__index__()
        if i < -n or i >= n:
            raise IndexError(f"index {i} is out of bounds for dimension 0 with size {n}")
        i %= n
        return i, i + 1, 0
    return 0, n, index


class Slice:
    """What safe_open.get_slice returns: get_shape(), get_dtype(), and
    indexing (ints, slices, Ellipsis) that reads only the tiles holding the
    rows of the first dimension the index touches."""

    def __init__(self, owner, name):
        self._owner, self._info = owner, owner._file.info(name)

    def get_shape(self):
        return list(self._info.shape)

    def get_dtype(self):
        return self._info.dtype

    def __getitem__(self, index):
        info, fw = self._info, self._owner._fw
        if not isinstance(index, tuple):
            index = (index,)
        shape = info.shape
        if len(shape) == 0:
            return self._owner.get_tensor(info.name)[index]
        if not index or index[0] is Ellipsis:  # every row
            r0, r1, new_index = 0, shape[0], index
        else:
            r0, r1, new_first = _rows_of(index[0], shape[0])
            new_index = (new_first,) + tuple(index[1:])
        row_bytes = info.nbytes // shape[0] if shape[0] else 0
        sub = fw.empty(info, (r1 - r0,) + tuple(shape[1:]), self._owner._device)
        _read(fw, [self._owner._file], [(0, info.begin + r0 * row_bytes, (r1 - r0) * row_bytes, sub)],
              self._owner._device)
        return fw.index(sub, new_index)


class SafeOpen:
    """safe_open(filename, framework, device): the safetensors context
    manager over a .wcodec or safetensors file. keys() (sorted, as
    safetensors gives them), offset_keys() (in data order), metadata(),
    get_tensor(name), get_slice(name). A missing tensor raises KeyError."""

    def __init__(self, fw, filename, device="cpu"):
        self._fw = fw
        self._device = fw.device(device)
        self._file = TensorFile(filename)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._file.close()

    def keys(self):
        return sorted(self._file.tensors)

    def offset_keys(self):
        return [t.name for t in sorted(self._file.tensors.values(), key=lambda t: t.begin)]

    def metadata(self):
        return self._file.metadata

    def get_tensor(self, name):
        info = self._file.info(name)
        a = self._fw.empty(info, info.shape, self._device)
        _read(self._fw, [self._file], [(0, info.begin, info.nbytes, a)], self._device)
        return a

    def get_slice(self, name):
        return Slice(self, name)

    def get_codes(self, name):
        """A lossy tensor's codes and scales as stored, for kernels that
        take int8 (or int4) weights with scales (W8A16) instead of the
        decoded values: the dict of TensorFile.lossy_codes with "codes"
        and "scales" as framework arrays on the CPU; None for a lossless
        tensor. KeyError for a missing one."""
        got = self._file.lossy_codes(name)
        if got is not None:
            got["codes"], got["scales"] = self._fw.from_numpy(got["codes"]), self._fw.from_numpy(got["scales"])
        return got

