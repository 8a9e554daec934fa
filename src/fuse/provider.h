/*
 * provider.h - how a source file of a known kind becomes virtual files.
 *
 * wcodecfs mirrors SOURCE. A file whose name ends in a provider's
 * `src_suffix` is not shown under its own name; instead the provider turns it
 * into a "vnode" shown under `stem + virt_suffix`:
 *
 *   provider  source file    shown as             vnode kind
 *   wcodec    X.wcodec       X.safetensors        WCFS_VFILE
 *   qvq       Y.qvq          Y/ (PPM images,      WCFS_VDIR whose children
 *                            images.npy, ...)     are WCFS_VFILEs
 *
 * A real file named like the virtual name wins (X.safetensors beside
 * X.wcodec): the real bytes pass through and the source is hidden. See
 * docs/wcodecfs.1, "NAME CLASHES".
 *
 * The daemon (src/fuse) owns everything FUSE: inode numbers, attributes,
 * open handles, the page cache, readahead, replies and errno. A provider only
 * answers "which bytes are at virtual offset X" (locate) and "which children
 * does this virtual directory have"; it never sees FUSE and never decodes by
 * itself: the daemon fetches tile bytes from the shared tile cache
 * (engine/cache.h), so decoding is batched, shared and budgeted.
 *
 * Adding a provider (e.g. the .qvq one): write src/fuse/provider_<name>.c
 * defining `const wcfs_provider wcfs_provider_<name> = { ... };` over its
 * format's reader, declare it below next to wcfs_provider_wcodec, add it to
 * the table in src/fuse/providers.c and to wcodecfs_SOURCES in fuse.mk.
 *
 * Threads: the daemon calls every function here from several FUSE worker
 * threads at once; vnode functions must be safe to call concurrently on the
 * same vnode (read-only lookups in practice, but for prepare).
 */
#ifndef WCFS_PROVIDER_H
#define WCFS_PROVIDER_H

#include <stdint.h>

#include "core/wc_error.h"
#include "engine/cache.h"
#include "engine/tile_source.h"

/* What the provider's code may use from the daemon. Lives as long as the
 * daemon; the cache exists before the first open() call. */
typedef struct wcfs_provider_ctx {
	wc_cache *cache; /* the shared decoded-tile cache */
	const char *source; /* SOURCE's real path */
	int root_fd;        /* SOURCE's directory, held for the daemon's life; -1 if none */
} wcfs_provider_ctx;

/* A path by which the source file behind `path` (a /proc/self/fd/N the
 * daemon was given) can be opened again later, once N is closed, without a
 * walk through the mount (SOURCE may lie under MOUNTPOINT, or be it):
 * "/proc/self/fd/ROOT/REL", REL being the file's path under SOURCE now.
 * Also its real path in `real` (for messages). Returns 0, or -1 when there
 * is none (no root descriptor, a path outside SOURCE, too long). */
int wcfs_provider_stable_path(const wcfs_provider_ctx *ctx, const char *path, char *buf, size_t cap,
			      char *real, size_t real_cap);

typedef enum wcfs_vkind { WCFS_VFILE = 1, WCFS_VDIR = 2 } wcfs_vkind;

/* Where the bytes of a virtual file around one offset come from. */
typedef enum wcfs_span_kind {
	WCFS_SPAN_MEM = 1,  /* bytes in memory owned by the vnode (headers, text) */
	WCFS_SPAN_TILE = 2, /* a byte range of one decoded tile of a tile source */
	WCFS_SPAN_FD = 3,   /* a byte range of an open file (stored data) */
} wcfs_span_kind;

typedef struct wcfs_span {
	wcfs_span_kind kind;
	uint64_t off; /* virtual offset of the span's first byte */
	uint64_t len; /* bytes in the span (> 0) */
	/* WCFS_SPAN_MEM: the span's len bytes; valid while the vnode lives. */
	const uint8_t *mem;
	/* WCFS_SPAN_TILE: the span is decoded bytes [tile_off, tile_off + len) of
	 * tile `tile` of `src` (0 <= tile < src->ops->ntiles(src)); `src` stays
	 * valid while the vnode lives. */
	wc_tile_source *src;
	uint32_t tile;
	uint32_t tile_off;
	/* WCFS_SPAN_FD: bytes [fd_off, fd_off + len) of file descriptor fd, open
	 * for reading while the vnode lives. */
	int fd;
	uint64_t fd_off;
} wcfs_span;

typedef struct wcfs_vnode wcfs_vnode;

