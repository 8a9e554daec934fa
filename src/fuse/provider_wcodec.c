/*
 * provider_wcodec.c - X.wcodec shown as X.safetensors (provider.h).
 *
 * The virtual file is the container's prefix (the original safetensors
 * header, held in memory by the container) followed by the decoded tiles in
 * virtual-offset order (container.h: tiles cover [prefix_len, size) exactly).
 */
#include "fuse/provider.h"

#include <stdlib.h>

#include "container/container.h"

typedef struct wcodec_vnode {
	wcfs_vnode base; /* first member: a wcfs_vnode* points here */
	const wcfs_provider_ctx *ctx;
	wc_container *c;
	const uint8_t *prefix;
	size_t prefix_len;
} wcodec_vnode;

static void wcodec_release(wcfs_vnode *n)
{
	wcodec_vnode *w = (wcodec_vnode *)n;
	/* This vnode is the container's only user in the daemon: its cached
	 * tiles are of no further use. */
	if (w->ctx->cache)
		wc_cache_drop_source(w->ctx->cache, wc_container_id(w->c));
	wc_container_release(w->c);
	free(w);
}

static wc_err wcodec_locate(const wcfs_vnode *n, uint64_t off, wcfs_span *span)
{
	const wcodec_vnode *w = (const wcodec_vnode *)n;
	if (off >= n->size)
		return wc_fail(WC_E_RANGE, "offset %llu past the end (%llu)",
			       (unsigned long long)off, (unsigned long long)n->size);
	if (off < w->prefix_len) {
		*span = (wcfs_span){ .kind = WCFS_SPAN_MEM, .off = 0, .len = w->prefix_len,
				     .mem = w->prefix, .fd = -1 };
		return WC_OK;
	}
	uint32_t t;
	wc_err e = wc_container_find_tile(w->c, off, &t);
	if (e != WC_OK)
		return e;
	const wc_tile_info *ti = wc_container_tile(w->c, t);
	*span = (wcfs_span){ .kind = WCFS_SPAN_TILE, .off = ti->voff, .len = ti->dsize,
			     .src = wc_container_source(w->c), .tile = t, .tile_off = 0,
			     .fd = -1 };
	return WC_OK;
}

static const wcfs_vnode_ops wcodec_ops = {
	.release = wcodec_release,
	.locate = wcodec_locate,
};

static wc_err wcodec_open(const wcfs_provider_ctx *ctx, const char *path, wcfs_vnode **out)
{
	wcodec_vnode *w = calloc(1, sizeof *w);
	if (!w)
		return wc_fail(WC_E_NOMEM, "out of memory opening %s", path);
	wc_err e = wc_container_open(path, &w->c);
	if (e != WC_OK) {
		free(w);
		return e;
	}
	w->ctx = ctx;
	w->prefix = wc_container_prefix(w->c, &w->prefix_len);
	w->base.ops = &wcodec_ops;
	w->base.kind = WCFS_VFILE;
	w->base.size = wc_container_virtual_size(w->c);
	w->base.blksize = wc_container_tile_size(w->c);
	*out = &w->base;
	return WC_OK;
}

const wcfs_provider wcfs_provider_wcodec = {
	.name = "wcodec",
	.src_suffix = ".wcodec",
	.virt_suffix = ".safetensors",
	.kind = WCFS_VFILE,
	.open = wcodec_open,
};
