/* ops.c - FUSE low-level operations (ops.h). */
#include "fuse/ops.h"

#include "fuse/bdi.h"
#include "fuse/prefetch.h"
#include "core/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>

typedef struct wcfs_handle {
	wcfs_node *node; /* referenced */
	int fd;          /* passed-through regular file: its descriptor; else -1 */
} wcfs_handle;

static wcfs_fs *fs_of(fuse_req_t req) { return fuse_req_userdata(req); }
static wcfs_node *node_of(fuse_req_t req, fuse_ino_t ino)
{
	return wcfs_node_of(fs_of(req)->vt.itable, ino);
}

/* Raise the mount's kernel readahead (bdi.h) on the first request after
 * INIT: the kernel lowers it to the INIT reply's max_readahead while it
 * processes that reply, so setting it earlier does not last. */
static void tune_once(wcfs_fs *fs)
{
	if (!atomic_load_explicit(&fs->bdi_pending, memory_order_relaxed) ||
	    !atomic_exchange(&fs->bdi_pending, 0))
		return;
	int err = wcfs_set_kernel_readahead(fs->opt->mountpoint, fs->opt->kernel_readahead);
	if (err)
		wc_log(WC_LOG_DEBUG, "kernel readahead stays at its default: %s", strerror(err));
	else
		wc_log(WC_LOG_DEBUG, "kernel readahead set to %llu KiB",
		       (unsigned long long)(fs->opt->kernel_readahead >> 10));
}

/* ---- names and attributes ------------------------------------------ */

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	const wcfs_fs *fs = userdata;
	/* Readahead requests are async: the kernel keeps at most max_background
	 * of them in flight per connection, across every reader of the mount. */
	if (fs->opt->max_background) {
		conn->max_background = fs->opt->max_background;
		conn->congestion_threshold = fs->opt->max_background * 3 / 4;
	}
	if (conn->capable & FUSE_CAP_SPLICE_WRITE)
		conn->want |= FUSE_CAP_SPLICE_WRITE; /* passthrough reads: fd -> /dev/fuse */
	if (conn->capable & FUSE_CAP_ASYNC_READ)
		conn->want |= FUSE_CAP_ASYNC_READ; /* parallel reads of one file */
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	/* Passed-through files may change under us: drop their cached pages
	 * when getattr shows a new mtime. Virtual files never change. */
	if (conn->capable & FUSE_CAP_AUTO_INVAL_DATA)
		conn->want |= FUSE_CAP_AUTO_INVAL_DATA;
	if (fs->opt->direct_io) {
		/* A direct_io file may be mapped MAP_SHARED only when the
		 * kernel (6.6+) and libfuse (3.16+) agree on it; private
		 * mappings always go through the page cache. */
		const char *shared = "fail with ENODEV (private ones work)";
#ifdef FUSE_CAP_DIRECT_IO_ALLOW_MMAP
		if (conn->capable & FUSE_CAP_DIRECT_IO_ALLOW_MMAP) {
			conn->want |= FUSE_CAP_DIRECT_IO_ALLOW_MMAP;
			shared = "work";
		}
#endif
		wc_log(WC_LOG_INFO, "direct_io: read() of decoded files bypasses the page cache; "
		       "shared mappings of them %s", shared);
	}
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	wcfs_fs *fs = fs_of(req);
	tune_once(fs);
	struct fuse_entry_param e = { 0 };
	e.attr_timeout = fs->timeout;
	e.entry_timeout = fs->timeout;
	wcfs_node *n;
	int err = wcfs_vtree_lookup(&fs->vt, node_of(req, parent), name, &n);
	if (err == ENOENT) {
		fuse_reply_entry(req, &e); /* ino 0: a negative entry the kernel caches */
		return;
	}
	if (!err) {
		err = wcfs_vtree_getattr(&fs->vt, n, &e.attr);
		if (err)
			wcfs_node_forget(fs->vt.itable, n, 1);
	}
	if (err) {
		fuse_reply_err(req, err);
		return;
	}
	e.ino = wcfs_ino_of(fs->vt.itable, n);
	fuse_reply_entry(req, &e);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	wcfs_node_forget(fs_of(req)->vt.itable, node_of(req, ino), nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	wcfs_fs *fs = fs_of(req);
	for (size_t i = 0; i < count; i++)
		wcfs_node_forget(fs->vt.itable, wcfs_node_of(fs->vt.itable, forgets[i].ino),
				 forgets[i].nlookup);
	fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	wcfs_fs *fs = fs_of(req);
	tune_once(fs);
	struct stat st;
	/* fstat of an open passed-through file: that file's attributes, even
	 * if its name has since been removed or reused (the kernel gives the
	 * handle for regular files only). */
	const wcfs_handle *h = fi ? (const wcfs_handle *)(uintptr_t)fi->fh : NULL;
	int err = h && h->fd >= 0 ? (fstat(h->fd, &st) != 0 ? errno : 0)
				  : wcfs_vtree_getattr(&fs->vt, node_of(req, ino), &st);
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_attr(req, &st, fs->timeout);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char buf[PATH_MAX + 1];
	int err = wcfs_vtree_readlink(node_of(req, ino), buf, sizeof buf);
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_readlink(req, buf);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	(void)ino;
	wcfs_node *root = wcfs_itable_root(fs_of(req)->vt.itable);
	struct statvfs sv;
	if (fstatvfs(root->fd, &sv) != 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_statfs(req, &sv);
}

/* ---- directories ----------------------------------------------------- */

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	wcfs_fs *fs = fs_of(req);
	tune_once(fs);
	wcfs_dirlist *l = malloc(sizeof *l);
	if (!l) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	int err = wcfs_vtree_list(&fs->vt, node_of(req, ino), l);
	if (err) {
		free(l);
		fuse_reply_err(req, err);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)l;
	if (fuse_reply_open(req, fi) == -ENOENT) { /* interrupted */
		wcfs_dirlist_free(l);
		free(l);
	}
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	(void)ino;
	wcfs_dirlist *l = (wcfs_dirlist *)(uintptr_t)fi->fh;
	char *buf = malloc(size ? size : 1);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	size_t pos = 0;
	for (size_t i = off < 0 ? 0 : (size_t)off; i < l->n; i++) {
		struct stat st = { .st_ino = l->ent[i].ino, .st_mode = l->ent[i].type };
		size_t need = fuse_add_direntry(req, buf + pos, size - pos, l->ent[i].name, &st,
						(off_t)(i + 1));
		if (need > size - pos)
			break;
		pos += need;
	}
	fuse_reply_buf(req, buf, pos);
	free(buf);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	wcfs_dirlist *l = (wcfs_dirlist *)(uintptr_t)fi->fh;
	wcfs_dirlist_free(l);
	free(l);
	fuse_reply_err(req, 0);
}

