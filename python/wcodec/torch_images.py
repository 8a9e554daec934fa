"""Image batches from .qvq archives as torch tensors (re-exported by
wcodec.torch): load_images, QVQDataset (torch.utils.data conventions) and
QVQLoader (batches with shuffling, sharding by rank and the next batch read
while the current one trains). Built on wcodec.images.ImageSet.
"""
import collections as _collections
import concurrent.futures as _futures
import itertools as _itertools
import os as _os
import threading

import numpy as _np
import torch as _torch

from ._lib import WcodecError
from .images import ImageSet

__all__ = ["load_images", "QVQDataset", "QVQLoader"]

_sets = {}
_sets_lock = threading.Lock()


def _device(device):
    if isinstance(device, int):
        return _torch.device("cuda", device)
    return _torch.device(device)


def _backend(backend, dev):
    """The ImageSet backend for device dev: backend (default "cpu" on the
    CPU, "auto" on a GPU), on dev's GPU ("cuda:N", "auto:N")."""
    if dev.type == "cpu":
        return backend or "cpu"
    b = backend or "auto"
    if b == "cpu" or ":" in b:
        return b
    return f"{b}:{dev.index if dev.index is not None else _torch.cuda.current_device()}"


def _image_set(path, backend):
    """One open ImageSet per (archive, backend), shared (it is thread-safe):
    a decode backend, a GPU context above all, is costly to start."""
    key = (str(path), backend)
    with _sets_lock:
        s = _sets.get(key)
        if s is None:
            s = _sets[key] = ImageSet(path, backend=backend)
        return s


def _affine(dtype, mean, std):
    """Per-channel (scale, bias), float32, that take pixels v to
    (v / 255 - mean) / std as v * scale + bias."""
    m = _torch.as_tensor(mean if mean is not None else 0.0, dtype=_torch.float64).expand(3)
    sd = _torch.as_tensor(std if std is not None else 1.0, dtype=_torch.float64).expand(3)
    return (1.0 / (255.0 * sd)).to(dtype), (-m / sd).to(dtype)


def _fused(dtype, mean, std):
    """The affine of _decode for a float32 result (the GPU's gather writes
    it in one pass), None for other dtypes (converted by _finish)."""
    return _affine(_torch.float32, mean, std) if dtype == _torch.float32 else None


def _decode(s, idx, pad, dev, chw, affine=None):
    """Images idx of s for device dev, decoded straight into place: one uint8
    tensor [N, C, H, W] (chw) or [N, H, W, C] when they share a size (or
    pad: the largest, zero-filled at the bottom and right), else a list of
    [C, H, W] or [H, W, C] tensors. On a GPU whose backend is the set's
    ("cuda") the GPU writes the device tensors; otherwise the images are
    decoded into host memory, page-locked when dev is a GPU. affine
    (float32 scale and bias tensors of 3): float32 pixels v * scale + bias
    written by the GPU in the same pass, when it writes one tensor (the
    images share a size; otherwise uint8, for _finish to convert)."""
    lay = "CHW" if chw else "HWC"
    sizes = s.sizes[idx]
    same = len(idx) == 0 or bool((sizes == sizes[0]).all())
    gpu = dev.type == "cuda" and s.backend == "cuda"
    fused = gpu and affine is not None and same and len(idx) > 0
    dtype = _torch.float32 if fused else _torch.uint8
    where = {"device": dev} if gpu else {"pin_memory": dev.type == "cuda"}

    def new(shape, zero):
        return (_torch.zeros if zero else _torch.empty)(shape, dtype=dtype, **where)

    if gpu:
        stream = _torch.cuda.current_stream(dev).cuda_stream
        kw = {"scale": affine[0].tolist(), "bias": affine[1].tolist()} if fused else {}

        def read(indices, addresses):
            s.read_into_device(indices, addresses, lay, stream, **kw)
    else:
        def read(indices, addresses):
            s.read_into(indices, addresses, lay)

    c = s.channels
    if same:
        h, w = (int(sizes[0][0]), int(sizes[0][1])) if len(idx) else (0, 0)
        out = new((len(idx), c, h, w) if chw else (len(idx), h, w, c), False)
        base, step = out.data_ptr(), h * w * c * out.element_size()
        read(idx, [base + k * step for k in range(len(idx))])
        return out
    one = [new((c, int(h), int(w)) if chw else (int(h), int(w), c), False) for h, w in sizes]
    read(idx, [t.data_ptr() for t in one])  # every image in one call
    if not pad:
        return one
    h, w = int(sizes[:, 0].max()), int(sizes[:, 1].max())
    out = new((len(idx), c, h, w) if chw else (len(idx), h, w, c), True)
    for k, t in enumerate(one):
        if chw:
            out[k, :, :t.shape[1], :t.shape[2]] = t
        else:
            out[k, :t.shape[0], :t.shape[1], :] = t
    return out


