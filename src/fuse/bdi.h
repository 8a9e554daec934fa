/*
 * bdi.h - the kernel readahead of our mount (its backing_dev_info).
 *
 * Through the page cache the kernel sends FUSE reads no larger than the
 * mount's readahead window, 128 KiB by default, even for read(fd, 1 MiB) or
 * a loader's large pread: every 128 KiB costs a round trip to the daemon.
 * Raising /sys/class/bdi/MAJ:MIN/read_ahead_kb of this mount (root only)
 * makes requests as large as libfuse's max_write (1 MiB), the size at which
 * a minimal FUSE file system reads 2-3x faster.
 */
#ifndef WCFS_BDI_H
#define WCFS_BDI_H

#include <stdint.h>

/* Set the readahead of the FUSE mount at `mountpoint` (an absolute path, as
 * mounted) to `bytes` (rounded down to KiB). The device number comes from
 * /proc/self/mountinfo, so the mount itself is not touched (the session
 * loop may not be running yet). Returns 0 or an errno value. */
int wcfs_set_kernel_readahead(const char *mountpoint, uint64_t bytes);

#endif /* WCFS_BDI_H */