/* ---- files ----------------------------------------------------------- */

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	wcfs_fs *fs = fs_of(req);
	tune_once(fs);
	wcfs_node *n = node_of(req, ino);
	if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (n->type == S_IFDIR) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if (n->type != S_IFREG) {
		fuse_reply_err(req, EACCES); /* devices, fifos, sockets are not served */
		return;
	}
	wcfs_handle *h = malloc(sizeof *h);
	if (!h) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	h->node = n;
	h->fd = -1;
	if (n->vn && n->vn->ops->prepare) {
		wc_clear_detail();
		wc_err e = n->vn->ops->prepare(n->vn);
		if (e != WC_OK) {
			char name[PATH_MAX];
			wcfs_vtree_source_path(n, name, sizeof name);
			free(h);
			fuse_reply_err(req, wcfs_vtree_open_failed(name, n->prov, e));
			return;
		}
	}
	if (!n->vn) {
		h->fd = wcfs_vtree_open_source(n, O_RDONLY);
		if (h->fd < 0) {
			int err = -h->fd;
			free(h);
			fuse_reply_err(req, err);
			return;
		}
	}
	wcfs_node_ref(fs->vt.itable, n);
	fi->fh = (uint64_t)(uintptr_t)h;
	/* Keep the page cache across opens: virtual files never change, and
	 * passed-through ones are invalidated on a new mtime (AUTO_INVAL_DATA).
	 * No direct_io by default, so mmap(MAP_SHARED) works. With -o direct_io
	 * a decoded file's reads skip the page cache: the reply is copied once,
	 * straight into the reader's buffer, instead of into page-cache folios
	 * the reader then copies again, and no folio is allocated per 4 KiB. */
	fi->keep_cache = 1;
	fi->noflush = 1;
	if (n->vn && fs->opt->direct_io)
		fi->direct_io = 1;
	if (fuse_reply_open(req, fi) == -ENOENT) { /* interrupted */
		if (h->fd >= 0)
			close(h->fd);
		wcfs_node_unref(fs->vt.itable, n);
		free(h);
	}
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	wcfs_handle *h = (wcfs_handle *)(uintptr_t)fi->fh;
	if (h->fd >= 0)
		close(h->fd);
	wcfs_node_unref(fs_of(req)->vt.itable, h->node);
	free(h);
	fuse_reply_err(req, 0);
}

