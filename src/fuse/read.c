/* read.c - answering READ (read.h): a request's spans are located once,
 * its later tiles queued before the first is waited for, the reply written
 * straight from the decoded tiles, and sequential streams detected and read
 * ahead of (prefetch.h). */
#include "fuse/read.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "core/clock.h"
#include "fuse/prefetch.h"

void wcfs_read_passthrough(fuse_req_t req, int fd, size_t size, off_t off)
{
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT(size);
	bv.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK | FUSE_BUF_FD_RETRY; /* no short read */
	bv.buf[0].fd = fd;
	bv.buf[0].pos = off;
	fuse_reply_data(req, &bv, FUSE_BUF_SPLICE_MOVE);
}

/* Segments one writev reply may carry: libfuse adds one for the header and
 * the kernel's writev limit is IOV_MAX (1024). Past this, copy. */
#define MAX_IOV_SEGS 256
#define STACK_SEGS 32

/* One piece of the reply: bytes [in, in + take) of span sp, and for a tile
 * span the decoded tile once it is held. */
typedef struct read_seg {
	wcfs_span sp;
	uint64_t in, take;
	wc_tile_ref *ref;
} read_seg;

typedef struct read_plan {
	read_seg *seg;
	size_t n, cap;
	read_seg stack[STACK_SEGS];
} read_plan;

/* The spans of vn's bytes [off, end), each located once. Errors: a
 * provider's, WC_E_FORMAT for a span that does not hold its offset,
 * WC_E_NOMEM. */
static wc_err plan_spans(const wcfs_vnode *vn, uint64_t off, uint64_t end, read_plan *p)
{
	for (uint64_t pos = off; pos < end;) {
		if (p->n == p->cap) {
			size_t ncap = p->cap * 4;
			read_seg *ns = p->seg == p->stack ? malloc(ncap * sizeof *ns) : realloc(p->seg, ncap * sizeof *ns);
			if (!ns)
				return wc_fail(WC_E_NOMEM, "out of memory for %zu reply segments", ncap);
			if (p->seg == p->stack)
				memcpy(ns, p->stack, p->n * sizeof *ns);
			p->seg = ns;
			p->cap = ncap;
		}
		read_seg *s = &p->seg[p->n];
		memset(s, 0, sizeof *s);
		wc_clear_detail();
		wc_err e = vn->ops->locate(vn, pos, &s->sp);
		if (e)
			return e;
		if (s->sp.off > pos || s->sp.len == 0 || pos - s->sp.off >= s->sp.len)
			return wc_fail(WC_E_FORMAT, "provider gave span [%llu,+%llu) for offset %llu",
				       (unsigned long long)s->sp.off, (unsigned long long)s->sp.len,
				       (unsigned long long)pos);
		if (s->sp.kind != WCFS_SPAN_MEM && s->sp.kind != WCFS_SPAN_FD && s->sp.kind != WCFS_SPAN_TILE)
			return wc_fail(WC_E_FORMAT, "unknown span kind %d", (int)s->sp.kind);
		s->in = pos - s->sp.off;
		s->take = (s->sp.off + s->sp.len < end ? s->sp.off + s->sp.len : end) - pos;
		p->n++;
		pos += s->take;
	}
	return WC_OK;
}

/* Where a memory or tile segment's bytes are (its tile held). */
static const uint8_t *seg_bytes(const read_seg *s)
{
	return s->sp.kind == WCFS_SPAN_MEM ? s->sp.mem + s->in : s->ref->data + s->sp.tile_off + s->in;
}

/* Send the plan's bytes as one reply. Memory only (prefix and tile bytes):
 * one writev straight from the buffers (fuse_reply_iov; libfuse's
 * fuse_reply_data would first copy several memory buffers into one), or,
 * over more pieces than one writev takes, one gathered copy. With a
 * descriptor among them (a passed-through piece): fuse_reply_data. */
