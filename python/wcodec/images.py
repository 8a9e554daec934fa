"""wcodec.images: the images of a .qvq archive (an image set packed by
`wcodec pack-images`) as numpy arrays, through libwcodec (src/loader/images.h).

    from wcodec.images import ImageSet
    s = ImageSet("train.qvq")                    # backend "cpu", "cuda" or "auto"
    arrays = s.read([0, 5, 7])                   # list of HxWx3 uint8 arrays
    s.labels[5], s.label_names[s.labels[5]]

Only the tiles the named images lie in are read and decoded, each once per
call; every payload and decoded tile is checked against its XXH3-64, and a
damaged tile raises WcodecError (code "CORRUPT", the message naming the
archive, the tile and its first image). Pixels are exactly those of
`wcodec unpack` and of the mount's image files. The torch API
(wcodec.torch.load_images, QVQDataset, QVQLoader) is built on this.
"""
import ctypes

import numpy as _np

from ._lib import ImageInfo, check, lib

__all__ = ["ImageSet"]


class ImageSet:
    """An open .qvq archive.

    path: the archive. backend: "cpu" (every usable core), "cuda" (the GPU
    decodes; pixels come back to host memory) or "auto" (CUDA where usable);
    "cuda:N", "auto:N" for GPU N (default 0).
    threads: CPU decode threads, 0 for every usable CPU.

    Attributes: len(s) images; sizes, an int64 array [N, 2] of (height,
    width); labels, an int64 array [N] (-1: none); label_names (list of
    str); names (list of str, each image's path as packed); backend (the
    backend in use). Thread-safe: several threads may read at once.
    Errors: WcodecError (opening: "IO", "FORMAT", "CORRUPT", "RANGE", ...;
    "BACKEND" for backend="cuda" without a usable GPU)."""

    def __init__(self, path, backend="cpu", threads=0):
        self.path = str(path)
        L = lib()
        h = ctypes.c_void_p()
        check(L.wc_image_set_open(self.path.encode(), backend.encode(), int(threads), ctypes.byref(h)))
        self._h = h
        self._L = L
        self.backend = L.wc_image_set_backend(h).decode()
        self.resident = False
        # The archive's mode (docs/FORMAT.md 6.1): "codebook" (version 1, or
        # mode 0) or "transform"; the header was checked by the open above.
        with open(self.path, "rb") as f:
            head = f.read(192)
        self.mode = "transform" if int.from_bytes(head[8:12], "little") >= 2 and head[152] == 1 else "codebook"
        n = L.wc_image_set_count(h)
        self.sizes = _np.zeros((n, 2), dtype=_np.int64)
        self.labels = _np.zeros(n, dtype=_np.int64)
        self.channels = 3
        info = ImageInfo()
        for i in range(n):
            check(L.wc_image_set_info(h, i, ctypes.byref(info)))
            self.sizes[i] = (info.height, info.width)
            self.labels[i] = info.label
            self.channels = info.channels
        self.names = [L.wc_image_set_name(h, i).decode("utf-8", "replace") for i in range(n)]
        self.label_names = [L.wc_image_set_label(h, i).decode("utf-8", "replace")
                            for i in range(L.wc_image_set_nlabels(h))]

    def __len__(self):
        return len(self.labels)

    def close(self):
        """Release the archive and its decode backend (also on garbage collection)."""
        if getattr(self, "_h", None):
            self._L.wc_image_set_close(self._h)
            self._h = None

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _indices(self, indices):
        idx = _np.arange(len(self), dtype=_np.int64) if indices is None else _np.asarray(indices)
        idx = idx.astype(_np.int64).reshape(-1)
        if idx.size and (idx.min() < -len(self) or idx.max() >= len(self)):
            raise IndexError(f"image index out of range for {len(self)} images")
        return _np.where(idx < 0, idx + len(self), idx).astype(_np.uint32)

    def read_into(self, indices, buffers, layout="HWC"):
        """Decode images `indices` into `buffers` (writable C-contiguous uint8
        numpy arrays, or addresses (int) of memory the caller keeps alive),
        each of height * width * 3 bytes, laid out "HWC" (rows of RGB
        pixels) or "CHW" (three planes). The GIL is released while decoding."""
        if layout not in ("HWC", "CHW"):
            raise ValueError(f"layout {layout!r}: 'HWC' or 'CHW'")
        idx = self._indices(indices)
        if len(buffers) != len(idx):
            raise ValueError(f"{len(idx)} images but {len(buffers)} buffers")
        ptrs = (ctypes.c_void_p * max(len(idx), 1))()
        for k, (i, b) in enumerate(zip(idx, buffers)):
            need = int(self.sizes[i][0] * self.sizes[i][1] * self.channels)
            if isinstance(b, int):
                ptrs[k] = b
                continue
            a = b if isinstance(b, _np.ndarray) else _np.asarray(memoryview(b)).view(_np.uint8)
            if a.nbytes < need or not a.flags.c_contiguous or not a.flags.writeable:
                raise ValueError(f"buffer {k} is not a writable contiguous {need}-byte buffer")
            ptrs[k] = a.ctypes.data
        arr = idx.ctypes.data_as(ctypes.POINTER(ctypes.c_uint32))
        check(self._L.wc_image_set_decode(self._h, arr, len(idx), 0 if layout == "HWC" else 1, ptrs))

    def read_into_device(self, indices, addresses, layout="HWC", stream=None, scale=None, bias=None):
        """Decode images `indices` on the GPU straight into device memory:
        addresses (ints) of height * width * 3 bytes each, on the GPU the
        backend uses (backend "cuda"), laid out "HWC" or "CHW"; stream: a
        cudaStream_t (int) the writes follow, None for the default stream.
        With scale and bias (3 numbers each, per channel) the pixels are
        written as float32, value * scale[c] + bias[c] (each operation
        rounded to float32, as torch's x.float() * scale + bias), into
        height * width * 12 bytes each, in the same pass.
        Returns once the images are written. Payloads are checked against
        their XXH3-64 on the host, the rANS streams and every index on the
        device. Errors: WcodecError ("UNSUPPORTED" unless the backend is
        "cuda" and the archive in the codebook mode; "CORRUPT" for a
        damaged tile), ValueError."""
        if layout not in ("HWC", "CHW"):
            raise ValueError(f"layout {layout!r}: 'HWC' or 'CHW'")
        idx = self._indices(indices)
        if len(addresses) != len(idx):
            raise ValueError(f"{len(idx)} images but {len(addresses)} addresses")
        ptrs = (ctypes.c_void_p * max(len(idx), 1))(*[int(a) for a in addresses])
        arr = idx.ctypes.data_as(ctypes.POINTER(ctypes.c_uint32))
        lay = 0 if layout == "HWC" else 1
        if scale is None and bias is None:
            check(self._L.wc_image_set_decode_device(self._h, arr, len(idx), lay, ptrs, stream))
            return
        f3 = ctypes.c_float * 3
        sc, bi = (f3(*[float(v) for v in _np.broadcast_to(x, 3)]) for x in
                  (1.0 if scale is None else scale, 0.0 if bias is None else bias))
        check(self._L.wc_image_set_decode_device_f32(self._h, arr, len(idx), lay, sc, bi, ptrs, stream))

    def make_resident(self, max_bytes):
        """Keep a transform-mode archive's payloads in the GPU's memory (at
        most max_bytes of them), each checked once, every image parsed once,
        for read_resident. Needs backend "cuda" and images of one size.
        Errors: WcodecError ("UNSUPPORTED": another backend, a codebook-mode
        archive, images of several sizes; "RANGE": past max_bytes or the
        GPU's free memory; "CORRUPT": a damaged tile)."""
        check(self._L.wc_image_set_resident(self._h, int(max_bytes)))
        self.resident = True

    def read_resident(self, indices_address, n, address, stride, layout="CHW", stream=None, scale=None,
                      bias=None, wait=True):
        """Decode n images of a resident archive on the GPU: indices_address
        is the device address of n int64 image numbers (a CUDA tensor's
        data_ptr()), image k goes to the device address address + k * stride
        (bytes), laid out "HWC" or "CHW"; with scale and bias, float32
        pixels as read_into_device writes them. Kernel launches only: the
        call follows the work on `stream` (a cudaStream_t, None the default
        stream) and that stream's later work follows it. With wait (the
        default) it returns after one synchronisation; with wait=False it
        returns a ticket at once, and finish_resident(ticket) does the
        synchronisation: the pixels are not to be used before it returns.
        At most two batches are in flight. Errors: WcodecError ("INVAL"
        before make_resident, or a third batch in flight; "RANGE" for an
        image number past the archive; "CORRUPT")."""
        if layout not in ("HWC", "CHW"):
            raise ValueError(f"layout {layout!r}: 'HWC' or 'CHW'")
        f3 = ctypes.c_float * 3
        sc = bi = None
        if scale is not None or bias is not None:
            sc, bi = (f3(*[float(v) for v in _np.broadcast_to(x, 3)]) for x in
                      (1.0 if scale is None else scale, 0.0 if bias is None else bias))
        args = (self._h, int(indices_address), int(n), 0 if layout == "HWC" else 1, sc, bi, int(address), int(stride),
                stream)
        if wait:
            check(self._L.wc_image_set_decode_resident(*args))
            return None
        ticket = ctypes.c_uint64()
        check(self._L.wc_image_set_decode_resident_start(*args, ctypes.byref(ticket)))
        return ticket.value

    def finish_resident(self, ticket):
        """Wait for the batch read_resident(..., wait=False) named `ticket`
        (one synchronisation) and raise its errors: WcodecError ("CORRUPT",
        "RANGE"; "INVAL" for a ticket not in flight)."""
        check(self._L.wc_image_set_decode_resident_finish(self._h, int(ticket)))

    def read(self, indices=None, layout="HWC"):
        """Images `indices` (default: all) as a list of uint8 arrays of shape
        (height, width, 3), or (3, height, width) with layout "CHW"."""
        idx = self._indices(indices)
        c = self.channels
        out = [_np.empty((int(self.sizes[i][0]), int(self.sizes[i][1]), c) if layout == "HWC"
                         else (c, int(self.sizes[i][0]), int(self.sizes[i][1])), dtype=_np.uint8) for i in idx]
        self.read_into(idx, out, layout)
        return out
