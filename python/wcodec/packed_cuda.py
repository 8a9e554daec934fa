"""wcodec.packed_cuda: the GPU path of wcodec.packed. A model's packed
weights are held in GPU memory as tiles (the CUDA plugin's
wcodec_cuda_resident_*, cuda/wcodec_cuda.h) and each unit (a block, or a
module outside the blocks) is decoded on the GPU into one of two scratch
buffers just before it runs, the next unit on a second CUDA stream while
the current one computes (the plugin's wcodec_cuda_units_* schedule: a
few event calls and the kernel launches per unit, no host waits). Each
unit's parameters are made once per scratch buffer, as views of it, and
the hooks only put them (and placeholders after) into their modules. Outputs bit-identical to the plain model (the
decode is lossless).

Scratch: two buffers. The first holds the largest unit; the second the
larger of the largest unit at even and at odd places of the given order,
whichever is smaller (blocks given as alternating attention and MLP
modules thus need the largest MLP's and the largest attention's bytes,
not twice the largest). A unit that fits only the buffer the running unit
uses is decoded when it starts, on the current stream, instead of ahead.

Which unit comes next is learnt: the unit that started after this one the
last time it ran (the blocks' order is known from the start). A generate()
loop (embedding, blocks, head, embedding, ...) is thus decoded ahead all
the way round after its first step.
"""
import ctypes

import torch as _torch

from . import _lib
from ._file import gather
from ._lib import WcodecError
from ._torch_framework import TorchFramework, torch_dtype

__all__ = ["DeviceUnits"]

_ALIGN = 256


class _Resident:
    """One wcodec_cuda_resident: tensors `names` of TensorFile tf, decoded
    together; offsets[k] is names[k]'s byte offset in its buffer of
    out_bytes bytes."""

    def __init__(self, P, tf, names, gpu, verify):
        self._P, self.names, self.handle = P, list(names), None
        c = _lib.lib().wc_tensor_file_container(tf.handle)
        if not c:
            raise WcodecError("UNSUPPORTED", f"{tf.path}: not a .wcodec file")
        arr = (ctypes.c_char_p * len(names))(*[n.encode() for n in names])
        h = ctypes.c_void_p()
        _lib.check(P.wcodec_cuda_resident_create(c, arr, len(names), gpu, _lib.CUDA_RESIDENT_VERIFY if verify else 0,
                                                 ctypes.byref(h)))
        self.handle = h
        self.out_bytes = P.wcodec_cuda_resident_out_bytes(h)
        self.offsets = [P.wcodec_cuda_resident_offset(h, k) for k in range(len(names))]

    def decode(self, addr, stream):
        _lib.check(self._P.wcodec_cuda_resident_decode(self.handle, addr, self.out_bytes, stream))

    def check(self):
        _lib.check(self._P.wcodec_cuda_resident_check(self.handle))

    def device_bytes(self):
        return self._P.wcodec_cuda_resident_device_bytes(self.handle)

    def close(self):
        if self.handle is not None:
            self._P.wcodec_cuda_resident_free(self.handle)
            self.handle = None


class _Unit:
    """A unit's residents (each at a base offset of the unit's buffer), its
    tensors' places (name -> (offset, info)) and the tensors kept decoded
    (name -> tensor) because the GPU decoder does not take their tiles;
    per scratch buffer, made at first use: the parameters (views of the
    buffer) put into the modules; the placeholders put back after; its
    number in the plugin's schedule."""

    def __init__(self):
        self.residents, self.where, self.fixed, self.nbytes = [], {}, {}, 0
        self.params, self.holders, self.id = {}, [], None