typedef struct wcfs_vnode_ops {
	/* Called once, when the daemon no longer uses the vnode (the kernel
	 * forgot its inode and no handle is open). Frees it; a provider whose
	 * tile source has no other user calls wc_cache_drop_source(ctx->cache,
	 * src->id) first so its decoded tiles leave the cache. */
	void (*release)(wcfs_vnode *n);

	/* WCFS_VFILE, optional (NULL: nothing to do): called when the file is
	 * opened, before its first read, to finish work the provider's open()
	 * left out so that a lookup (stat, ls -l) stays cheap; a .wcodec vnode
	 * parses its container's index here. Safe to call concurrently and
	 * again after success (then it does nothing) or failure (it tries
	 * again). Errors: as open(); the daemon logs them and answers the
	 * open with EIO (EOPNOTSUPP for WC_E_UNSUPPORTED, ENOMEM). */
	wc_err (*prepare)(wcfs_vnode *n);

	/* WCFS_VFILE: describe the span holding virtual offset `off`
	 * (0 <= off < n->size): set *span so span->off <= off < span->off +
	 * span->len. Spans of one file do not overlap and cover [0, size).
	 * Sequential bytes should map to increasing tile numbers: the daemon's
	 * readahead finds the next tiles by locating the bytes after a span.
	 * O(log n) or better, no allocation (called per read request).
	 * Errors: WC_E_RANGE (off out of range), anything else becomes EIO. */
	wc_err (*locate)(const wcfs_vnode *n, uint64_t off, wcfs_span *span);

	/* WCFS_VDIR: the name of child i (0 <= i < n->nchildren): a single path
	 * component, unique within the directory, valid while the vnode lives. */
	const char *(*child_name)(const wcfs_vnode *n, uint32_t i);
	/* WCFS_VDIR, optional (NULL: the daemon compares names linearly): index
	 * of the child named `name`, WC_E_NOTFOUND if none. */
	wc_err (*child_find)(const wcfs_vnode *n, const char *name, uint32_t *i);
	/* WCFS_VDIR: a new vnode for child i, owned by the caller (released with
	 * its ops->release). It must keep alive whatever it shares with the
	 * parent (the parent may be released first). Errors: as open(). */
	wc_err (*child_open)(const wcfs_vnode *n, uint32_t i, wcfs_vnode **out);
} wcfs_vnode_ops;

/* Providers embed this as their object's first member (or point to it). */
struct wcfs_vnode {
	const wcfs_vnode_ops *ops;
	wcfs_vkind kind;
	uint64_t size;      /* WCFS_VFILE: st_size, bytes. A provider's root
			     * WCFS_VDIR: the bytes of every virtual file under
			     * it, over which the source's st_blocks are shared
			     * out (0: each file reports its own size) */
	uint32_t blksize;   /* WCFS_VFILE: preferred I/O size in bytes (st_blksize:
			     * the tile size); 0 = 4096 */
	uint32_t readahead_max; /* WCFS_VFILE: tiles prefetched ahead of a stream
				 * at most while the mount's readahead is the CPU
				 * backend's default (not given as an option, nor
				 * the backend's own); 0 = no cap */
	uint32_t nchildren; /* WCFS_VDIR: number of children */
	/* Attributes (mode, owner, times) are the source file's; write
	 * permission bits are removed; directories get x where r is set. A
	 * provider root's files share its source's st_blocks in proportion to
	 * their sizes, so `du` of the directory is the source's disk use. */
};

typedef struct wcfs_provider {
	const char *name;        /* "wcodec"; for logs */
	const char *src_suffix;  /* ".wcodec": claims regular files ending in it
				  * (and longer than it) */
	const char *virt_suffix; /* shown name = stem + virt_suffix; "" allowed */
	wcfs_vkind kind;         /* what open() returns */
	/* Open the regular file at `path` (a path the daemon can open, such as
	 * /proc/self/fd/N) and return a new vnode owned by the caller.
	 * Errors: WC_E_IO, WC_E_FORMAT, WC_E_CORRUPT, WC_E_UNSUPPORTED,
	 * WC_E_NOMEM, with a reason via wc_fail() (the daemon logs it and
	 * answers EIO, or EOPNOTSUPP for WC_E_UNSUPPORTED). */
	wc_err (*open)(const wcfs_provider_ctx *ctx, const char *path, wcfs_vnode **out);
} wcfs_provider;

/* The providers compiled in (src/fuse/providers.c). */
extern const wcfs_provider wcfs_provider_wcodec;
extern const wcfs_provider wcfs_provider_qvq; /* src/fuse/provider_qvq.c */

/* X.wcodec kept in an object store, shown as X.safetensors in the mount of
 * a bucket (bucket.h): the vnode of the object at uri (s3://BUCKET/KEY),
 * its fixed header read now (a HEAD and one ranged GET), the rest when it
 * is first opened. Errors: those of wcfs_provider.open. */
wc_err wcfs_wcodec_open_object(const wcfs_provider_ctx *ctx, const char *uri, wcfs_vnode **out);

/* NULL-terminated table of providers, in priority order. */
extern const wcfs_provider *const wcfs_providers[];

/* For child_find: the place k (0 <= k < n) of `name` among n names in
 * strcmp order, name_at(ctx, k) the k-th, by binary search. Errors:
 * WC_E_NOTFOUND (not among them). */
wc_err wcfs_sorted_find(const char *name, uint32_t n, const char *(*name_at)(const void *ctx, uint32_t k),
			const void *ctx, uint32_t *k);

/* The provider claiming a source file named `name` (by src_suffix), or NULL. */
const wcfs_provider *wcfs_provider_for_source(const char *name);

#endif /* WCFS_PROVIDER_H */
