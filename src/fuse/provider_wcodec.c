/*
 * provider_wcodec.c - X.wcodec shown as X.safetensors (provider.h).
 *
 * The virtual file is the container's prefix (the original safetensors
 * header, held in memory by the container) followed by the decoded tiles in
 * virtual-offset order (container.h: tiles cover [prefix_len, size) exactly).
 */
#include "fuse/provider.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "container/container.h"
#include "container/container_source.h"

/* A lookup reads only the container's fixed header (wc_container_peek: the
 * size and tile size stat() needs); the index and metadata, milliseconds of
 * JSON for a file of a thousand tensors, are parsed when the file is first
 * opened (prepare) or read. So `ls -l` of a directory of shards costs one
 * pread per file, and a file only looked at holds no tensor table. */
/* Bytes an object's small reads (payloads of tiles under a quarter of it)
 * fetch at once, ending where a payload does: one GET for what would be
 * dozens (wc_source_set_read_window; docs/BENCHMARKS.md, "Object stores",
 * for the sizes tried). */
#define OBJECT_READ_WINDOW ((size_t)1 << 20)

typedef struct wcodec_vnode {
	wcfs_vnode base; /* first member: a wcfs_vnode* points here */
	const wcfs_provider_ctx *ctx;
	int fd;                        /* the source, from lookup to the full open, where it has no
					* stable path; else -1 */
	char *path;                    /* where it is opened (wcfs_provider_stable_path), or NULL */
	char *uri;                     /* an object of a store (s3://BUCKET/KEY), or NULL */
	wc_source *src;                /* that object, from lookup to the full open; else NULL */
	dev_t dev;                     /* what it was at lookup */
	ino_t ino;
	wc_container_summary peek;     /* what the header said at lookup */
	pthread_mutex_t open_lock;     /* one full open at a time */
	_Atomic(wc_container *) c;     /* NULL until the full open succeeds */
	const uint8_t *prefix;         /* set before c is published */
	size_t prefix_len;
	uint64_t charged;              /* the container's memory, counted in the cache budget */
} wcodec_vnode;

static void wcodec_release(wcfs_vnode *n)
{
	wcodec_vnode *w = (wcodec_vnode *)n;
	wc_container *c = atomic_load_explicit(&w->c, memory_order_acquire);
	if (c) {
		/* This vnode is the container's only user in the daemon: its
		 * cached tiles are of no further use. */
		if (w->ctx->cache) {
			wc_cache_drop_source(w->ctx->cache, wc_container_id(c));
			wc_cache_charge(w->ctx->cache, -(int64_t)w->charged);
		}
		wc_container_release(c);
	}
	pthread_mutex_destroy(&w->open_lock);
	if (w->fd >= 0)
		close(w->fd);
	if (w->src)
		wc_source_close(w->src);
	free(w->path);
	free(w->uri);
	free(w);
}

/* Tiles larger than the cache's room are decoded one at a time, each
 * evicted before the next: memory stays bounded, reads of such files are
 * slow. Said once. */
static void warn_large_tiles(wc_cache *cache, const char *name, uint32_t tile_size)
{
	static atomic_flag said = ATOMIC_FLAG_INIT;
	uint64_t room = wc_cache_room(cache);
	if (tile_size > room && !atomic_flag_test_and_set(&said))
		wc_log(WC_LOG_WARN, "%s: tiles of %u KiB are larger than the cache's room (%llu KiB): such tiles "
		       "are decoded one at a time; a larger cache_size serves them faster (logged once)", name,
		       tile_size >> 10, (unsigned long long)(room >> 10));
}

/* The local file's container (ensure_open), its name for messages into
 * real. */