class DeviceUnits:
    """The packed weights of PackedModule's units on one GPU. units: [(root,
    entries)] with entries (module, attr, name, device, file index) as
    packed.py builds them; files: the open TensorFiles; order: units in
    their run order (the blocks), decoded ahead in that order until the
    run shows another. verify: also decode each unit once at load and check
    every tile's decoded bytes against its checksum (dhash) on the host
    (payload checksums are checked as they are read either way). Raises
    WcodecError (a damaged tile names its tensor; BACKEND without the
    plugin or a GPU)."""

    def __init__(self, files, units, device, order=(), verify=False):
        P = _lib.cuda()
        if P is None:
            raise WcodecError("BACKEND", _lib.cuda_error())
        self.device = _torch.device(device)
        gpu = self.device.index if self.device.index is not None else _torch.cuda.current_device()
        self.device = _torch.device("cuda", gpu)
        self._P, self._units, self._all = P, {}, []
        try:
            # Units are built 4 at a time (the plugin is thread-safe and
            # releases the GIL): one unit's reads overlap another's upload,
            # planning and check.
            from concurrent.futures import ThreadPoolExecutor
            with ThreadPoolExecutor(max_workers=max(1, min(4, len(units)))) as pool:
                built, err = gather([pool.submit(self._build, P, files, entries, gpu, verify)
                                     for _, entries in units])
            if err is not None:
                raise err
            self._units = {root: u for (root, _), u in zip(units, built)}
        except BaseException:
            self.close()
            raise
        self._entries = {root: entries for root, entries in units}
        for root, entries in units:
            u = self._units[root]
            u.holders = [(mod._parameters, attr, _torch.nn.Parameter(_torch.empty(
                0, dtype=torch_dtype(files[fi].info(name).dtype), device=self.device), requires_grad=False))
                for mod, attr, name, _, fi in entries]
        order = [b for b in order if b in self._units]
        self.scratch_bytes = max((u.nbytes for u in self._units.values()), default=0)
        even = [self._units[b].nbytes for b in order[0::2]]
        odd = [self._units[b].nbytes for b in order[1::2]]
        second = min(max(even), max(odd)) if even and odd else self.scratch_bytes
        self._size = [max(self.scratch_bytes, _ALIGN), max(second, _ALIGN)]
        self._slots = [_torch.empty(n, dtype=_torch.uint8, device=self.device) for n in self._size]
        self._temp = {}                     # unit -> its own buffer, when neither scratch buffer was free
        self._work = None                   # work buffer of decodes outside the schedule
        self._h = None
        try:
            self._schedule(P, gpu, order)
        except BaseException:
            self.close()
            raise
        self._begin, self._end = P.wcodec_cuda_units_begin, P.wcodec_cuda_units_end
        self._buf_out = ctypes.c_int()
        self._buf_ref = ctypes.byref(self._buf_out)
        self._gpu = gpu
        raw = getattr(_torch._C, "_cuda_getCurrentRawStream", None)
        self._raw_stream = raw if raw is not None else (
            lambda i: _torch.cuda.current_stream(i).cuda_stream)

    def _schedule(self, P, gpu, order):
        """The plugin's schedule of the units (wcodec_cuda_units_*)."""
        h = ctypes.c_void_p()
        b0, b1 = self._slots
        _lib.check(P.wcodec_cuda_units_create(gpu, b0.data_ptr(), b0.numel(), b1.data_ptr(), b1.numel(),
                                              ctypes.byref(h)))
        self._h = h
        for u in self._units.values():
            n = len(u.residents)
            sets = (ctypes.c_void_p * max(n, 1))(*[r.handle.value for r, _ in u.residents])
            offs = (ctypes.c_uint64 * max(n, 1))(*[base for _, base in u.residents])
            uid = ctypes.c_uint32()
            _lib.check(P.wcodec_cuda_units_add(h, sets, offs, n, ctypes.byref(uid)))
            u.id = uid.value
        for a, b in zip(order, order[1:]):
            _lib.check(P.wcodec_cuda_units_set_next(h, self._units[a].id, self._units[b].id))

    def _counts(self):
        d, a = ctypes.c_uint64(), ctypes.c_uint64()
        if self._h is not None:
            self._P.wcodec_cuda_units_counts(self._h, ctypes.byref(d), ctypes.byref(a))
        return d.value, a.value

    @property
    def decoded(self):
        """Units decoded by the hooks, now or ahead."""
        return self._counts()[0]

    @property
    def prefetched(self):
        """Units whose decode ahead was used."""
        return self._counts()[1]

    @property
    def scratch_total(self):
        """Device bytes of the two scratch buffers and of the work buffers
        the units' decodes share (plane scratch of lossy codes; made at the
        first decode that needs them)."""
        return (sum(self._size) + (self._P.wcodec_cuda_units_device_bytes(self._h) if self._h is not None else 0)
                + (self._work.numel() if self._work is not None else 0))

    def _build(self, P, files, entries, gpu, verify):
        u = _Unit()
        by_file = {}
        for _, _, name, _, fi in entries:
            by_file.setdefault(fi, [])
            if name not in by_file[fi]:
                by_file[fi].append(name)
        for fi, names in by_file.items():
            groups = [names]
            try:
                res = [_Resident(P, files[fi], names, gpu, verify)]
            except WcodecError as e:
                if e.code != "UNSUPPORTED":
                    raise
                res = []  # one tensor at a time; those the GPU cannot decode stay decoded
                groups = []
                for n in names:
                    try:
                        res.append(_Resident(P, files[fi], [n], gpu, verify))
                        groups.append([n])
                    except WcodecError as e1:
                        if e1.code != "UNSUPPORTED":
                            raise
                        u.fixed[n] = self._decoded(files, fi, n)
            for r, names_r in zip(res, groups):
                self._all.append(r)
                base = (u.nbytes + _ALIGN - 1) // _ALIGN * _ALIGN
                u.residents.append((r, base))
                for n, off in zip(names_r, r.offsets):
                    u.where[n] = (base + off, files[fi].info(n))
                u.nbytes = base + r.out_bytes
        return u

    def _decoded(self, files, fi, name):
        """Tensor `name` of files[fi] decoded onto the GPU once (the loader's path)."""
        from . import _safe_open
        fw = TorchFramework()
        info = files[fi].info(name)
        d = fw.device(self.device)
        t = fw.empty(info, info.shape, d)
        _safe_open._read(fw, files, [(fi, info.begin, info.nbytes, t)], d)
        return t

    # ---- decoding ------------------------------------------------------

    def _decode(self, unit, buf, stream):
        """Decode a unit into buf outside the schedule (decode_into, or a
        unit for which neither scratch buffer was free), with a work buffer
        of its own made once for all units: a set's own work buffers would
        stay, up to 64 MiB each (lossy codes), for every buffer it is
        decoded into."""
        u = self._units[unit]
        need = max((self._P.wcodec_cuda_resident_work_bytes(r.handle) for r, _ in u.residents), default=0)
        if need and (self._work is None or self._work.numel() < need):
            self._work = _torch.empty(max(self._max_work(), need), dtype=_torch.uint8, device=self.device)
        w, wn = (self._work.data_ptr(), self._work.numel()) if need else (None, 0)
        addr, sp = buf.data_ptr(), stream.cuda_stream
        for r, base in u.residents:
            err = self._P.wcodec_cuda_resident_decode_work(r.handle, addr + base, r.out_bytes, w, wn, sp)
            if err:
                _lib.check(err)

    def _max_work(self):
        return max((self._P.wcodec_cuda_resident_work_bytes(r.handle) for r in self._all), default=0)

    @property
    def units(self):
        """The units (root modules), in the order they were given."""
        return list(self._units)

    def unit_bytes(self, unit):
        """Bytes of a unit's decoded weights (the buffer decode_into needs)."""
        return self._units[unit].nbytes

    def decode_into(self, unit, buf, stream=None):
        """Enqueue the decode of a unit's packed weights into buf (a CUDA
        uint8 tensor of at least unit_bytes(unit) bytes, 256-byte aligned:
        as torch allocates) on `stream` (default: the current one); the
        hooks do this themselves, this is for measuring the decode alone
        (not while the model runs: it shares a work buffer with the hooks'
        decodes of a unit for which no scratch buffer was free).
        Raises WcodecError, ValueError (buf too small or misplaced)."""
        if buf.dtype != _torch.uint8 or buf.device != self.device or buf.numel() < self.unit_bytes(unit):
            raise ValueError(f"decode_into: a uint8 tensor on {self.device} of {self.unit_bytes(unit)} bytes "
                             f"or more is needed")
        self._decode(unit, buf, stream if stream is not None else _torch.cuda.current_stream(self.device))

    def before(self, unit):
        """Put the unit's weights, decoded, into its modules (views of a
        scratch buffer, ready on the current stream); the plugin decodes
        the unit expected next on its own stream meanwhile."""
        u = self._units[unit]
        err = self._begin(self._h, u.id, self._raw_stream(self._gpu), self._buf_ref)
        if err:
            _lib.check(err)
        k = self._buf_out.value
        if k < 0:  # neither buffer free: one of its own, on the current stream
            buf = self._temp[unit] = _torch.empty(max(u.nbytes, 1), dtype=_torch.uint8, device=self.device)
            self._decode(unit, buf, _torch.cuda.current_stream(self.device))
            params = self._params(unit, buf)
        else:
            params = u.params.get(k)
            if params is None:
                params = u.params[k] = self._params(unit, self._slots[k])
        for d, attr, t in params:
            d[attr] = t

    def _params(self, unit, buf):
        return [(mod._parameters, attr, _torch.nn.Parameter(t, requires_grad=False))
                for mod, attr, t in self._views(unit, buf)]

    def _views(self, unit, buf):
        u, out = self._units[unit], []
        for mod, attr, name, _, _ in self._entries[unit]:
            if name in u.fixed:
                out.append((mod, attr, u.fixed[name]))
                continue
            off, info = u.where[name]
            dt = torch_dtype(info.dtype)
            n = info.nbytes
            t = buf[off:off + n].view(dt).view(tuple(info.shape)) if n else _torch.empty(
                tuple(info.shape), dtype=dt, device=self.device)
            out.append((mod, attr, t))
        return out

    def after(self, unit):
        """The unit ran: its placeholders go back into its modules, and its
        buffer is free once the stream it ran on reaches here."""
        u = self._units[unit]
        err = self._end(self._h, u.id)
        self._temp.pop(unit, None)
        for d, attr, t in u.holders:
            d[attr] = t
        if err:
            _lib.check(err)

    def check(self):
        """Raise WcodecError("CORRUPT") naming the tile if any completed
        decode failed a device stream check (synchronize first)."""
        for r in self._all:
            r.check()

    @property
    def resident_bytes(self):
        """Device bytes of the packed tiles and their descriptors."""
        return sum(r.device_bytes() for r in self._all)

    @property
    def fixed_bytes(self):
        """Device bytes of tensors kept decoded (tiles the GPU does not take)."""
        return sum(t.numel() * t.element_size() for u in self._units.values() for t in u.fixed.values())

    def close(self):
        if getattr(self, "_h", None) is not None:
            self._P.wcodec_cuda_units_free(self._h)  # waits for its decodes
            self._h = None
        for r in getattr(self, "_all", ()):
            r.close()
        self._all, self._slots, self._temp, self._work = [], [None, None], {}, None
