/* cache_buffers.c - tile and payload buffers of the tile cache and their pool (cache_impl.h). */
#include "engine/cache_impl.h"

/* ---- tile buffers and entries -------------------------------------------- */

/* Backend buffers, counted with the time they took (wc_cache_stats): the
 * CUDA backend's are page-locked, and pinning or unpinning memory is slow
 * and may wait for the device. */
static void count_buf_op(wc_cache *c, _Atomic uint64_t *ops, uint64_t t0)
{
	atomic_fetch_add_explicit(ops, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&c->buf_ns, wc_mono_ns() - t0, memory_order_relaxed);
}

void *wc_tc_buf_alloc(wc_cache *c, size_t bytes)
{
	uint64_t t0 = wc_mono_ns();
	void *p = wc_backend_buf_alloc(c->backend, bytes);
	count_buf_op(c, &c->buf_allocs, t0);
	return p;
}

/* Fault in the pages of an ordinary buffer now, so the decode that first
 * writes it does not: MADV_POPULATE_WRITE (Linux 5.14) where the kernel has
 * it, else a write to every page. */
static void populate(uint8_t *buf, size_t bytes)
{
#ifdef MADV_POPULATE_WRITE
	if (madvise(buf, bytes, MADV_POPULATE_WRITE) == 0)
		return;
#endif
	long pg = sysconf(_SC_PAGESIZE);
	for (size_t o = 0; o < bytes; o += pg > 0 ? (size_t)pg : 4096)
		((volatile uint8_t *)buf)[o] = 0;
}

/* buf_alloc for the buffers made before the first read: the backend's own
 * memory comes mapped (page-locked), ordinary memory is faulted in now. */
uint8_t *wc_tc_buf_alloc_ready(wc_cache *c, size_t bytes)
{
	uint8_t *buf = wc_tc_buf_alloc(c, bytes);
	if (buf && !wc_backend_buf_is_backend_memory(c->backend))
		populate(buf, bytes);
	return buf;
}

void wc_tc_buf_free(wc_cache *c, void *p, size_t bytes)
{
	if (!p)
		return;
	uint64_t t0 = wc_mono_ns();
	wc_backend_buf_free(c->backend, p, bytes);
	count_buf_op(c, &c->buf_frees, t0);
}

/* Tile buffers of MMAP_MIN_BYTES or more are anonymous mappings of whole
 * pages: the pool hands a buffer to any tile that fits, so its size is its
 * page-rounded capacity (wc_backend_buf_size); smaller ones are malloc()ed.
 * A tile being decoded never waits for the backend's own memory: the CUDA
 * backend's page-locked buffers cost 1.2 ms per MiB to allocate, 4.5 ms
 * each with several dispatchers at once, and sixteen streams need hundreds
 * (docs/BENCHMARKS.md, "GPU backend through the mount"). Its buffers come from the pool,
 * which pool_prefill_main fills with backend memory in the background; a
 * tile in an ordinary buffer costs that backend a staging copy instead. */
static uint8_t *tile_alloc(wc_cache *c, size_t n)
{
	if (n < MMAP_MIN_BYTES)
		return malloc(n ? n : 1);
	uint64_t t0 = wc_mono_ns();
	void *p = wc_host_buf_alloc(n);
	count_buf_op(c, &c->buf_allocs, t0);
	return p;
}

/* Give a DECODING entry without a (pooled or recycled) buffer a new one of
 * its size, with the capacity tile_free will need. Returns false when out
 * of memory. No lock: nobody else touches a DECODING entry's buffer. */
bool wc_tc_entry_alloc_buf(wc_cache *c, entry *e)
{
	if (!e->buf) {
		e->buf = tile_alloc(c, e->ref.size);
		e->buf_cap = e->ref.size >= MMAP_MIN_BYTES ? wc_backend_buf_size(e->ref.size) : e->ref.size;
		e->buf_backend = false;
		e->buf_fresh = e->buf && e->ref.size >= MMAP_MIN_BYTES;
	}
	return e->buf != NULL;
}

/* Fault in a buffer entry_alloc_buf has just mapped, on the thread that
 * reads the tile's payload (the batch's reading threads in parallel, or
 * the reader decoding its own miss), before the decode writes it: one
 * madvise per buffer (populate) instead of a page fault per 4 KiB page in
 * the decode. Where every decode maps a fresh buffer (random reads into a
 * cache that has room), on 2 cores: the crops archive's images read in a
 * random order took 13% (images.npy) and 7% (PPM files) less daemon CPU,
 * random 4 KiB reads of a .wcodec file a p99 of 830 against 917 us;
 * streaming readers, which recycle buffers, are unchanged on 2 and 16
 * cores (docs/BENCHMARKS.md, "Image archives"). Pooled
 * and recycled buffers are faulted in already. */
void wc_tc_fault_in_fresh(entry *e)
{
	if (e->buf_fresh) {
		populate(e->buf, e->ref.size);
		e->buf_fresh = false;
	}
}

/* Free a tile buffer of capacity n: backend memory through the backend,
 * else by size as tile_alloc made it. */
void wc_tc_tile_free(wc_cache *c, uint8_t *p, size_t n, bool backend)
{
	if (!p)
		return;
	if (backend) {
		wc_tc_buf_free(c, p, n);
	} else if (n >= MMAP_MIN_BYTES) {
		uint64_t t0 = wc_mono_ns();
		wc_host_buf_free(p, n);
		count_buf_op(c, &c->buf_frees, t0);
	} else {
		free(p);
	}
}

