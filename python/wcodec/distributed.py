"""A checkpoint loaded by the ranks of a torch.distributed process group
(wcodec.torch.load_checkpoint(..., process_group=pg, tp_plan=...)).

Replicated tensors (the plan names none, or they match no pattern) end up
whole on every rank; a "colwise" tensor is split on dim 0 and a "rowwise"
one on its last dim, rank r getting exactly
`tensor.tensor_split(world_size, dim)[r]` (transformers' words for
tensor parallelism; patterns are fnmatch globs over tensor names, the
first that matches wins).

How the bytes move:
  - a tile that one rank alone needs (the inner tiles of a colwise slice:
    contiguous bytes of the tensor) is read and decoded by that rank, from
    the file;
  - every other tile (those of replicated and rowwise tensors, tiles a
    split between ranks cuts, tiles shared with another tensor) is in a
    unit of at most `exchange_bytes` of payload, each unit's payloads split
    between the ranks by bytes: each rank reads its share (checking every
    payload's checksum), the ranks all_gather the packed bytes, and each
    decodes what it returns from the unit's tiles from memory
    (wc_load_host_payloads on the CPU, wcodec_cuda_load_payloads on the
    GPU; both check each payload again before decoding, so bytes from
    another rank never decode wrong). So the ranks of a host read each
    payload byte once between them, and packed bytes, not decoded ones,
    cross between processes and over PCIe. With NCCL the exchange runs
    between the GPUs (staged through page-locked host memory on both
    sides); with gloo, in host memory, the next unit's read and exchange
    running while this one decodes. Rowwise tensors are decoded a unit at
    a time into a scratch buffer and their columns copied out.
  - plain safetensors files are read by each rank for what it returns.

Memory beyond the returned tensors, per rank: the exchange buffers (the
unit's payloads of every rank: about exchange_bytes, plus a tile of
rounding per rank; twice that with gloo, two units being in flight; on a
GPU page-locked, and again in device memory with NCCL), a rowwise unit's
decoded bytes, and on a GPU the loader's staging ring of 48 MiB and its
lanes.

Failures: a rank whose read of its share fails still takes part in that
unit's exchange (with what its buffer holds, never decoded), so no rank
waits alone in it; the agreement after the unit before raises it.

Failures: after each step that can fail (opening, reading a share,
decoding a unit) the ranks agree on whether any failed (an all_reduce);
if one did, every rank raises the first failing rank's error (its type:
WcodecError with its code, FileNotFoundError, KeyError, ValueError;
the message prefixed with "rank N: "), so no rank is left waiting in a
collective.
"""
import bisect
import fnmatch

import torch as _torch
import torch.distributed as _dist

from . import _file
from ._lib import WcodecError

__all__ = ["EXCHANGE_BYTES", "split_bounds", "plan_of", "load_tensors", "agree_failure"]

# Payload bytes exchanged per round (every rank's share together).
EXCHANGE_BYTES = 64 << 20

_MODES = ("colwise", "rowwise")


def split_bounds(n, world, rank):
    """[lo, hi) of part `rank` of n items cut in `world` parts as
    torch.tensor_split cuts them: the first n % world parts one longer."""
    q, m = divmod(n, world)
    lo = rank * q + min(rank, m)
    return lo, lo + q + (1 if rank < m else 0)


def plan_of(name, tp_plan):
    """"colwise", "rowwise" or None (replicated) for tensor `name` under
    tp_plan {glob: mode}: the first glob (in the dict's order) that matches
    the name with fnmatch. ValueError for another mode."""
    for pattern, mode in (tp_plan or {}).items():
        if fnmatch.fnmatchcase(name, pattern):
            if mode not in _MODES:
                raise ValueError(f"tp_plan[{pattern!r}] = {mode!r}: wcodec splits 'colwise' or 'rowwise' tensors")
            return mode
    return None


class _Target:
    """One tensor this rank returns: its file, info, mode, and output."""
    __slots__ = ("name", "fi", "info", "mode", "out", "cols", "elem")

    def __init__(self, name, fi, info, mode, out):
        self.name, self.fi, self.info, self.mode, self.out = name, fi, info, mode, out
        shape = info.shape
        n = 1
        for d in shape:
            n *= d
        self.elem = info.nbytes // n if n else 0
        self.cols = shape[-1] if shape else 1