static wc_err open_local(wcodec_vnode *w, wc_container **out, char *real, size_t cap)
{
	/* The file as it was at lookup: by its stable path (the lookup kept no
	 * descriptor), or the descriptor it kept. */
	wc_container *c = NULL;
	wc_err e = WC_OK;
	int fd = w->fd;
	if (fd < 0) {
		struct stat st;
		fd = open(w->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		if (fd < 0)
			e = wc_fail(WC_E_IO, "%s: %s", w->path, strerror(errno));
		else if (fstat(fd, &st) != 0 || st.st_dev != w->dev || st.st_ino != w->ino)
			e = wc_fail(WC_E_FORMAT, "%s: the file changed since it was looked up", w->path);
	}
	char path[64];
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	/* Messages about its tiles name the file by its real path. */
	ssize_t k = e ? 0 : readlink(path, real, cap - 1);
	if (k <= 0)
		k = snprintf(real, cap, "%s", path);
	real[k] = '\0';
	if (!e)
		e = wc_container_open_tiles(path, &c);
	/* Its descriptor may be closed while idle (core/fd_budget.h) and is
	 * then opened again by the stable path. */
	if (!e)
		e = wc_container_set_name(c, real, w->path);
	if (fd >= 0 && fd != w->fd)
		close(fd);
	if (e && c) {
		wc_container_release(c);
		c = NULL;
	}
	*out = c;
	return e;
}

/* The container, opened on the first call. Errors: those of
 * wc_container_open, and WC_E_FORMAT when the file no longer matches what
 * its header said at lookup (rewritten in place: the next lookup sees new
 * stamps and shows the new file under a new node). */
static wc_err ensure_open(wcodec_vnode *w, wc_container **out)
{
	wc_container *c = atomic_load_explicit(&w->c, memory_order_acquire);
	if (c) {
		*out = c;
		return WC_OK;
	}
	wc_err e = WC_OK;
	pthread_mutex_lock(&w->open_lock);
	c = atomic_load_explicit(&w->c, memory_order_relaxed);
	if (!c) {
		char real[PATH_MAX];
		if (w->uri) {
			/* An object: over the source its lookup opened, or a
			 * new one where an earlier attempt used that up. */
			wc_source *src = w->src;
			w->src = NULL;
			snprintf(real, sizeof real, "%s", w->uri);
			e = src ? WC_OK : wc_source_open(w->uri, &src);
			if (!e) /* a no-op for the lookup's, which has it */
				e = wc_source_set_read_window(src, OBJECT_READ_WINDOW);
			if (!e)
				e = wc_container_open_tiles_source(src, &c);
		} else {
			e = open_local(w, &c, real, sizeof real);
		}
		if (!e && (wc_container_virtual_size(c) != w->peek.virtual_size ||
			   wc_container_tile_size(c) != w->peek.tile_size))
			e = wc_fail(WC_E_FORMAT, "%s: the file changed since it was looked up", real);
		if (e && c) {
			wc_container_release(c);
			c = NULL;
		}
		if (!e) {
			w->prefix = wc_container_prefix(c, &w->prefix_len);
			/* The open container's tables count against the cache
			 * budget: a file of thousands of tensors holds megabytes. */
			w->charged = wc_container_memory(c);
			if (w->ctx->cache) {
				wc_cache_charge(w->ctx->cache, (int64_t)w->charged);
				warn_large_tiles(w->ctx->cache, real, w->peek.tile_size);
			}
			atomic_store_explicit(&w->c, c, memory_order_release);
			/* The container holds its own descriptor. */
			if (w->fd >= 0)
				close(w->fd);
			w->fd = -1;
		}
	}
	pthread_mutex_unlock(&w->open_lock);
	*out = c;
	return e;
}

static wc_err wcodec_prepare(wcfs_vnode *n)
{
	wc_container *c;
	return ensure_open((wcodec_vnode *)n, &c);
}

static wc_err wcodec_locate(const wcfs_vnode *n, uint64_t off, wcfs_span *span)
{
	/* A read comes after an open (prepare), so the container is there;
	 * ensure_open only makes that independent of the daemon's order. */
	wcodec_vnode *w = (wcodec_vnode *)(uintptr_t)n;
	wc_container *c;
	wc_err e = ensure_open(w, &c);
	if (e != WC_OK)
		return e;
	if (off >= n->size)
		return wc_fail(WC_E_RANGE, "offset %llu past the end (%llu)",
			       (unsigned long long)off, (unsigned long long)n->size);
	if (off < w->prefix_len) {
		*span = (wcfs_span){ .kind = WCFS_SPAN_MEM, .off = 0, .len = w->prefix_len,
				     .mem = w->prefix, .fd = -1 };
		return WC_OK;
	}
	uint32_t t;
	e = wc_container_find_tile(c, off, &t);
	if (e != WC_OK)
		return e;
	const wc_tile_info *ti = wc_container_tile(c, t);
	*span = (wcfs_span){ .kind = WCFS_SPAN_TILE, .off = ti->voff, .len = ti->dsize,
			     .src = wc_container_source(c), .tile = t, .tile_off = 0,
			     .fd = -1 };
	return WC_OK;
}

static const wcfs_vnode_ops wcodec_ops = {
	.release = wcodec_release,
	.prepare = wcodec_prepare,
	.locate = wcodec_locate,
};

static void vnode_init(wcodec_vnode *w, const wcfs_provider_ctx *ctx)
{
	pthread_mutex_init(&w->open_lock, NULL);
	atomic_init(&w->c, NULL);
	w->ctx = ctx;
	w->base.ops = &wcodec_ops;
	w->base.kind = WCFS_VFILE;
	w->base.size = w->peek.virtual_size;
	w->base.blksize = w->peek.tile_size;
}

static wc_err wcodec_open(const wcfs_provider_ctx *ctx, const char *path, wcfs_vnode **out)
{
	wcodec_vnode *w = calloc(1, sizeof *w);
	if (!w)
		return wc_fail(WC_E_NOMEM, "out of memory opening %s", path);
	/* O_NONBLOCK: the daemon claims only regular files (where it changes
	 * nothing), but a FIFO swapped in must not hang a worker thread. */
	w->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (w->fd < 0) {
		wc_err e = wc_fail(WC_E_IO, "%s: %s", path, strerror(errno));
		free(w);
		return e;
	}
	wc_err e = wc_container_peek(w->fd, path, &w->peek);
	if (e != WC_OK) {
		close(w->fd);
		free(w);
		return e;
	}
	/* A file only looked up (ls -l of thousands) holds no descriptor: it
	 * is opened again by its stable path when first read. */
	char stable[PATH_MAX + 32], real[PATH_MAX];
	struct stat st;
	if (wcfs_provider_stable_path(ctx, path, stable, sizeof stable, real, sizeof real) == 0 &&
	    fstat(w->fd, &st) == 0 && (w->path = strdup(stable))) {
		w->dev = st.st_dev;
		w->ino = st.st_ino;
		close(w->fd);
		w->fd = -1;
	}
	vnode_init(w, ctx);
	*out = &w->base;
	return WC_OK;
}

wc_err wcfs_wcodec_open_object(const wcfs_provider_ctx *ctx, const char *uri, wcfs_vnode **out)
{
	wcodec_vnode *w = calloc(1, sizeof *w);
	if (!w || !(w->uri = strdup(uri))) {
		free(w);
		return wc_fail(WC_E_NOMEM, "out of memory opening %s", uri);
	}
	w->fd = -1;
	wc_err e = wc_source_open(uri, &w->src);
	if (!e)
		e = wc_container_peek_source(w->src, &w->peek);
	/* Tiles of small tensors are small: read them a window at a time. */
	if (!e)
		e = wc_source_set_read_window(w->src, OBJECT_READ_WINDOW);
	if (e) {
		if (w->src)
			wc_source_close(w->src);
		free(w->uri);
		free(w);
		return e;
	}
	vnode_init(w, ctx);
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
