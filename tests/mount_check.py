#!/usr/bin/env python3
"""mount_check.py - byte-level checks of a wcodecfs mount for tests/mount_*.sh.

Subcommands (exit status 0 = checks passed, 1 = a check failed):
  slices VIRT ORIG N SEED    N random pread() slices and N mmap() slices
                             (MAP_SHARED and MAP_PRIVATE) of VIRT equal ORIG's,
                             including slices across tile boundaries and the end
  tiles WCODEC               print "index voff dsize coff csize" per tile
                             (docs/FORMAT.md section 1 header and tile index)
  flip WCODEC TILE OUT       copy WCODEC to OUT with one byte of TILE's payload
                             inverted; print "voff dsize" of that tile
  damaged VIRT ORIG VOFF DSIZE
                             reads touching [VOFF, VOFF+DSIZE) fail with EIO,
                             reads elsewhere return ORIG's bytes
  readers VIRT ORIG N SEED   N threads read VIRT concurrently in shuffled
                             128 KiB..1 MiB pieces, dropping its page cache
                             (POSIX_FADV_DONTNEED) so reads reach the daemon
"""
import errno
import mmap
import os
import random
import struct
import sys
import threading

HEADER = 160  # fixed header bytes (format version 1)


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def read_tiles(path):
    with open(path, "rb") as f:
        h = f.read(HEADER)
        if len(h) != HEADER or h[:8] != b"WCODEC\r\n":
            fail("%s: not a wcodec file" % path)
        ntiles = struct.unpack_from("<I", h, 32)[0]
        index_off, index_len = struct.unpack_from("<QQ", h, 96)
        if index_len != 48 * ntiles:
            fail("%s: index of %d bytes for %d tiles" % (path, index_len, ntiles))
        f.seek(index_off)
        idx = f.read(index_len)
    tiles = []
    for i in range(ntiles):
        voff, coff, csize, dsize = struct.unpack_from("<QQII", idx, 48 * i)
        tiles.append((voff, dsize, coff, csize))
    return tiles


def slices(virt, orig, n, seed):
    rnd = random.Random(seed)
    want = open(orig, "rb").read()
    size = len(want)
    if os.path.getsize(virt) != size:
        fail("%s: size %d, expected %d" % (virt, os.path.getsize(virt), size))
    fd = os.open(virt, os.O_RDONLY)
    try:
        spots = [0, size // 2, max(0, size - 1)]
        for i in range(n):
            if i < len(spots):
                off = spots[i]
            else:
                off = rnd.randrange(size) if size else 0
            ln = rnd.choice([1, 7, 4096, 65536, 131072, 1 << 20, 3 << 20])
            got = os.pread(fd, ln, off)
            if got != want[off:off + ln]:
                fail("pread(%d, %d) differs" % (ln, off))
        if size:
            for access in (mmap.ACCESS_READ, mmap.ACCESS_COPY):  # MAP_SHARED, MAP_PRIVATE
                with mmap.mmap(fd, 0, access=access) as mm:
                    for i in range(n):
                        off = rnd.randrange(size)
                        ln = rnd.choice([1, 100, 4096, 70000, 1 << 20])
                        if mm[off:off + ln] != want[off:off + ln]:
                            fail("mmap slice [%d, +%d) differs" % (off, ln))
                    if mm[size - 10:] != want[size - 10:]:
                        fail("mmap tail differs")
    finally:
        os.close(fd)


def flip(path, tile, out):
    tiles = read_tiles(path)
    voff, dsize, coff, csize = tiles[tile]
    data = bytearray(open(path, "rb").read())
    data[coff + csize // 2] ^= 0xFF
    with open(out, "wb") as f:
        f.write(data)
    print(voff, dsize)


def damaged(virt, orig, voff, dsize):
    want = open(orig, "rb").read()
    size = len(want)
    fd = os.open(virt, os.O_RDONLY)
    try:
        bad_end = voff + dsize
        # Reads inside, across the start and across the end of the tile fail.
        for off, ln in ((voff, 4096), (voff + dsize // 2, 100), (max(0, voff - 4096), 8192),
                        (max(0, bad_end - 10), 20), (voff, dsize)):
            try:
                got = os.pread(fd, ln, off)
            except OSError as e:
                if e.errno != errno.EIO:
                    fail("pread(%d, %d): %s, expected EIO" % (ln, off, e))
                continue
            # A read that got good pages before the damaged one returns them
            # (the kernel's short count on a late error); never damaged bytes.
            if off + len(got) > voff // 4096 * 4096 or got != want[off:off + len(got)]:
                fail("pread(%d, %d) of the damaged tile returned %d bytes" % (ln, off, len(got)))
        # Everything outside the tile's pages (the kernel reads whole pages)
        # still reads correctly, in pieces that end right at them.
        good = [(0, voff // 4096 * 4096), (-(-bad_end // 4096) * 4096, size)]
        for lo, hi in good:
            pos = lo
            while pos < hi:
                ln = min(1 << 20, hi - pos)
                if os.pread(fd, ln, pos) != want[pos:pos + ln]:
                    fail("pread(%d, %d) outside the damaged tile differs" % (ln, pos))
                pos += ln
    finally:
        os.close(fd)


def readers(virt, orig, n, seed):
    want = open(orig, "rb").read()
    size = len(want)
    errors = []

    def worker(k):
        rnd = random.Random(seed * 1000 + k)
        piece = rnd.choice([128 << 10, 256 << 10, 1 << 20])
        offs = list(range(0, size, piece))
        if k % 2:
            rnd.shuffle(offs)  # half read in random order, half sequentially
        fd = os.open(virt, os.O_RDONLY)
        try:
            for j, off in enumerate(offs):
                if j % 8 == 0:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                got = os.pread(fd, piece, off)
                if got != want[off:off + piece]:
                    errors.append("reader %d: pread(%d, %d) differs" % (k, piece, off))
                    return
        except OSError as e:
            errors.append("reader %d: %s" % (k, e))
        finally:
            os.close(fd)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        fail("; ".join(errors[:4]))


def main(argv):
    if len(argv) < 2:
        fail(__doc__)
    cmd, a = argv[1], argv[2:]
    if cmd == "slices":
        slices(a[0], a[1], int(a[2]), int(a[3]))
    elif cmd == "tiles":
        for i, (voff, dsize, coff, csize) in enumerate(read_tiles(a[0])):
            print(i, voff, dsize, coff, csize)
    elif cmd == "flip":
        flip(a[0], int(a[1]), a[2])
    elif cmd == "damaged":
        damaged(a[0], a[1], int(a[2]), int(a[3]))
    elif cmd == "readers":
        readers(a[0], a[1], int(a[2]), int(a[3]))
    else:
        fail("unknown subcommand " + cmd)


if __name__ == "__main__":
    main(sys.argv)