def _error_of(exc):
    if exc is None:
        return None
    return (type(exc).__name__, getattr(exc, "code", None), getattr(exc, "reason", None) or str(exc))


def _raise(rank, err):
    kind, code, msg = err
    msg = f"rank {rank}: {msg}"
    if kind == "WcodecError":
        raise WcodecError(code, msg)
    for cls in (FileNotFoundError, KeyError, ValueError, TypeError, MemoryError):
        if kind == cls.__name__:
            raise cls(msg)
    raise WcodecError("IO", f"{msg} ({kind})")


class _Group:
    """The process group and the consensus on failures."""

    def __init__(self, pg, flag_device):
        self.pg = pg
        self.rank, self.world = _dist.get_rank(pg), _dist.get_world_size(pg)
        self.flag_device = flag_device

    def agree(self, exc, settle=None):
        """Every rank calls this after a step: raises on every rank the
        first failing rank's error, if any rank failed, after calling
        settle() (waiting for an exchange still running)."""
        flag = _torch.tensor([1 if exc is not None else 0], dtype=_torch.int32, device=self.flag_device)
        _dist.all_reduce(flag, op=_dist.ReduceOp.MAX, group=self.pg)
        if not int(flag.item()):
            return
        if settle is not None:
            settle()
        errs = [None] * self.world
        _dist.all_gather_object(errs, _error_of(exc), group=self.pg)
        k = next(i for i, e in enumerate(errs) if e is not None)
        _raise(k, errs[k])


def _flag_device(pg, dev):
    if _dist.get_backend(pg) == "nccl":
        return _torch.device("cuda", dev[1] if dev[0] == "cuda" else _torch.cuda.current_device())
    return _torch.device("cpu")


def agree_failure(fw, process_group, device, exc):
    """For a rank that failed before load_tensors (opening the files):
    takes part in its first consensus, so every rank raises exc."""
    try:
        g = _Group(process_group, _flag_device(process_group, fw.device(device)))
    except Exception:  # noqa: BLE001 - the device itself is the failure
        g = _Group(process_group, _torch.device("cpu"))
    g.agree(exc)
    raise exc


def load_tensors(fw, files, names_per_file, device, process_group, tp_plan=None, exchange_bytes=EXCHANGE_BYTES):
    """The tensors names_per_file[i] of files[i] (TensorFile), each rank's
    share under tp_plan, as one dict name -> torch.Tensor on `device`.
    Every rank of process_group must call it with the same files, names,
    plan and exchange_bytes. Raises on every rank what any rank raised."""
    g = None
    exc, targets = None, []
    try:
        dev = fw.device(device)
        g = _Group(process_group, _flag_device(process_group, dev))
        if exchange_bytes < 1:
            raise ValueError(f"exchange_bytes {exchange_bytes}: at least 1")
        for fi, f in enumerate(files):
            for name in names_per_file[fi]:
                info = f.info(name)
                mode = plan_of(name, tp_plan) if info.shape else None
                shape = list(info.shape)
                if mode == "colwise":
                    lo, hi = split_bounds(shape[0], g.world, g.rank)
                    shape[0] = hi - lo
                elif mode == "rowwise":
                    lo, hi = split_bounds(shape[-1], g.world, g.rank)
                    shape[-1] = hi - lo
                targets.append(_Target(name, fi, info, mode, fw.empty(info, shape, dev)))
    except Exception as e:  # noqa: BLE001 - every rank must learn of it
        exc = e
    if g is None:
        raise exc
    g.agree(exc)
    _load(fw, files, targets, dev, g, exchange_bytes)
    return {t.name: t.out for t in targets}


def _colwise_item(t, g):
    """(file, offset, length, address) of this rank's rows of a colwise tensor."""
    return (t.fi, *_colwise_range(t, g.world, g.rank), t.out.data_ptr())


