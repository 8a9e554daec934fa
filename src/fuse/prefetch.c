/* prefetch.c - what a sequential stream has decoded ahead of it (prefetch.h). */
#include "fuse/prefetch.h"

#include <stdbool.h>

unsigned wcfs_readahead_default(const wcfs_options *o, const wc_backend *be)
{
	const unsigned cap = 64;
	if (o->readahead_given)
		return o->readahead; /* options.c allows up to 1024 */
	if (be->readahead_tiles)
		return be->readahead_tiles < cap ? be->readahead_tiles : cap;
	/* Enough queued tiles for every decode thread: with 16 threads, 4
	 * readers went from 7004 to 8228 MB/s at readahead 16 (docs/BENCHMARKS.md,
	 * "GPU backend through the mount"). */
	if (o->threads > o->readahead)
		return o->threads < cap ? o->threads : cap;
	return o->readahead;
}

unsigned wcfs_readahead_of(const wcfs_fs *fs, const wcfs_vnode *vn)
{
	const bool cpu_default = !fs->opt->readahead_given && !fs->backend->readahead_tiles;
	if (cpu_default && vn->readahead_max && vn->readahead_max < fs->readahead)
		return vn->readahead_max;
	return fs->readahead;
}

void wcfs_runs_flush(wcfs_fs *fs, wcfs_tile_runs *r)
{
	if (r->n)
		wc_cache_prefetch(fs->cache, r->src, r->first, r->n);
	r->n = 0;
}

void wcfs_runs_add(wcfs_fs *fs, wcfs_tile_runs *r, const wcfs_span *sp)
{
	if (sp->kind != WCFS_SPAN_TILE)
		return;
	if (r->n && sp->src == r->src && sp->tile >= r->first && sp->tile < r->first + r->n)
		return; /* already in the run (a tile shared by several spans) */
	if (r->n && sp->src == r->src && sp->tile == r->first + r->n) {
		r->n++;
		return;
	}
	wcfs_runs_flush(fs, r);
	r->src = sp->src;
	r->first = sp->tile;
	r->n = 1;
}

void wcfs_prefetch_after(wcfs_fs *fs, const wcfs_vnode *vn, uint64_t from, uint64_t ahead)
{
	uint64_t end = from + ahead < vn->size ? from + ahead : vn->size;
	wcfs_tile_runs runs = { 0 };
	while (from < end) {
		wcfs_span sp;
		if (vn->ops->locate(vn, from, &sp) != WC_OK || sp.len == 0 || sp.off > from)
			break;
		wcfs_runs_add(fs, &runs, &sp);
		from = sp.off + sp.len;
	}
	wcfs_runs_flush(fs, &runs);
}
