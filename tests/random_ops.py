#!/usr/bin/env python3
"""random_ops.py MNT REF SEED THREADS OPS

Random file-system operations on a wcodecfs mount MNT from THREADS threads
at once, OPS each, every answer checked against the reference tree REF:
what the mount must show (the original .safetensors files, the images a
.qvq unpacks to, the files passed through, the same symlinks). Operations:

  read     pread of a random file at offsets spread over tile boundaries,
           the end of the file and past it, lengths from 1 byte to 3 MiB,
           through descriptors kept open across operations (and closed at
           random, so opens and releases race with reads)
  mmap     a random slice of a file mapped whole (MAP_SHARED or MAP_PRIVATE);
           with RANDOM_OPS_DIRECT_IO=1 (a mount with -o direct_io) a shared
           mapping of a decoded file (not of a passed-through one) may fail
           with ENODEV, as the kernel refuses it unless libfuse negotiated
           DIRECT_IO_ALLOW_MMAP
  direct   a pread through O_DIRECT (page-aligned offset and buffer)
  whole    a whole file read in chunks of a random size
  stat     type, size and symlink target of a random entry
  list     the names in a random directory
  hidden   the sources (X.wcodec, Y.qvq) and made-up names are absent
  write    opening a file for writing fails with EROFS

The operations come from random.Random(SEED + thread), so a failure is
reproducible; the first failures are printed with the operation that made
them. Exit 0 when every answer matched, 1 otherwise. Standard library only.
"""
import errno
import mmap
import os
import random
import stat
import sys
import threading

KIB, MIB = 1 << 10, 1 << 20
DIRECT_IO = os.environ.get("RANDOM_OPS_DIRECT_IO") == "1"
LENGTHS = (1, 7, 4095, 4096, 4097, 65536, 131072 + 7, MIB, MIB + 3, 3 * MIB)
BOUNDARIES = (4 * KIB, 64 * KIB, MIB)


def scan(ref):
    """Relative paths of REF's files, directories and symlinks."""
    files, dirs, links = [], [""], []
    for root, ds, fs in os.walk(ref):
        rel = os.path.relpath(root, ref)
        rel = "" if rel == "." else rel
        for d in ds:
            p = os.path.join(rel, d)
            (links if os.path.islink(os.path.join(ref, p)) else dirs).append(p)
        for f in fs:
            p = os.path.join(rel, f)
            (links if os.path.islink(os.path.join(ref, p)) else files).append(p)
    return sorted(files), sorted(dirs), sorted(links)