static void reply_plan(fuse_req_t req, const read_plan *p)
{
	bool fd = false;
	for (size_t i = 0; i < p->n && !fd; i++)
		fd = p->seg[i].sp.kind == WCFS_SPAN_FD;
	if (!fd && p->n > MAX_IOV_SEGS) {
		/* A read over many tiny tiles: a failed reply write would leave
		 * the kernel's request pending forever, so gather the bytes. */
		size_t total = 0, pos = 0;
		for (size_t i = 0; i < p->n; i++)
			total += p->seg[i].take;
		uint8_t *flat = malloc(total ? total : 1);
		if (!flat) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		for (size_t i = 0; i < p->n; i++) {
			const read_seg *s = &p->seg[i];
			const uint8_t *src = seg_bytes(s);
			memcpy(flat + pos, src, s->take);
			pos += s->take;
		}
		fuse_reply_buf(req, (const char *)flat, total);
		free(flat);
		return;
	}
	if (!fd) {
		struct iovec stack_iov[STACK_SEGS], *iov = stack_iov;
		if (p->n > STACK_SEGS && !(iov = malloc(p->n * sizeof *iov))) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		for (size_t i = 0; i < p->n; i++) {
			const read_seg *s = &p->seg[i];
			const uint8_t *src = seg_bytes(s);
			iov[i] = (struct iovec){ .iov_base = (void *)src, .iov_len = (size_t)s->take };
		}
		fuse_reply_iov(req, iov, (int)p->n);
		if (iov != stack_iov)
			free(iov);
		return;
	}
	struct fuse_bufvec *bv = malloc(sizeof *bv + p->n * sizeof bv->buf[0]);
	if (!bv) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	for (size_t i = 0; i < p->n; i++) {
		const read_seg *s = &p->seg[i];
		struct fuse_buf *b = &bv->buf[i];
		*b = (struct fuse_buf){ .size = (size_t)s->take };
		if (s->sp.kind == WCFS_SPAN_FD) {
			b->flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK | FUSE_BUF_FD_RETRY;
			b->fd = s->sp.fd;
			b->pos = (off_t)(s->sp.fd_off + s->in);
		} else {
			b->mem = (void *)seg_bytes(s);
		}
	}
	bv->count = p->n;
	bv->idx = 0;
	bv->off = 0;
	fuse_reply_data(req, bv, FUSE_BUF_NO_SPLICE);
	free(bv);
}

/* A failed read, logged once per file and tile (then at powers of two of
 * its repeats): the reader gets the error, never a short read. */
static int read_failed(wcfs_node *n, size_t size, uint64_t off, wc_err e, const read_seg *bad)
{
	char name[PATH_MAX];
	wcfs_vtree_source_path(n, name, sizeof name);
	uint64_t key = bad ? (uint64_t)bad->sp.tile + 1 : 0;
	uint64_t rep = atomic_exchange(&n->bad_tile, key) == key ? atomic_fetch_add(&n->bad_repeats, 1) + 1
								: (atomic_store(&n->bad_repeats, 0), 0);
	if (bad && (e == WC_E_CORRUPT || e == WC_E_FORMAT))
		atomic_store(&n->damaged, true); /* later opens fail (ops.c) */
	if (rep & (rep - 1)) {
		/* the same tile again: logged at 1, 2, 4, 8, ... repeats */
	} else if (bad) {
		wc_log(WC_LOG_ERR, "%s: read of %zu bytes at %llu: tile %u: %s%s%s%s", name, size,
		       (unsigned long long)off, bad->sp.tile, wc_strerror(e), *wc_last_detail() ? ": " : "",
		       wc_last_detail(), rep ? " (again; repeats are logged at powers of two)" : "");
	} else {
		wc_log(WC_LOG_ERR, "%s: read of %zu bytes at %llu: %s%s%s", name, size, (unsigned long long)off,
		       wc_strerror(e), *wc_last_detail() ? ": " : "", wc_last_detail());
	}
	return wc_err_to_errno(e);
}

/* Copy the bytes of the held tile segments before segment `upto` into
 * their places in `copy` (the reply's bytes from `off`), make them memory
 * segments, and release their tiles. */
static void copy_held(wcfs_fs *fs, read_plan *p, size_t upto, uint8_t *copy, uint64_t off)
{
	for (size_t j = 0; j < upto; j++) {
		read_seg *h = &p->seg[j];
		if (h->sp.kind != WCFS_SPAN_TILE || !h->ref)
			continue;
		uint8_t *dst = copy + (h->sp.off + h->in - off);
		memcpy(dst, h->ref->data + h->sp.tile_off + h->in, h->take);
		wc_cache_release(fs->cache, h->ref);
		h->ref = NULL;
		h->sp.kind = WCFS_SPAN_MEM;
		h->sp.mem = dst;
		h->in = 0;
	}
}