static void read_passthrough(fuse_req_t req, wcfs_handle *h, size_t size, off_t off)
{
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT(size);
	bv.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK | FUSE_BUF_FD_RETRY; /* no short read */
	bv.buf[0].fd = h->fd;
	bv.buf[0].pos = off;
	fuse_reply_data(req, &bv, FUSE_BUF_SPLICE_MOVE);
}

#define STACK_SEGS 32
/* Segments one writev reply may carry: libfuse adds one for the header and
 * the kernel's writev limit is IOV_MAX (1024). Past this, copy. */
#define MAX_IOV_SEGS 256

/* Send the n buffers of bv as one reply. Memory only (prefix bytes, tile
 * bytes): fuse_reply_iov writes them with one writev straight from the tile
 * buffers (libfuse's fuse_reply_data would first copy several memory
 * buffers into one). With a descriptor among them: fuse_reply_data. */
static void reply_segments(fuse_req_t req, struct fuse_bufvec *bv, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++)
		if (bv->buf[i].flags & FUSE_BUF_IS_FD)
			break;
	if (i == n && n > MAX_IOV_SEGS) {
		/* A read over many tiny tiles (files with thousands of small
		 * tensors): writev takes at most IOV_MAX segments, and a failed
		 * reply write leaves the kernel's request pending forever, so
		 * gather the bytes into one buffer instead. */
		size_t total = 0;
		for (i = 0; i < n; i++)
			total += bv->buf[i].size;
		uint8_t *flat = malloc(total ? total : 1);
		if (!flat) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		size_t pos = 0;
		for (i = 0; i < n; i++) {
			memcpy(flat + pos, bv->buf[i].mem, bv->buf[i].size);
			pos += bv->buf[i].size;
		}
		fuse_reply_buf(req, (const char *)flat, total);
		free(flat);
		return;
	}
	if (i == n) {
		struct iovec stack_iov[STACK_SEGS] = { { 0 } }, *iov = stack_iov;
		if (n > STACK_SEGS && !(iov = malloc(n * sizeof *iov))) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		for (i = 0; i < n; i++)
			iov[i] = (struct iovec){ .iov_base = bv->buf[i].mem, .iov_len = bv->buf[i].size };
		fuse_reply_iov(req, iov, (int)n);
		if (iov != stack_iov)
			free(iov);
		return;
	}
	bv->count = n;
	bv->idx = 0;
	bv->off = 0;
	fuse_reply_data(req, bv, FUSE_BUF_NO_SPLICE);
}