/* Whether a free buffer of cap bytes may hold a tile of n bytes: it must be
 * a page-rounded one, not malloc()ed (tile_free decides by capacity), and
 * not waste more than the tile's own size. */
bool wc_tc_buf_fits(size_t cap, size_t n)
{
	return cap >= MMAP_MIN_BYTES && n <= cap && cap <= 2 * wc_backend_buf_size(n);
}

/* The pool's byte limit: half the budget at most. Pooled buffers count
 * against the budget and make_room unmaps them, smallest first, as soon as
 * decoded tiles need the room, so the limit only bounds what a stream keeps
 * for reuse. A stream over tiles of 64 KiB to 1 MiB needs a few MiB of
 * slack for its sizes to meet: with an eighth of a 64 MiB budget, each read
 * of a 145 MB file mapped (and faulted in) 116 fresh buffers and unmapped
 * 109 (docs/BENCHMARKS.md). */
uint64_t wc_tc_pool_max(const wc_cache *c)
{
	uint64_t max = wc_backend_buf_is_backend_memory(c->backend) ? POOL_MAX_BACKEND_BYTES : POOL_MAX_BYTES;
	return wc_tc_budget_of(c) / 2 < max ? wc_tc_budget_of(c) / 2 : max;
}

/* Put the free buffer *buf of *cap bytes (tile_alloc's, or the backend's
 * memory if *backend) in the pool (kept sorted by capacity, smallest first,
 * so pool_take finds the best fit). A full pool gives up its smallest
 * buffers for a bigger one: a big buffer can hold any tile, a small one
 * only small tiles, so a pool of small buffers would miss every big tile.
 * Lock held. Returns the buffer the caller must free in *buf, *cap and
 * *backend (the given one, or one the pool gave up), *buf NULL if none. */
void wc_tc_pool_put(wc_cache *c, uint8_t **buf, size_t *cap, bool *backend)
{
	uint64_t max = wc_tc_pool_max(c);
	if (c->bytes + max > wc_tc_budget_of(c))
		max = wc_tc_budget_of(c) > c->bytes ? wc_tc_budget_of(c) - c->bytes : 0;
	if (*cap < MMAP_MIN_BYTES || *cap > max)
		return;
	free_buf *give = NULL;
	while (c->pool_bytes + *cap > max && c->pool && c->pool->cap < *cap) {
		free_buf *h = c->pool;
		c->pool = h->next;
		c->pool_bytes -= h->cap;
		if (give) /* rare: a second one to give up, unmapped here */
			wc_tc_tile_free(c, (uint8_t *)give, give->cap, give->backend);
		give = h;
	}
	if (c->pool_bytes + *cap > max) {
		if (give) /* rare: a bigger one stays; both are freed */
			wc_tc_tile_free(c, (uint8_t *)give, give->cap, give->backend);
		return;
	}
	free_buf *f = (free_buf *)(void *)*buf, **pp = &c->pool;
	while (*pp && (*pp)->cap < *cap)
		pp = &(*pp)->next;
	f->cap = *cap;
	f->backend = *backend;
	f->next = *pp;
	*pp = f;
	c->pool_bytes += *cap;
	*buf = (uint8_t *)give;
	*cap = give ? give->cap : 0;
	*backend = give && give->backend;
}

/* The smallest pooled buffer that fits n bytes, out of the pool, with its
 * capacity in *cap and its kind in *backend; if none is big enough, the
 * biggest one grown with mremap() (its pages stay, only the new tail faults
 * in), since tile sizes vary and a stream's bigger tiles would otherwise
 * miss a pool of smaller buffers. NULL if the pool is empty or mremap
 * fails, and when the biggest is the backend's memory, which cannot be
 * mremap()ed: the dispatcher then maps the tile's buffer without the lock
 * (entry_alloc_buf). Lock held. */
uint8_t *wc_tc_pool_take(wc_cache *c, size_t n, size_t *cap, bool *backend)
{
	free_buf **pp = &c->pool, **last = NULL;
	for (; *pp; pp = &(*pp)->next) {
		free_buf *f = *pp;
		last = pp;
		if (f->cap < n)
			continue;
		*pp = f->next;
		c->pool_bytes -= f->cap;
		*cap = f->cap;
		*backend = f->backend;
		return (uint8_t *)f;
	}
	if (!last || (*last)->backend)
		return NULL;
	free_buf *f = *last;
	*last = f->next;
	c->pool_bytes -= f->cap;
	size_t want = wc_backend_buf_size(n);
	void *p = mremap(f, f->cap, want, MREMAP_MAYMOVE);
	if (p == MAP_FAILED) {
		wc_host_buf_free(f, f->cap);
		return NULL;
	}
	*cap = want;
	*backend = false;
	return p;
}

/* Unmap pooled buffers, smallest first (a big one can hold any tile), until
 * decoded tiles of `bytes` bytes plus the pool fit in the budget, or the
 * pool is empty; with UINT64_MAX, all of them. Lock held. */
void wc_tc_pool_shrink(wc_cache *c, uint64_t bytes)
{
	while (c->pool && (bytes == UINT64_MAX || bytes + c->pool_bytes > wc_tc_budget_of(c))) {
		free_buf *f = c->pool;
		c->pool = f->next;
		c->pool_bytes -= f->cap;
		wc_tc_tile_free(c, (uint8_t *)f, f->cap, f->backend);
	}
}