def _finish(images, dev, dtype, mean, std, chw):
    """Move to dev and convert (float dtypes: pixels / 255, then (x - mean)
    / std, in two passes on the device)."""
    if isinstance(images, list):
        return [_finish(t.unsqueeze(0), dev, dtype, mean, std, chw)[0] for t in images]
    t = images.to(dev, non_blocking=True)
    if t.dtype == dtype:  # uint8 asked for, or already normalised by the GPU's gather
        return t
    if not dtype.is_floating_point:
        raise TypeError(f"dtype {dtype}: uint8 or a floating-point dtype")
    shape = (1, -1, 1, 1) if chw else (1, 1, 1, -1)
    scale, bias = (x.to(dev).reshape(shape) for x in _affine(dtype, mean, std))
    return t.to(dtype).mul_(scale).add_(bias)


def _check_layout(layout, batch=True):
    ok = ("NCHW", "NHWC") if batch else ("CHW", "HWC")
    if layout not in ok:
        raise ValueError(f"layout {layout!r}: one of {ok}")


def load_images(path, indices=None, device="cuda", layout="NCHW", dtype=_torch.uint8, mean=None, std=None,
                pad=False, backend=None):
    """Images of the .qvq archive `path` as tensors: (images, labels).

    indices: image numbers (archive order: sorted by name; default all).
    device: "cpu", "cuda", "cuda:N", N or a torch.device. On a GPU the
    GPU decodes the images straight into the returned tensor: only the
    payloads (the codebook indices, compressed) cross the bus, and the
    codebook stays on the device (backend "auto": where the CUDA plugin or
    a GPU is missing, the CPU decodes into page-locked memory, copied up).
    On "cpu" every core decodes. backend overrides ("cpu", "cuda",
    "auto"). Only the tiles the images lie in are read and decoded.
    layout: "NCHW" or "NHWC". dtype: torch.uint8 (the pixels), or a
    floating-point dtype: pixels / 255, then (x - mean) / std with mean and
    std sequences of 3 (per channel), applied on the device.
    Images of one size give one tensor [N, 3, H, W] (NCHW); of several
    sizes a list of [3, H, W] tensors, or with pad=True one tensor of the
    largest size, zero-filled at the bottom and right.
    labels: an int64 tensor [N] on the device, -1 for an image without one.
    Errors: WcodecError (code "CORRUPT" for a damaged tile, naming it;
    "IO", "FORMAT" for a bad archive), IndexError, ValueError, TypeError."""
    _check_layout(layout)
    dev = _device(device)
    s = _image_set(path, _backend(backend, dev))
    idx = s._indices(indices)
    host = _decode(s, idx, pad, dev, layout == "NCHW", _fused(dtype, mean, std))
    labels = _torch.as_tensor(s.labels[idx], dtype=_torch.int64).to(dev)
    return _finish(host, dev, dtype, mean, std, layout == "NCHW"), labels


