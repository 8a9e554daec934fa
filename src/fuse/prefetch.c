/* prefetch.c - what a sequential stream has decoded ahead of it (prefetch.h). */
#include "fuse/prefetch.h"

#include <stdbool.h>

unsigned wcfs_readahead_of(const wcfs_fs *fs, const wcfs_vnode *vn)
{
	const bool cpu_default = !fs->opt->readahead_given && !fs->backend->readahead_tiles;
	if (cpu_default && vn->readahead_max && vn->readahead_max < fs->readahead)
		return vn->readahead_max;
	return fs->readahead;
}

void wcfs_prefetch_after(wcfs_fs *fs, const wcfs_vnode *vn, uint64_t from, uint64_t ahead)
{
	uint64_t end = from + ahead < vn->size ? from + ahead : vn->size;
	wc_tile_source *run_src = NULL;
	uint32_t run_first = 0, run_n = 0;
	while (from < end) {
		wcfs_span sp;
		if (vn->ops->locate(vn, from, &sp) != WC_OK || sp.len == 0 || sp.off > from)
			break;
		if (sp.kind == WCFS_SPAN_TILE) {
			if (run_n && sp.src == run_src && sp.tile == run_first + run_n) {
				run_n++;
			} else if (!(run_n && sp.src == run_src && sp.tile >= run_first &&
				     sp.tile < run_first + run_n)) {
				if (run_n)
					wc_cache_prefetch(fs->cache, run_src, run_first, run_n);
				run_src = sp.src;
				run_first = sp.tile;
				run_n = 1;
			}
		}
		from = sp.off + sp.len;
	}
	if (run_n)
		wc_cache_prefetch(fs->cache, run_src, run_first, run_n);
}

