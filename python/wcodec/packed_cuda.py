"""wcodec.packed_cuda: the GPU path of wcodec.packed. A model's packed
weights are held in GPU memory as tiles (the CUDA plugin's
wcodec_cuda_resident_*, cuda/wcodec_cuda.h) and each unit (a block, or a
module outside the blocks) is decoded on the GPU into one of two scratch
buffers just before it runs, the next unit on a second CUDA stream while
the current one computes. No host work per step beyond the kernel launches;
outputs bit-identical to the plain model (the decode is lossless).

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
    (name -> tensor) because the GPU decoder does not take their tiles."""

    def __init__(self):
        self.residents, self.where, self.fixed, self.nbytes = [], {}, {}, 0


class DeviceUnits:
    """The packed weights of PackedModule's units on one GPU. units: [(root,
    entries)] with entries (module, attr, name, device, file index) as
    packed.py builds them; files: the open TensorFiles. verify: check every
    tile's decoded bytes against its checksum once, at load. Raises
    WcodecError (a damaged tile names its tensor; BACKEND without the
    plugin or a GPU)."""

    def __init__(self, files, units, device, order=(), verify=True):
        P = _lib.cuda()
        if P is None:
            raise WcodecError("BACKEND", _lib.cuda_error())
        self.device = _torch.device(device)
        gpu = self.device.index if self.device.index is not None else _torch.cuda.current_device()
        self.device = _torch.device("cuda", gpu)
        self._units, self._all = {}, []
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
        self._stream = _torch.cuda.Stream(device=self.device)
        self._slots = [None, None]          # scratch buffers of the largest unit
        self._owner = [None, None]          # unit using (or prefetched into) each slot
        self._free = [None, None]           # event: the slot's last reader is done
        self._pending = None                # (unit, slot, event) decoded ahead
        self._running = {}                  # unit -> slot (or a temporary buffer)
        self._next, self._last = {}, None
        for a, b in zip(order, list(order)[1:]):
            if a in self._units and b in self._units:
                self._next[a] = b
        self.scratch_bytes = max((u.nbytes for u in self._units.values()), default=0)
        self.prefetched = self.decoded = 0

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

    def _buffer(self, k):
        if self._slots[k] is None:
            self._slots[k] = _torch.empty(max(self.scratch_bytes, 1), dtype=_torch.uint8, device=self.device)
        return self._slots[k]

    def _decode(self, unit, buf, stream):
        u = self._units[unit]
        addr = buf.data_ptr()
        for r, base in u.residents:
            r.decode(addr + base, stream.cuda_stream)
        self.decoded += 1

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
        hooks do this themselves, this is for measuring the decode alone.
        Raises WcodecError, ValueError (buf too small or misplaced)."""
        if buf.dtype != _torch.uint8 or buf.device != self.device or buf.numel() < self.unit_bytes(unit):
            raise ValueError(f"decode_into: a uint8 tensor on {self.device} of {self.unit_bytes(unit)} bytes "
                             f"or more is needed")
        self._decode(unit, buf, stream if stream is not None else _torch.cuda.current_stream(self.device))

    def _free_slot(self, avoid=None):
        for k in (0, 1):
            if self._owner[k] is None and k != avoid:
                return k
        return None

    def before(self, unit):
        """The unit's weights decoded: [(module, attr, tensor)], views of a
        scratch buffer ready on the current stream."""
        cur = _torch.cuda.current_stream(self.device)
        p, self._pending = self._pending, None
        if p is not None and p[0] is unit:
            slot = p[1]
            cur.wait_event(p[2])
            self.prefetched += 1
        else:
            if p is not None:  # decoded ahead for nothing: its slot frees once that decode is done
                cur.wait_event(p[2])
                self._owner[p[1]], self._free[p[1]] = None, p[2]
            slot = self._free_slot()
            if slot is None:  # more units running at once than slots
                buf = _torch.empty(max(self._units[unit].nbytes, 1), dtype=_torch.uint8, device=self.device)
            else:
                buf = self._buffer(slot)
                self._owner[slot] = unit
            self._decode(unit, buf, cur)
            if slot is None:
                slot = buf
        self._running[unit] = slot
        buf = self._slots[slot] if isinstance(slot, int) else slot
        if self._last is not None and self._last is not unit:
            self._next[self._last] = unit
        self._last = unit
        nxt = self._next.get(unit)
        if nxt is not None and nxt is not unit and nxt not in self._running:
            k = self._free_slot(avoid=slot if isinstance(slot, int) else None)
            if k is not None:
                s = self._stream
                if self._free[k] is not None:
                    s.wait_event(self._free[k])
                self._owner[k] = nxt
                self._decode(nxt, self._buffer(k), s)
                self._pending = (nxt, k, s.record_event())
        return self._views(unit, buf)

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
        """The unit ran: its slot is free once the current stream reaches here."""
        slot = self._running.pop(unit, None)
        if isinstance(slot, int):
            self._owner[slot] = None
            self._free[slot] = _torch.cuda.current_stream(self.device).record_event()

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
        if getattr(self, "_stream", None) is not None:
            self._stream.synchronize()
        for r in getattr(self, "_all", ()):
            r.close()
        self._all, self._slots, self._pending = [], [None, None], None