class QVQDataset(_torch.utils.data.Dataset):
    """A .qvq archive as a map-style dataset: dataset[i] is (image, label),
    image a CPU tensor [3, H, W] (layout "CHW", or [H, W, 3] with "HWC") of
    dtype uint8 or float (as load_images), label an int (-1: none).

    Attributes: labels (int64 tensor [N]), label_names, names (each image's
    path as packed), sizes (int64 tensor [N, 2] of height, width), path.
    Works with torch.utils.data.DataLoader (each worker opens the archive
    itself); QVQLoader reads whole batches with one call instead."""

    def __init__(self, path, layout="CHW", dtype=_torch.uint8, mean=None, std=None, backend="cpu"):
        _check_layout(layout, batch=False)
        self.path = str(path)
        self.layout, self.dtype, self.mean, self.std, self.backend = layout, dtype, mean, std, backend
        s = _image_set(self.path, backend)
        self.labels = _torch.as_tensor(s.labels, dtype=_torch.int64)
        self.sizes = _torch.as_tensor(s.sizes, dtype=_torch.int64)
        self.label_names = list(s.label_names)
        self.names = list(s.names)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        if not -len(self) <= int(i) < len(self):
            raise IndexError(f"image {i} of {len(self)}")
        s = _image_set(self.path, self.backend)
        chw = self.layout == "CHW"
        host = _decode(s, s._indices([int(i)]), False, _torch.device("cpu"), chw)
        img = _finish(host, _torch.device("cpu"), self.dtype, self.mean, self.std, chw)[0]
        return img, int(self.labels[int(i)])