static void read_virtual(fuse_req_t req, wcfs_fs *fs, wcfs_node *n, size_t size, off_t off_)
{
	const wcfs_vnode *vn = n->vn;
	uint64_t off = (uint64_t)off_;
	if (off_ < 0 || off >= vn->size || size == 0) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > vn->size - off)
		size = (size_t)(vn->size - off);
	uint64_t end = off + size;
	const uint64_t t_start = wc_mono_ns();

	/* Room for one buffer per span the read touches. Spans of tiles are at
	 * least WC_TILE_SIZE_MIN (4 KiB) in practice, so a 1 MiB read needs
	 * about 260; start on the stack and grow on the heap. */
	size_t cap = STACK_SEGS;
	struct {
		struct fuse_bufvec bv;
		struct fuse_buf more[STACK_SEGS - 1];
	} stack_bv;
	wc_tile_ref *stack_refs[STACK_SEGS];
	/* ends[i]: this read reached the last byte of refs[i]'s tile */
	bool stack_ends[STACK_SEGS];
	struct fuse_bufvec *bv = &stack_bv.bv;
	wc_tile_ref **refs = stack_refs;
	bool *ends = stack_ends;
	size_t nbuf = 0, nref = 0;
	int err = 0;
	const char *why = NULL;
	wc_err werr = WC_OK;
	wcfs_span sp = { 0 };
	uint32_t bad_tile = 0;

	/* A request over several tiles (a 1 MiB read across a tile boundary, a
	 * page-cache readahead): queue the later tiles before waiting for the
	 * first, so they decode side by side rather than one after another. */
	{
		wcfs_span a, z;
		if (vn->ops->locate(vn, off, &a) == WC_OK && vn->ops->locate(vn, end - 1, &z) == WC_OK &&
		    a.kind == WCFS_SPAN_TILE && z.kind == WCFS_SPAN_TILE && a.src == z.src &&
		    z.tile > a.tile)
			wc_cache_prefetch(fs->cache, a.src, a.tile + 1, z.tile - a.tile);
	}

	for (uint64_t pos = off; pos < end;) {
		wc_clear_detail();
		werr = vn->ops->locate(vn, pos, &sp);
		if (werr != WC_OK) {
			why = "locate";
			break;
		}
		if (sp.off > pos || sp.len == 0 || pos - sp.off >= sp.len) {
			werr = wc_fail(WC_E_FORMAT, "provider gave span [%llu,+%llu) for offset %llu",
				       (unsigned long long)sp.off, (unsigned long long)sp.len,
				       (unsigned long long)pos);
			why = "locate";
			break;
		}
		uint64_t in = pos - sp.off;
		uint64_t take = (sp.off + sp.len < end ? sp.off + sp.len : end) - pos;
		if (nbuf == cap) {
			size_t ncap = cap * 4;
			struct fuse_bufvec *nbv = malloc(sizeof *nbv + (ncap - 1) * sizeof nbv->buf[0]);
			wc_tile_ref **nrefs = malloc(ncap * sizeof *nrefs);
			bool *nends = malloc(ncap * sizeof *nends);
			if (!nbv || !nrefs || !nends) {
				free(nbv);
				free(nrefs);
				free(nends);
				err = ENOMEM;
				break;
			}
			memcpy(nbv, bv, sizeof *bv + (nbuf - 1) * sizeof bv->buf[0]);
			memcpy(nrefs, refs, nref * sizeof *refs);
			memcpy(nends, ends, nref * sizeof *ends);
			if (bv != &stack_bv.bv) {
				free(bv);
				free(refs);
				free(ends);
			}
			bv = nbv;
			refs = nrefs;
			ends = nends;
			cap = ncap;
		}
		struct fuse_buf *b = &bv->buf[nbuf];
		*b = (struct fuse_buf){ .size = (size_t)take };
		switch (sp.kind) {
		case WCFS_SPAN_MEM:
			b->mem = (void *)(sp.mem + in);
			break;
		case WCFS_SPAN_FD:
			b->flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK | FUSE_BUF_FD_RETRY;
			b->fd = sp.fd;
			b->pos = (off_t)(sp.fd_off + in);
			break;
		case WCFS_SPAN_TILE: {
			wc_tile_ref *ref;
			werr = wc_cache_get(fs->cache, sp.src, sp.tile, &ref);
			if (werr != WC_OK) {
				why = "decode";
				bad_tile = sp.tile;
				break;
			}
			ends[nref] = (uint64_t)sp.tile_off + in + take == ref->size;
			refs[nref++] = ref;
			if ((uint64_t)sp.tile_off + in + take > ref->size) {
				werr = wc_fail(WC_E_FORMAT, "span past the end of tile %u (%u bytes)",
					       sp.tile, ref->size);
				why = "locate";
				break;
			}
			b->mem = (void *)(ref->data + sp.tile_off + in);
			break;
		}
		default:
			werr = wc_fail(WC_E_FORMAT, "unknown span kind %d", (int)sp.kind);
			why = "locate";
			break;
		}
		if (werr != WC_OK)
			break;
		nbuf++;
		pos += take;
	}

	if (!err && werr != WC_OK) {
		char name[PATH_MAX];
		wcfs_vtree_source_path(n, name, sizeof name);
		uint64_t key = !strcmp(why, "decode") ? (uint64_t)bad_tile + 1 : 0;
		uint64_t rep = atomic_exchange(&n->bad_tile, key) == key
				       ? atomic_fetch_add(&n->bad_repeats, 1) + 1
				       : (atomic_store(&n->bad_repeats, 0), 0);
		if (rep & (rep - 1)) {
			/* the same tile again: logged at 1, 2, 4, 8, ... repeats */
		} else if (!strcmp(why, "decode"))
			wc_log(WC_LOG_ERR, "%s: read of %zu bytes at %llu: tile %u: %s%s%s%s", name,
			       size, (unsigned long long)off, bad_tile, wc_strerror(werr),
			       *wc_last_detail() ? ": " : "", wc_last_detail(),
			       rep ? " (again; repeats are logged at powers of two)" : "");
		else
			wc_log(WC_LOG_ERR, "%s: read of %zu bytes at %llu: %s%s%s", name, size,
			       (unsigned long long)off, wc_strerror(werr),
			       *wc_last_detail() ? ": " : "", wc_last_detail());
		err = werr == WC_E_NOMEM ? ENOMEM : EIO; /* never a short read */
	}

	int streaming = 0;
	const uint64_t tile = vn->blksize ? vn->blksize : sp.len;
	/* A stream is one once it has read two tiles' worth: a file no longer
	 * than that (each image of a .qvq archive) never has one, nor needs
	 * the detector's 2 KiB. */
	const uint64_t min_run = 2 * tile;
	if (!err && fs->readahead && sp.kind == WCFS_SPAN_TILE && vn->size > min_run) {
		uint64_t tol = tile > (1u << 20) ? tile : (1u << 20);
		wcfs_ra *ra = wcfs_node_ra(n);
		if (ra && wcfs_ra_note_stream(ra, off, size, sp.off, tol, min_run, &streaming))
			wcfs_prefetch_after(fs, vn, sp.off + sp.len, (uint64_t)wcfs_readahead_of(fs, vn) * tile);
	}

	if (err) {
		fuse_reply_err(req, err);
	} else {
		const uint64_t t_reply = wc_mono_ns();
		reply_segments(req, bv, nbuf);
		const uint64_t t_done = wc_mono_ns();
		atomic_fetch_add_explicit(&fs->reads, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&fs->read_bytes, size, memory_order_relaxed);
		atomic_fetch_add_explicit(&fs->read_ns, t_done - t_start, memory_order_relaxed);
		atomic_fetch_add_explicit(&fs->reply_ns, t_done - t_reply, memory_order_relaxed);
	}
	/* The reply has been written to /dev/fuse: the tile bytes may go. A
	 * stream's tiles read to their end are now in the page cache: release
	 * them as consumed, so their buffers serve the stream's next tiles. */
	for (size_t i = 0; i < nref; i++) {
		if (streaming && ends[i])
			wc_cache_release_consumed(fs->cache, refs[i]);
		else
			wc_cache_release(fs->cache, refs[i]);
	}
	if (bv != &stack_bv.bv) {
		free(bv);
		free(refs);
		free(ends);
	}
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	(void)ino;
	wcfs_handle *h = (wcfs_handle *)(uintptr_t)fi->fh;
	if (h->fd >= 0)
		read_passthrough(req, h, size, off);
	else
		read_virtual(req, fs_of(req), h->node, size, off);
}

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino;
	(void)datasync;
	(void)fi;
	fuse_reply_err(req, 0); /* nothing is ever dirty */
}

