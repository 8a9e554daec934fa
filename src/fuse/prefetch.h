/* prefetch.h - the read path's readahead: how far ahead of a sequential
 * stream tiles are decoded, and queueing them. */
#ifndef WCFS_PREFETCH_H
#define WCFS_PREFETCH_H

#include <stdint.h>

#include "fuse/ops.h"

/* Tiles (of the file's nominal tile size) to prefetch ahead of a stream
 * through vn: the mount's readahead, or the vnode's cap where the mount's is
 * the CPU backend's default (neither given as an option nor the backend's own). */
unsigned wcfs_readahead_of(const wcfs_fs *fs, const wcfs_vnode *vn);

/* Queue decodes of the tiles holding vn's virtual bytes [from, from + ahead):
 * the tiles a sequential stream reads next. Runs of consecutive tiles of one
 * source become one wc_cache_prefetch call. */
void wcfs_prefetch_after(wcfs_fs *fs, const wcfs_vnode *vn, uint64_t from, uint64_t ahead);

#endif /* WCFS_PREFETCH_H */