class QVQLoader:
    """Batches of (images, labels) from a .qvq archive (a path or a
    QVQDataset), as load_images returns them, for a training loop:

        loader = QVQLoader("train.qvq", batch_size=256, shuffle=True, seed=0,
                           rank=rank, world_size=world_size, device="cuda",
                           dtype=torch.float32, mean=(0.485, 0.456, 0.406),
                           std=(0.229, 0.224, 0.225))
        for epoch in range(epochs):
            for images, labels in loader: ...

    shuffle: a new order each epoch, torch.randperm seeded with seed + epoch,
    the same on every rank; the epoch advances at the end of each pass over
    the loader, or is set with set_epoch(e). Sharding: rank r of world_size
    takes positions r, r + world_size, ... of the epoch's order, so every
    image is in exactly one rank's batches each epoch (ranks' counts differ
    by at most one image; use drop_last for equal batch counts).
    drop_last: a last batch smaller than batch_size is left out.
    prefetch: batches read and decoded ahead while the current one is used
    (0: none), by `workers` threads (default: up to 4), each into its own
    page-locked buffer.
    resident: on a GPU with the "cuda" backend, keep a transform-mode
    archive's payloads in GPU memory (True: up to half the GPU's free
    memory; an int: that many bytes at most), checked and parsed once; each
    batch is then decoded by kernel launches alone, its image numbers and
    labels indexed on the GPU (one copy of the epoch's order an epoch). An
    archive that does not fit, a codebook-mode archive or one of several
    image sizes is read as without it. Other arguments as load_images."""

    def __init__(self, data, batch_size, shuffle=False, seed=0, drop_last=False, rank=0, world_size=1,
                 device="cuda", layout="NCHW", dtype=_torch.uint8, mean=None, std=None, pad=False,
                 prefetch=4, workers=None, backend=None, resident=False):
        _check_layout(layout)
        if batch_size < 1 or world_size < 1 or not 0 <= rank < world_size:
            raise ValueError("batch_size >= 1 and 0 <= rank < world_size are needed")
        self.path = data.path if isinstance(data, QVQDataset) else str(data)
        self.dev = _device(device)
        self.set = _image_set(self.path, _backend(backend, self.dev))
        self.batch_size, self.shuffle, self.seed, self.drop_last = batch_size, shuffle, seed, drop_last
        self.rank, self.world_size, self.prefetch = rank, world_size, prefetch
        self.workers = workers or max(1, min(4, prefetch, _os.cpu_count() or 1))
        self.layout, self.dtype, self.mean, self.std, self.pad = layout, dtype, mean, std, pad
        self.epoch = 0
        self.resident = bool(resident) and self._make_resident(resident)

    def _make_resident(self, resident):
        """Whether the archive now stays in GPU memory (resident's budget)."""
        if self.dev.type != "cuda" or self.set.backend != "cuda":
            return False
        if not self.set.resident:
            budget = resident if not isinstance(resident, bool) else _torch.cuda.mem_get_info(self.dev)[0] // 2
            try:
                self.set.make_resident(int(budget))
            except WcodecError as e:
                if e.code in ("UNSUPPORTED", "RANGE"):  # read as without it
                    return False
                raise
        self._labels = _torch.as_tensor(self.set.labels, dtype=_torch.int64).to(self.dev)
        return True

    def set_epoch(self, epoch):
        """Use epoch's order for the next pass (as DistributedSampler.set_epoch)."""
        self.epoch = int(epoch)

    def indices(self, epoch=None):
        """This rank's image numbers for an epoch (default: the next pass's), in order."""
        n = len(self.set)
        e = self.epoch if epoch is None else epoch
        if self.shuffle:
            g = _torch.Generator()
            g.manual_seed(self.seed + e)
            order = _torch.randperm(n, generator=g).numpy()
        else:
            order = _np.arange(n)
        mine = order[self.rank::self.world_size]
        if self.drop_last:
            mine = mine[:len(mine) - len(mine) % self.batch_size]
        return mine

    def __len__(self):
        m = len(self.indices())
        return m // self.batch_size if self.drop_last else -(-m // self.batch_size)

    def _batches(self, idx):
        return (idx[b:b + self.batch_size] for b in range(0, len(idx), self.batch_size))

    def _host(self, batch):
        return _decode(self.set, batch.astype(_np.uint32), self.pad, self.dev, self.layout == "NCHW",
                       _fused(self.dtype, self.mean, self.std)), batch

    def _resident_batches(self, idx):
        """Batches of a resident archive: the GPU indexes and decodes. The
        next batch is launched before the last is waited for and handed
        out, so the GPU has work queued while the caller takes a batch."""
        order = _torch.as_tensor(idx, dtype=_torch.int64).to(self.dev)
        h, w = (int(v) for v in self.set.sizes[0])
        chw = self.layout == "NCHW"
        fused = _fused(self.dtype, self.mean, self.std)
        kw = {"scale": fused[0].tolist(), "bias": fused[1].tolist()} if fused is not None else {}
        stream = _torch.cuda.current_stream(self.dev).cuda_stream

        def launch(b):
            ii = order[b:b + self.batch_size]
            n = len(ii)
            out = _torch.empty((n, 3, h, w) if chw else (n, h, w, 3),
                               dtype=_torch.float32 if fused is not None else _torch.uint8, device=self.dev)
            ticket = self.set.read_resident(ii.data_ptr(), n, out.data_ptr(), 3 * h * w * out.element_size(),
                                            "CHW" if chw else "HWC", stream, wait=False, **kw)
            return ticket, out, ii

        pending = _collections.deque()  # (ticket, out, image numbers), launched, not yet waited for

        def take():
            t, out, ii = pending.popleft()
            self.set.finish_resident(t)
            return _finish(out, self.dev, self.dtype, self.mean, self.std, chw), self._labels[ii]

        try:
            for b in range(0, len(order), self.batch_size):
                pending.append(launch(b))
                if len(pending) == 2:
                    yield take()
            while pending:
                yield take()
        finally:  # a batch left in flight (an error, or the caller stopped early)
            for t, _, _ in pending:
                try:
                    self.set.finish_resident(t)
                except WcodecError:
                    pass

    def __iter__(self):
        idx = self.indices()
        self.epoch += 1
        if self.resident:
            yield from self._resident_batches(idx)
            return
        batches = self._batches(idx)
        if self.prefetch <= 0:
            for batch in batches:
                yield self._deliver(*self._host(batch))
            return
        # Batches decoded ahead by `workers` threads (the library releases
        # the GIL and is thread-safe), each into its own buffer, delivered
        # in order; at most `prefetch` of them wait.
        with _futures.ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="wcodec-qvq") as ex:
            pending = _collections.deque(ex.submit(self._host, b) for b in _itertools.islice(batches,
                                                                                             self.prefetch))
            try:
                while pending:
                    host, batch = pending.popleft().result()
                    nxt = next(batches, None)
                    if nxt is not None:
                        pending.append(ex.submit(self._host, nxt))
                    yield self._deliver(host, batch)
            finally:
                for f in pending:
                    f.cancel()

    def _deliver(self, host, batch):
        labels = _torch.as_tensor(self.set.labels[batch], dtype=_torch.int64).to(self.dev)
        return _finish(host, self.dev, self.dtype, self.mean, self.std, self.layout == "NCHW"), labels