class Worker(threading.Thread):
    def __init__(self, mnt, ref, tree, seed, ops, failures, lock):
        super().__init__()
        self.mnt, self.ref = mnt, ref
        self.files, self.dirs, self.links = tree
        self.rng = random.Random(seed)
        self.ops = ops
        self.failures, self.lock = failures, lock
        self.fds = {}  # path -> (mount fd, reference fd), kept across operations
        self.counts = {}

    def fail(self, what):
        with self.lock:
            self.failures.append(what)

    def sizes(self, path):
        return os.stat(os.path.join(self.ref, path)).st_size

    def pick_offset(self, size):
        r = self.rng.random()
        if r < 0.3 or size == 0:
            return self.rng.randrange(size + 1) if size else self.rng.randrange(64)
        if r < 0.6:
            b = self.rng.choice(BOUNDARIES)
            k = self.rng.randrange(size // b + 1)
            return max(0, k * b + self.rng.randrange(-3, 4))
        if r < 0.85:
            return max(0, size - self.rng.choice(LENGTHS) + self.rng.randrange(-2, 3))
        return size + self.rng.randrange(0, 2 * MIB)

    def fd_pair(self, path):
        if path not in self.fds:
            self.fds[path] = (os.open(os.path.join(self.mnt, path), os.O_RDONLY),
                              os.open(os.path.join(self.ref, path), os.O_RDONLY))
        return self.fds[path]

    def close_some(self):
        for path in list(self.fds):
            if self.rng.random() < 0.3:
                for fd in self.fds.pop(path):
                    os.close(fd)

    def op_read(self):
        path = self.rng.choice(self.files)
        size = self.sizes(path)
        off, n = self.pick_offset(size), self.rng.choice(LENGTHS)
        m, r = self.fd_pair(path)
        got, want = os.pread(m, n, off), os.pread(r, n, off)
        if got != want:
            self.fail("read %s at %d, %d bytes: %d bytes back, %d expected%s" %
                      (path, off, n, len(got), len(want),
                       ", contents differ" if len(got) == len(want) else ""))

    def op_mmap(self):
        path = self.rng.choice(self.files)
        size = self.sizes(path)
        if size == 0:
            return
        off = self.rng.randrange(size)
        n = min(self.rng.choice(LENGTHS), size - off)
        flags = self.rng.choice((mmap.MAP_SHARED, mmap.MAP_PRIVATE))
        with open(os.path.join(self.mnt, path), "rb") as f:
            try:
                mm = mmap.mmap(f.fileno(), 0, flags, mmap.PROT_READ)
            except OSError as e:
                decoded = path.endswith((".safetensors", ".ppm", ".npy")) or "pics" in path.split(os.sep)
                if not (DIRECT_IO and decoded and flags == mmap.MAP_SHARED and e.errno == errno.ENODEV):
                    raise
                self.counts["op_mmap_shared_refused"] = self.counts.get("op_mmap_shared_refused", 0) + 1
                mm = mmap.mmap(f.fileno(), 0, mmap.MAP_PRIVATE, mmap.PROT_READ)
            with mm:
                got = mm[off:off + n]
        with open(os.path.join(self.ref, path), "rb") as f:
            f.seek(off)
            want = f.read(n)
        if got != want:
            self.fail("mmap %s [%d, +%d) differs" % (path, off, n))

    def op_whole(self):
        path = self.rng.choice(self.files)
        chunk = self.rng.choice(LENGTHS[2:])
        parts = []
        with open(os.path.join(self.mnt, path), "rb", buffering=0) as f:
            while True:
                b = f.read(chunk)
                if not b:
                    break
                parts.append(b)
        with open(os.path.join(self.ref, path), "rb") as f:
            if b"".join(parts) != f.read():
                self.fail("whole %s in chunks of %d differs" % (path, chunk))

    def op_direct(self):
        path = self.rng.choice(self.files)
        size = self.sizes(path)
        off = self.rng.randrange(size // 4096 + 1) * 4096
        n = self.rng.choice((4096, 65536, MIB))
        buf = mmap.mmap(-1, n)  # page-aligned, as O_DIRECT wants
        fd = os.open(os.path.join(self.mnt, path), os.O_RDONLY | os.O_DIRECT)
        try:
            got = buf[:os.preadv(fd, [buf], off)]
        finally:
            os.close(fd)
            buf.close()
        with open(os.path.join(self.ref, path), "rb") as f:
            f.seek(off)
            want = f.read(n)
        if got != want:
            self.fail("O_DIRECT read %s at %d, %d bytes: %d bytes back, %d expected" %
                      (path, off, n, len(got), len(want)))

    def op_stat(self):
        path = self.rng.choice(self.files + self.dirs + self.links)
        a = os.lstat(os.path.join(self.mnt, path))
        b = os.lstat(os.path.join(self.ref, path))
        if stat.S_IFMT(a.st_mode) != stat.S_IFMT(b.st_mode):
            self.fail("stat %s: type %o, expected %o" % (path, stat.S_IFMT(a.st_mode),
                                                        stat.S_IFMT(b.st_mode)))
        elif stat.S_ISREG(a.st_mode) and a.st_size != b.st_size:
            self.fail("stat %s: size %d, expected %d" % (path, a.st_size, b.st_size))
        elif stat.S_ISLNK(a.st_mode) and (os.readlink(os.path.join(self.mnt, path)) !=
                                          os.readlink(os.path.join(self.ref, path))):
            self.fail("readlink %s differs" % path)

    def op_list(self):
        path = self.rng.choice(self.dirs)
        got = sorted(os.listdir(os.path.join(self.mnt, path)))
        want = sorted(os.listdir(os.path.join(self.ref, path)))
        if got != want:
            self.fail("list %r: %s, expected %s" % (path, got, want))

    def op_hidden(self):
        path = self.rng.choice(self.files + self.dirs[1:])
        d, base = os.path.split(path)
        stem = base[:-len(".safetensors")] if base.endswith(".safetensors") else base
        for name in (stem + ".wcodec", base + ".qvq", base + "-nonexistent"):
            if os.path.lexists(os.path.join(self.ref, d, name)):
                continue
            try:
                os.lstat(os.path.join(self.mnt, d, name))
                self.fail("%s exists in the mount" % os.path.join(d, name))
            except FileNotFoundError:
                pass

    def op_write(self):
        path = self.rng.choice(self.files)
        try:
            fd = os.open(os.path.join(self.mnt, path), os.O_WRONLY)
            os.close(fd)
            self.fail("open %s for writing succeeded" % path)
        except OSError as e:
            if e.errno != errno.EROFS:
                self.fail("open %s for writing: %s, expected EROFS" % (path, e))

    def run(self):
        table = ((self.op_read, 50), (self.op_mmap, 8), (self.op_whole, 2), (self.op_direct, 4),
                 (self.op_stat, 12),
                 (self.op_list, 6), (self.op_hidden, 4), (self.op_write, 2))
        ops = [f for f, _ in table]
        weights = [w for _, w in table]
        try:
            for i in range(self.ops):
                op = self.rng.choices(ops, weights)[0]
                try:
                    op()
                except OSError as e:
                    self.fail("%s: %s" % (op.__name__, e))
                self.counts[op.__name__] = self.counts.get(op.__name__, 0) + 1
                if i % 16 == 15:
                    self.close_some()
                if len(self.failures) > 20:
                    break
        finally:
            for pair in self.fds.values():
                for fd in pair:
                    os.close(fd)


def main(argv):
    if len(argv) != 6:
        print(__doc__, file=sys.stderr)
        return 2
    mnt, ref = argv[1], argv[2]
    seed, nthreads, ops = int(argv[3]), int(argv[4]), int(argv[5])
    tree = scan(ref)
    if not tree[0]:
        print("FAIL: no files in %s" % ref, file=sys.stderr)
        return 1
    failures, lock = [], threading.Lock()
    workers = [Worker(mnt, ref, tree, seed + i, ops, failures, lock) for i in range(nthreads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    counts = {}
    for w in workers:
        for k, v in w.counts.items():
            counts[k] = counts.get(k, 0) + v
    print("# %d files, %d directories, %d symlinks; operations: %s" % (
        len(tree[0]), len(tree[1]), len(tree[2]),
        ", ".join("%s %d" % (k[3:], v) for k, v in sorted(counts.items()))))
    for f in failures[:20]:
        print("FAIL: " + f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