void wcfs_read_virtual(fuse_req_t req, wcfs_fs *fs, wcfs_node *n, size_t size, off_t off_)
{
	const wcfs_vnode *vn = n->vn;
	uint64_t off = (uint64_t)off_;
	if (off_ < 0 || off >= vn->size || size == 0) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > vn->size - off)
		size = (size_t)(vn->size - off);
	const uint64_t end = off + size, t_start = wc_mono_ns();
	read_plan p = { .cap = STACK_SEGS };
	p.seg = p.stack;
	int err = 0;
	wc_err e = plan_spans(vn, off, end, &p);
	if (e) {
		err = e == WC_E_NOMEM ? ENOMEM : read_failed(n, size, off, e, NULL);
		p.n = 0;
	}

	/* A request over several tiles (a 1 MiB read across a tile boundary, a
	 * page-cache readahead): queue the later tiles before waiting for the
	 * first, so they decode side by side rather than one after another. */
	wcfs_tile_runs runs = { 0 };
	bool first = true;
	for (size_t i = 0; i < p.n; i++)
		if (p.seg[i].sp.kind == WCFS_SPAN_TILE) {
			if (!first)
				wcfs_runs_add(fs, &runs, &p.seg[i].sp);
			first = false;
		}
	wcfs_runs_flush(fs, &runs);

	/* Tiles held for this reply so far: they cannot go until it is
	 * written, so they must not keep its later tiles from decoding
	 * (wc_cache_get_holding). Where holding them and the next would pass
	 * the cache's budget (tiles larger than it), their bytes of the reply
	 * are copied out and the tiles let go first: a copy of at most one
	 * request instead of a second tile in memory. */
	uint64_t held = 0;
	uint8_t *copy = NULL;
	for (size_t i = 0; !err && i < p.n; i++) {
		read_seg *s = &p.seg[i];
		if (s->sp.kind != WCFS_SPAN_TILE)
			continue;
		if (held && held + s->sp.len > wc_cache_room(fs->cache)) {
			if (!copy && !(copy = malloc(size))) {
				err = ENOMEM;
				break;
			}
			copy_held(fs, &p, i, copy, off);
			held = 0;
		}
		wc_clear_detail();
		if ((e = wc_cache_get_holding(fs->cache, s->sp.src, s->sp.tile, held, &s->ref))) {
			s->ref = NULL;
			err = read_failed(n, size, off, e, s);
		} else {
			held += s->ref->size;
			if ((uint64_t)s->sp.tile_off + s->in + s->take > s->ref->size) {
				e = wc_fail(WC_E_FORMAT, "span past the end of tile %u (%u bytes)", s->sp.tile,
					    s->ref->size);
				err = read_failed(n, size, off, e, NULL);
			}
		}
	}

	int streaming = 0;
	if (!err && fs->readahead && p.n && p.seg[p.n - 1].sp.kind == WCFS_SPAN_TILE) {
		const wcfs_span *last = &p.seg[p.n - 1].sp;
		const uint64_t tile = vn->blksize ? vn->blksize : last->len;
		/* A stream is one once it has read two tiles' worth: a file no
		 * longer than that (each image of a .qvq archive) never has one,
		 * nor needs the detector's 2 KiB. */
		const uint64_t min_run = 2 * tile;
		wcfs_ra *ra = vn->size > min_run ? wcfs_node_ra(n) : NULL;
		uint64_t tol = tile > (1u << 20) ? tile : (1u << 20);
		if (ra && wcfs_ra_note_stream(ra, off, size, last->off, tol, min_run, &streaming))
			wcfs_prefetch_after(fs, vn, last->off + last->len, (uint64_t)wcfs_readahead_of(fs, vn) * tile);
	}

	if (err) {
		fuse_reply_err(req, err);
	} else {
		const uint64_t t_reply = wc_mono_ns();
		reply_plan(req, &p);
		const uint64_t t_done = wc_mono_ns();
		atomic_fetch_add_explicit(&fs->reads, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&fs->read_bytes, size, memory_order_relaxed);
		atomic_fetch_add_explicit(&fs->read_ns, t_done - t_start, memory_order_relaxed);
		atomic_fetch_add_explicit(&fs->reply_ns, t_done - t_reply, memory_order_relaxed);
	}
	/* The reply has been written to /dev/fuse: the tile bytes may go. A
	 * stream's tiles read to their end are now in the page cache: release
	 * them as consumed, so their buffers serve the stream's next tiles. */
	for (size_t i = 0; i < p.n; i++) {
		read_seg *s = &p.seg[i];
		if (!s->ref)
			continue;
		if (streaming && s->sp.tile_off + s->in + s->take == s->ref->size)
			wc_cache_release_consumed(fs->cache, s->ref);
		else
			wc_cache_release(fs->cache, s->ref);
	}
	if (p.seg != p.stack)
		free(p.seg);
	free(copy);
}