def _copy_columns(t, g, x0, x1, scratch):
    """Copy this rank's columns of tensor bytes [x0, x1) (relative to the
    tensor, decoded into scratch) into t.out."""
    E, cols = t.elem, t.cols
    c0, c1 = split_bounds(cols, g.world, g.rank)
    if c1 == c0 or x1 <= x0:
        return
    rb = cols * E
    out = t.out.view(-1).view(_torch.uint8).view(-1, (c1 - c0) * E)
    jf, jl = -(-x0 // rb), x1 // rb  # whole rows [jf, jl)
    if jf < jl:
        block = scratch[jf * rb - x0:jl * rb - x0].view(jl - jf, rb)[:, c0 * E:c1 * E]
        out[jf:jl].copy_(block)
    for j in {x0 // rb, (x1 - 1) // rb}:
        if jf <= j < jl:
            continue
        u, v = max(x0, j * rb + c0 * E), min(x1, j * rb + c1 * E)
        if u < v:
            out[j, u - j * rb - c0 * E:v - j * rb - c0 * E].copy_(scratch[u - x0:v - x0])


def _by_rows(t, g, scratch_bytes, io):
    """A rowwise tensor of a plain file read in row blocks of at most
    scratch_bytes (one row at least) through a scratch buffer, its columns
    copied out."""
    info = t.info
    rb = t.cols * t.elem
    rows = info.nbytes // rb if rb else 0
    step = max(1, scratch_bytes // rb) if rb else 1
    scratch = io.scratch(min(rows, step) * rb)
    for j0 in range(0, rows, step):
        j1 = min(rows, j0 + step)
        s = scratch[:(j1 - j0) * rb]
        io.read([(t.fi, info.begin + j0 * rb, (j1 - j0) * rb, s.data_ptr())])
        _copy_columns(t, g, j0 * rb, j1 * rb, s)


def _colwise_range(t, world, rank):
    """(offset, length) in the data section of rank's rows of colwise t."""
    rows = t.info.shape[0]
    row_bytes = t.info.nbytes // rows if rows else 0
    lo, hi = split_bounds(rows, world, rank)
    return t.info.begin + lo * row_bytes, (hi - lo) * row_bytes


def _consumers(files, packed, world):
    """{file: {tile: rank}} for every tile the targets need: the one rank
    that alone needs it (a colwise slice's inner tiles) or -1 (every
    rank, or several: replicated and rowwise tensors, tiles a split
    between ranks cuts, tiles shared with another tensor)."""
    cons = {}

    def mark(fi, off, n, who):
        if n == 0:
            return
        a, b = files[fi].tiles(off, n)
        d = cons.setdefault(fi, {})
        for t in range(a, b + 1):
            prev = d.get(t, who)
            d[t] = who if prev == who else -1

    for t in packed:
        if t.mode == "colwise":
            for k in range(world):
                mark(t.fi, *_colwise_range(t, world, k), k)
        else:
            mark(t.fi, t.info.begin, t.info.nbytes, -1)
    return cons


def _runs_of(tiles):
    """Sorted tile numbers as maximal runs [(first, last)]."""
    runs = []
    for t in tiles:
        if runs and t == runs[-1][1] + 1:
            runs[-1][1] = t
        else:
            runs.append([t, t])
    return [tuple(r) for r in runs]


def _units(files, cons, sizes, limit):
    """The tiles every rank needs, as units [(file, first, last)] of
    consecutive tiles with at most `limit` payload bytes (one tile at
    least), in file and tile order."""
    units = []
    for fi in sorted(cons):
        shared = sorted(t for t, who in cons[fi].items() if who == -1)
        for a, b in _runs_of(shared):
            start, acc = a, 0
            for t in range(a, b + 1):
                n = sizes[fi][t]
                if acc and acc + n > limit:
                    units.append((fi, start, t - 1))
                    start, acc = t, 0
                acc += n
            units.append((fi, start, b))
    return units


def _shares(sizes, a, b, world):
    """Tiles a..b (payload sizes[t]) cut into `world` runs of about equal
    payload bytes: [(first, last) or None] per rank, and each run's bytes."""
    total = sum(sizes[a:b + 1])
    runs, nbytes, acc = [None] * world, [0] * world, 0
    for t in range(a, b + 1):
        n = sizes[t]
        r = min(world - 1, (2 * acc + n) * world // (2 * total)) if total else (t - a) * world // (b - a + 1)
        acc += n
        runs[r] = (runs[r][0], t) if runs[r] else (t, t)
        nbytes[r] += n
    return runs, nbytes


def _payload_sizes(f):
    """Every tile's payload bytes of a .wcodec file."""
    return [f.tile_extent(t, t)[3] for t in range(f.ntiles())]


class _Io:
    """Reads and decodes for one device: the host's CPUs (device "cpu")
    or GPU N through the CUDA plugin; exchange buffers where the group's
    backend moves them (NCCL: device memory, else host memory), staged
    through page-locked host memory on a GPU."""

    def __init__(self, fw, files, dev, g, width):
        self.files, self.dev, self.g = files, dev, g
        cuda = dev[0] == "cuda"
        self.torch_dev = _torch.device("cuda", dev[1]) if cuda else _torch.device("cpu")
        self.on_device = cuda and _dist.get_backend(g.pg) == "nccl"
        if cuda:
            fw.before_device_write(dev)
        host = dict(dtype=_torch.uint8, pin_memory=cuda)
        # Two sets of host buffers where the exchange runs on the host
        # (gloo): round k+1's exchange fills one while round k decodes
        # from the other.
        sets = 1 if self.on_device else 2
        self.send = [_torch.empty(width, **host) for _ in range(sets)] if width else []
        self.recv = [[_torch.empty(width, **host) for _ in range(g.world)] for _ in range(sets)] if width else []
        if self.on_device and width:
            self.send_d = _torch.empty(width, dtype=_torch.uint8, device=self.torch_dev)
            self.recv_d = [_torch.empty(width, dtype=_torch.uint8, device=self.torch_dev) for _ in range(g.world)]

    def read(self, items):
        """Ranges [(file, offset, length, address)] from the files."""
        if self.dev[0] == "cuda":
            _file.load_cuda(self.files, items, self.dev[1], staging_bytes=_STAGING)
        else:
            _file.load_host(self.files, items)

    def decode(self, runs, items):
        """Ranges whose tiles' payloads are in runs (host memory)."""
        if self.dev[0] == "cuda":
            _file.load_cuda_payloads(self.files, runs, items, self.dev[1], staging_bytes=_STAGING)
        else:
            _file.load_host_payloads(self.files, runs, items)

    def scratch(self, n):
        return _torch.empty(n, dtype=_torch.uint8, device=self.torch_dev)

    def all_gather(self, w, b):
        """Start every rank's send[b][:w] into recv[b][k][:w] (host memory);
        returns what to call to wait for it. On the host (gloo) it runs
        while the caller decodes; through the GPUs (NCCL) it is done on
        return."""
        if not self.on_device:
            work = _dist.all_gather([r[:w] for r in self.recv[b]], self.send[b][:w], group=self.g.pg, async_op=True)
            return work.wait
        self.send_d[:w].copy_(self.send[b][:w], non_blocking=True)
        _dist.all_gather([r[:w] for r in self.recv_d], self.send_d[:w], group=self.g.pg)
        for h, d in zip(self.recv[b], self.recv_d):
            h[:w].copy_(d[:w], non_blocking=True)
        _torch.cuda.current_stream(self.torch_dev).synchronize()
        return lambda: None

    def finish(self):
        if self.dev[0] == "cuda":
            _torch.cuda.synchronize(self.dev[1])


# The GPU loader's page-locked staging ring in a distributed load (its
# default is 128 MiB), so that ring, lanes and exchange buffers stay
# within 256 MiB of page-locked memory.
_STAGING = 48 << 20


def _load(fw, files, targets, dev, g, exchange_bytes):
    """Tiles one rank alone needs read by it from the files, the rest
    exchanged packed and decoded from memory (see the module's note)."""
    exc, dest, units, plans, io = None, [], [], [], None
    try:
        own = []
        packed = [t for t in targets if t.info.nbytes and t.out.numel() and files[t.fi].packed]
        for t in targets:  # plain files: each rank reads what it returns
            if not t.info.nbytes or not t.out.numel() or files[t.fi].packed:
                continue
            if t.mode == "colwise":
                own.append(_colwise_item(t, g))
            elif t.mode is None:
                own.append((t.fi, t.info.begin, t.info.nbytes, t.out.data_ptr()))
        cons = _consumers(files, packed, g.world)
        sizes = {fi: _payload_sizes(files[fi]) for fi in cons}
        for t in packed:  # a colwise slice's tiles that this rank alone needs
            if t.mode != "colwise":
                continue
            off, n = _colwise_range(t, g.world, g.rank)
            if n:
                a, b = files[t.fi].tiles(off, n)
                for p, q in _runs_of([x for x in range(a, b + 1) if cons[t.fi][x] == g.rank]):
                    d0, dl, _, _ = files[t.fi].tile_extent(p, q)
                    lo, hi = max(off, d0), min(off + n, d0 + dl)
                    own.append((t.fi, lo, hi - lo, t.out.data_ptr() + (lo - off)))
        units = _units(files, cons, sizes, exchange_bytes)
        plans = [_shares(sizes[fi], a, b, g.world) for fi, a, b in units]
        io = _Io(fw, files, dev, g, max((max(nb) for _, nb in plans), default=0))
        io.read(own)
        for t in targets:  # plain files' rowwise tensors
            if t.mode == "rowwise" and not files[t.fi].packed and t.info.nbytes and t.out.numel():
                _by_rows(t, g, exchange_bytes, io)
        # what this rank takes from the exchanged tiles: (file, begin, end, target)
        for t in packed:
            if t.mode == "colwise":
                off, n = _colwise_range(t, g.world, g.rank)
                if n:
                    dest.append((t.fi, off, off + n, t))
            else:
                dest.append((t.fi, t.info.begin, t.info.end, t))
        dest.sort(key=lambda x: (x[0], x[1]))
    except Exception as e:  # noqa: BLE001
        exc = e
    g.agree(exc)
    keys = [(d[0], d[1]) for d in dest]

    def start(k):
        """Read this rank's share of unit k into a send buffer and start
        its exchange; (wait, buffer set). A failed read is kept in exc,
        and the exchange still runs (no rank may be left in it alone):
        the agree after the unit before raises it everywhere."""
        nonlocal exc
        (fi, _, _), (runs, nbytes) = units[k], plans[k]
        b = k % len(io.send)
        try:
            if runs[g.rank]:
                files[fi].read_payloads(runs[g.rank][0], runs[g.rank][1], io.send[b].data_ptr())
        except Exception as e:  # noqa: BLE001
            exc = exc or e
        return io.all_gather(max(nbytes), b), b

    pending = start(0) if units else None
    for k, ((fi, a, b), (runs, nbytes)) in enumerate(zip(units, plans)):
        wait, buf = pending
        wait()
        # the next unit's read and exchange run while this one decodes
        pending = start(k + 1) if k + 1 < len(units) else None
        try:
            f = files[fi]
            d0, dl, _, _ = f.tile_extent(a, b)
            d1 = d0 + dl
            mem = [(fi, r[0], r[1], io.recv[buf][j].data_ptr()) for j, r in enumerate(runs) if r]
            items, post = [], []
            i = max(0, bisect.bisect_right(keys, (fi, d0)) - 1)
            while i < len(dest) and keys[i] < (fi, d1):
                dfi, beg, end, t = dest[i]
                i += 1
                lo, hi = max(beg, d0), min(end, d1)
                if dfi != fi or lo >= hi:
                    continue
                if t.mode == "rowwise":
                    s = io.scratch(hi - lo)
                    items.append((fi, lo, hi - lo, s.data_ptr()))
                    post.append((t, lo - t.info.begin, hi - t.info.begin, s))
                else:  # the whole tensor, or this rank's rows
                    items.append((fi, lo, hi - lo, t.out.data_ptr() + (lo - beg)))
            if exc is None:
                io.decode(mem, items)
                for t, x0, x1, s in post:
                    _copy_columns(t, g, x0, x1, s)
        except Exception as e:  # noqa: BLE001
            exc = exc or e
        g.agree(exc, pending[0] if pending is not None else None)  # a raise leaves no exchange running
    try:
        if io is not None:
            io.finish()
    except Exception as e:  # noqa: BLE001
        exc = e
    g.agree(exc)
