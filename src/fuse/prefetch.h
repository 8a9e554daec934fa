/* prefetch.h - the read path's readahead, decided here alone: how many
 * tiles a mount decodes ahead of a sequential stream, how many for one
 * file, and queueing them. */
#ifndef WCFS_PREFETCH_H
#define WCFS_PREFETCH_H

#include <stdint.h>

#include "fuse/ops.h"

/* The mount's readahead in tiles: -o readahead=N when given; else the
 * backend's own preference (a GPU's 16 tiles), or one tile per decode
 * thread where there are more threads than the default 8; a default is
 * capped at 64. */
unsigned wcfs_readahead_default(const wcfs_options *o, const wc_backend *be);

/* Tiles (of the file's nominal tile size) to prefetch ahead of a stream
 * through vn: the mount's readahead, or the vnode's cap where the mount's is
 * the CPU backend's default (neither given as an option nor the backend's own). */
unsigned wcfs_readahead_of(const wcfs_fs *fs, const wcfs_vnode *vn);

/* Tiles to queue, gathered into runs of consecutive tiles of one source so
 * each run is one wc_cache_prefetch call: add spans in order, then flush. */
typedef struct wcfs_tile_runs {
	wc_tile_source *src;
	uint32_t first, n;
} wcfs_tile_runs;
void wcfs_runs_add(wcfs_fs *fs, wcfs_tile_runs *r, const wcfs_span *sp);
void wcfs_runs_flush(wcfs_fs *fs, wcfs_tile_runs *r);

/* Queue decodes of the tiles holding vn's virtual bytes [from, from + ahead):
 * the tiles a sequential stream reads next. */
void wcfs_prefetch_after(wcfs_fs *fs, const wcfs_vnode *vn, uint64_t from, uint64_t ahead);

#endif /* WCFS_PREFETCH_H */