/* ---- everything that writes: EROFS ------------------------------------ */

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	(void)ino, (void)attr, (void)to_set, (void)fi;
	fuse_reply_err(req, EROFS);
}
static void op_mknod(fuse_req_t req, fuse_ino_t p, const char *name, mode_t mode, dev_t rdev)
{
	(void)p, (void)name, (void)mode, (void)rdev;
	fuse_reply_err(req, EROFS);
}
static void op_mkdir(fuse_req_t req, fuse_ino_t p, const char *name, mode_t mode)
{
	(void)p, (void)name, (void)mode;
	fuse_reply_err(req, EROFS);
}
static void op_unlink(fuse_req_t req, fuse_ino_t p, const char *name)
{
	(void)p, (void)name;
	fuse_reply_err(req, EROFS);
}
static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t p, const char *name)
{
	(void)link, (void)p, (void)name;
	fuse_reply_err(req, EROFS);
}
static void op_rename(fuse_req_t req, fuse_ino_t p, const char *name, fuse_ino_t np,
		      const char *nname, unsigned int flags)
{
	(void)p, (void)name, (void)np, (void)nname, (void)flags;
	fuse_reply_err(req, EROFS);
}
static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t np, const char *nname)
{
	(void)ino, (void)np, (void)nname;
	fuse_reply_err(req, EROFS);
}
static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	(void)ino, (void)buf, (void)size, (void)off, (void)fi;
	fuse_reply_err(req, EROFS);
}
static void op_create(fuse_req_t req, fuse_ino_t p, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	(void)p, (void)name, (void)mode, (void)fi;
	fuse_reply_err(req, EROFS);
}
static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			size_t size, int flags)
{
	(void)ino, (void)name, (void)value, (void)size, (void)flags;
	fuse_reply_err(req, EROFS);
}
static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	(void)ino, (void)name;
	fuse_reply_err(req, EROFS);
}
static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
			 struct fuse_file_info *fi)
{
	(void)ino, (void)mode, (void)offset, (void)length, (void)fi;
	fuse_reply_err(req, EROFS);
}

const struct fuse_lowlevel_ops wcfs_ll_ops = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.readlink = op_readlink,
	.statfs = op_statfs,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.releasedir = op_releasedir,
	.open = op_open,
	.release = op_release,
	.read = op_read,
	.flush = op_flush,
	.fsync = op_fsync,
	.setattr = op_setattr,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.unlink = op_unlink,
	.rmdir = op_unlink,
	.symlink = op_symlink,
	.rename = op_rename,
	.link = op_link,
	.write = op_write,
	.create = op_create,
	.setxattr = op_setxattr,
	.removexattr = op_removexattr,
	.fallocate = op_fallocate,
};
