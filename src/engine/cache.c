/*
 * cache.c - the decoded-tile cache (cache.h).
 *
 * Design after DwarFS's block cache (refcounted decoded blocks, one decode
 * shared by every reader that wants it, a byte-budgeted LRU) and squashfuse's
 * cache; the code is our own.
 *
 * Every entry is in the hash table from the moment someone asks for it until
 * it is evicted, dropped, or its decode fails. Its state moves
 *   QUEUED -> DECODING -> READY, or -> FAILED (and out of the table).
 * An entry is on at most one list, linked through prev/next:
 *   the demand queue    QUEUED, a reader waits for it;
 *   the prefetch queue  QUEUED, only wc_cache_prefetch() asked for it;
 *   the LRU             READY, used by a reader, and no reader holds it now
 *                       (hot at the head, cold at the tail);
 *   the cold FIFO       READY, prefetched, no reader has used it yet: the
 *                       LRU's cold end, kept apart (see victim()).
 * Only entries on the LRU or the cold FIFO are evictable.
 * refs counts readers holding the entry or waiting for it. One mutex guards
 * everything; a hit is one hash lookup and a list unlink under it.
 *
 * Budget: `bytes` is the decoded size of every READY or DECODING entry. A
 * dispatcher charges a tile before decoding it, evicting from the LRU's cold
 * end to make room; a reader's tile is decoded even when nothing evictable
 * is left (the budget is then exceeded only while readers hold more than it),
 * a prefetched one is dropped instead.
 */
#include "engine/cache.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/clock.h"
#include "engine/threadpool.h"

#define DEFAULT_BUDGET (1ull << 30)
#define DEFAULT_MAX_PREFETCH 8u
/* Tile buffers this big or bigger are mmap()ed so that freeing them returns
 * the memory to the OS at once (glibc's malloc may keep large freed chunks
 * in its heap once its dynamic mmap threshold has grown). */
#define MMAP_MIN_BYTES (64u << 10)
/* A batch stops growing at this many payload bytes (a single larger tile
 * is a batch of its own), and a dispatcher keeps its payload buffer between
 * batches up to a little more: re-faulting the buffer for every batch would
 * cost as much as decoding it, and two dispatchers' buffers (the CPU
 * backend's concurrency) stay well inside the daemon's RSS allowance of
 * 64 MiB over the cache budget. */
#define BATCH_PAYLOAD_MAX (16u << 20)
#define PAYLOAD_KEEP_BYTES (BATCH_PAYLOAD_MAX + (1u << 20))
#define PAYLOAD_ALIGN 16u
/* Tiles a sequential reader has read to their end (wc_cache_release_consumed)
 * stay on the consumed FIFO up to this many bytes (and at least the newest
 * one), for requests the kernel sends out of order; older ones are dropped
 * and their buffers go to the free-buffer pool, up to POOL_MAX_BYTES, for
 * the next tiles to decode into: a streaming reader then decodes into pages
 * already faulted in instead of faulting (and zeroing) a fresh mapping for
 * every tile. A request that comes after its tile left the window decodes
 * it again (0-2 of 1045 tiles for one cold reader of a .wcodec file).
 *
 * The pool hands out the buffer it got last, so the window also sets how
 * long ago a reused buffer was last touched. Where the CPU decodes into
 * ordinary memory the window is short: with 4 MiB a stream of qvq tiles
 * went round 15 buffers (13 MiB, plus as much page cache written in
 * between, past this machine's 32 MiB L3), with 1 MiB 12, and over twenty
 * alternating reads of images.npy the daemon used 6% less CPU (120 against
 * 128 ms) and read 4% faster (docs/BENCHMARKS-QVQ.md, section 2,
 * twenty-third session). The backend's page-locked buffers are written by
 * the device, not through the CPU's caches: their window stays 4 MiB,
 * which sixteen concurrent streams on the GPU machine were tuned with. */
#define CONSUMED_KEEP_BYTES (1u << 20)
#define CONSUMED_KEEP_BACKEND_BYTES (4u << 20)
#define POOL_MAX_BYTES (48u << 20)
/* The pool's limit when the backend allocates the buffers (page-locked
 * memory: allocating and freeing it costs about 1.2 ms per MiB, and
 * freeing may wait for the device): room for every buffer four streams
 * keep in flight, so a steady read allocates and frees none. */
#define POOL_MAX_BACKEND_BYTES (128u << 20)
/* A prefetched tile t tiles past the first one asked for is due this much
 * later per tile (about the time a 2 GB/s stream takes to read 1 MiB): it
 * orders the prefetch queue across streams, it is no deadline. */
#define PREFETCH_STEP_NS 500000u
/* Waits and batches longer than this are traced at WC_LOG_DEBUG. */
#define SLOW_NS 2000000u

enum entry_state { E_QUEUED, E_DECODING, E_READY, E_FAILED };
enum entry_list { ON_NONE, ON_DEMAND, ON_PREFETCH, ON_LRU, ON_COLD, ON_CONSUMED };

typedef struct entry {
	wc_tile_ref ref;          /* what readers get; first so a ref is the entry */
	uint64_t id;              /* source id */
	uint32_t tile;
	uint8_t state;            /* entry_state */
	uint8_t list;             /* entry_list */
	bool prefetch_in_flight;  /* counts in cache->prefetch_in_flight (and _bytes) */
	bool in_table;
	bool dropped;             /* its source was dropped while it was decoding */
	bool consumed;            /* a sequential reader read it to its end */
	bool waited;              /* a reader waited for it when its decode began */
	uint64_t due;             /* prefetch queue order: when its reader should want it (ns) */
	uint32_t refs;            /* readers holding or waiting */
	uint64_t charge;          /* bytes counted in cache->bytes */
	uint32_t csize;           /* payload bytes */
	struct entry *hnext;      /* hash chain; the free list once out of the table */
	struct entry *prev, *next;
	wc_tile_source *src;      /* retained while QUEUED or DECODING */
	uint8_t *buf;             /* ref.size bytes used */
	size_t buf_cap;           /* bytes mapped at buf (>= ref.size; tile_free's size) */
	bool buf_backend;         /* buf is the backend's memory (buf_alloc), else mmap()ed or malloc()ed */
	bool buf_fresh;           /* buf was mapped for this decode and not faulted in yet */
	wc_err err;               /* FAILED: the decode's error and reason */
	char *reason;
} entry;

/* A free tile buffer in the pool: the struct lives in the buffer itself. */
typedef struct free_buf {
	struct free_buf *next;
	size_t cap;
	bool backend; /* the backend's memory (buf_alloc), else mmap()ed */
} free_buf;

typedef struct entry_list_head {
	entry *head, *tail;
	size_t n;
} entry_list_head;

/* A dispatch thread and its scratch, allocated once. */
typedef struct dispatcher {
	struct wc_cache *cache;
	pthread_t thread;
	entry **batch;        /* max_batch */
	wc_tile_job *jobs;    /* max_batch */
	uint32_t *job_entry;  /* job index -> batch index */
	wc_tile_source **srcs;
	uint8_t *payload;     /* payload buffer (wc_backend_buf_alloc) */
	size_t payload_cap;
	uint64_t read_ns, decode_ns; /* the last batch's, added to the stats when it is published */
	size_t *payload_off;  /* max_batch: where entry i's payload goes in the buffer */
} dispatcher;

struct wc_cache {
	pthread_mutex_t lock;
	pthread_cond_t work; /* dispatchers: something queued, or stop */
	pthread_cond_t done; /* readers: a batch was published */
	entry **buckets;
	size_t nbuckets;     /* power of two */
	size_t count;        /* entries in the table */
	entry_list_head demand, prefetch, lru, cold, consumed;
	uint64_t consumed_bytes; /* decoded bytes on the consumed FIFO */
	uint64_t cold_bytes;     /* decoded bytes on the cold FIFO */
	struct free_buf *pool;   /* free tile buffers, smallest first */
	uint64_t pool_bytes;     /* bytes mapped in the pool; counted against the budget */
	size_t cold_keep; /* unused prefetched entries spared while the LRU has victims */
	uint64_t cold_keep_bytes; /* ... and their bytes (with max_prefetch_bytes) */
	uint64_t budget, bytes;
	uint64_t external; /* memory held for the cache's users outside it (wc_cache_charge) */
	uint32_t max_prefetch, prefetch_in_flight;
	uint64_t max_prefetch_bytes, prefetch_bytes_in_flight; /* decoded bytes of those tiles */
	uint32_t max_batch;
	wc_backend *backend;
	bool stop;
	unsigned ndispatch;
	dispatcher *dispatchers;
	wc_threadpool *readers; /* payload reads of a batch in parallel; NULL: serial */
	uint32_t ndecoding;     /* entries DECODING now (in dispatchers' batches) */
	uint32_t prefill_bytes; /* wc_cache_opts.prefill_tile_bytes, page-rounded; 0: none */
	size_t payload_prealloc; /* each dispatcher's first payload buffer (dispatch_main); 0: none */
	pthread_t prefill;      /* fills the pool (pool_prefill_main); joined by destroy */
	bool prefilling;        /* the prefill thread was started */
	bool caller_decodes;    /* wc_cache_opts.decode_misses_on_caller */
	uint64_t t_created;     /* wc_mono_ns() at creation, for the debug trace */
	_Atomic uint64_t buf_allocs, buf_frees, buf_ns; /* buffers mapped and freed, and the time: stats */
	wc_cache_stats st;
};

/* ---- lists --------------------------------------------------------------- */

/* The bytes tiles may take: the budget less what is charged from outside. */
static uint64_t budget_of(const wc_cache *c)
{
	return c->budget > c->external ? c->budget - c->external : 0;
}

static entry_list_head *list_of(wc_cache *c, int which)
{
	switch (which) {
	case ON_DEMAND: return &c->demand;
	case ON_PREFETCH: return &c->prefetch;
	case ON_COLD: return &c->cold;
	case ON_CONSUMED: return &c->consumed;
	default: return &c->lru;
	}
}

static void list_unlink(wc_cache *c, entry *e)
{
	if (e->list == ON_NONE)
		return;
	entry_list_head *l = list_of(c, e->list);
	if (e->list == ON_CONSUMED)
		c->consumed_bytes -= e->ref.size;
	if (e->list == ON_COLD)
		c->cold_bytes -= e->ref.size;
	l->n--;
	if (e->prev)
		e->prev->next = e->next;
	else
		l->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		l->tail = e->prev;
	e->prev = e->next = NULL;
	e->list = ON_NONE;
}

static void list_push_tail(wc_cache *c, entry *e, int which)
{
	entry_list_head *l = list_of(c, which);
	l->n++;
	e->list = (uint8_t)which;
	e->next = NULL;
	e->prev = l->tail;
	if (l->tail)
		l->tail->next = e;
	else
		l->head = e;
	l->tail = e;
}

/* Insert e into queue `which` after every entry due no later (FIFO among
 * equals); new entries are mostly due last, so the walk starts at the tail. */
static void list_insert_by_due(wc_cache *c, entry *e, int which)
{
	entry_list_head *l = list_of(c, which);
	entry *p = l->tail;
	while (p && p->due > e->due)
		p = p->prev;
	l->n++;
	e->list = (uint8_t)which;
	e->prev = p;
	e->next = p ? p->next : l->head;
	if (e->next)
		e->next->prev = e;
	else
		l->tail = e;
	if (p)
		p->next = e;
	else
		l->head = e;
}

static void list_push_head(wc_cache *c, entry *e, int which)
{
	entry_list_head *l = list_of(c, which);
	if (which == ON_COLD)
		c->cold_bytes += e->ref.size;
	l->n++;
	e->list = (uint8_t)which;
	e->prev = NULL;
	e->next = l->head;
	if (l->head)
		l->head->prev = e;
	else
		l->tail = e;
	l->head = e;
}

/* ---- hash table ---------------------------------------------------------- */

static size_t bucket_of(const wc_cache *c, uint64_t id, uint32_t tile)
{
	/* splitmix64's finaliser over the key: ids and tiles are small and dense. */
	uint64_t x = id * 0x9e3779b97f4a7c15ull ^ tile;
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return (size_t)x & (c->nbuckets - 1);
}

static entry *table_find(const wc_cache *c, uint64_t id, uint32_t tile)
{
	for (entry *e = c->buckets[bucket_of(c, id, tile)]; e; e = e->hnext)
		if (e->id == id && e->tile == tile)
			return e;
	return NULL;
}

static void table_grow(wc_cache *c)
{
	size_t n = c->nbuckets * 2;
	entry **b = calloc(n, sizeof *b);
	if (!b)
		return; /* longer chains, still correct */
	entry **old = c->buckets;
	size_t oldn = c->nbuckets;
	c->buckets = b;
	c->nbuckets = n;
	for (size_t i = 0; i < oldn; i++) {
		for (entry *e = old[i], *next; e; e = next) {
			next = e->hnext;
			size_t k = bucket_of(c, e->id, e->tile);
			e->hnext = b[k];
			b[k] = e;
		}
	}
	free(old);
}

static void table_insert(wc_cache *c, entry *e)
{
	if (c->count >= c->nbuckets)
		table_grow(c);
	size_t k = bucket_of(c, e->id, e->tile);
	e->hnext = c->buckets[k];
	c->buckets[k] = e;
	e->in_table = true;
	c->count++;
}

static void table_remove(wc_cache *c, entry *e)
{
	entry **pp = &c->buckets[bucket_of(c, e->id, e->tile)];
	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
	e->hnext = NULL;
	e->in_table = false;
	c->count--;
}

/* ---- tile buffers and entries -------------------------------------------- */

/* Backend buffers, counted with the time they took (wc_cache_stats): the
 * CUDA backend's are page-locked, and pinning or unpinning memory is slow
 * and may wait for the device. */
static void count_buf_op(wc_cache *c, _Atomic uint64_t *ops, uint64_t t0)
{
	atomic_fetch_add_explicit(ops, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&c->buf_ns, wc_mono_ns() - t0, memory_order_relaxed);
}

static void *buf_alloc(wc_cache *c, size_t bytes)
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
static uint8_t *buf_alloc_ready(wc_cache *c, size_t bytes)
{
	uint8_t *buf = buf_alloc(c, bytes);
	if (buf && !wc_backend_buf_is_backend_memory(c->backend))
		populate(buf, bytes);
	return buf;
}

static void buf_free(wc_cache *c, void *p, size_t bytes)
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
 * (docs/BENCHMARKS-GPU.md, section 19). Its buffers come from the pool,
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
static bool entry_alloc_buf(wc_cache *c, entry *e)
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
 * cores (docs/BENCHMARKS-QVQ.md, section 2, twenty-fourth session). Pooled
 * and recycled buffers are faulted in already. */
static void fault_in_fresh(entry *e)
{
	if (e->buf_fresh) {
		populate(e->buf, e->ref.size);
		e->buf_fresh = false;
	}
}

/* Free a tile buffer of capacity n: backend memory through the backend,
 * else by size as tile_alloc made it. */
static void tile_free(wc_cache *c, uint8_t *p, size_t n, bool backend)
{
	if (!p)
		return;
	if (backend) {
		buf_free(c, p, n);
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
static bool buf_fits(size_t cap, size_t n)
{
	return cap >= MMAP_MIN_BYTES && n <= cap && cap <= 2 * wc_backend_buf_size(n);
}

/* The pool's byte limit: half the budget at most. Pooled buffers count
 * against the budget and make_room unmaps them, smallest first, as soon as
 * decoded tiles need the room, so the limit only bounds what a stream keeps
 * for reuse. A stream over tiles of 64 KiB to 1 MiB needs a few MiB of
 * slack for its sizes to meet: with an eighth of a 64 MiB budget, each read
 * of a 145 MB file mapped (and faulted in) 116 fresh buffers and unmapped
 * 109 (docs/BENCHMARKS.md, fifteenth session). */
static uint64_t pool_max(const wc_cache *c)
{
	uint64_t max = wc_backend_buf_is_backend_memory(c->backend) ? POOL_MAX_BACKEND_BYTES : POOL_MAX_BYTES;
	return budget_of(c) / 2 < max ? budget_of(c) / 2 : max;
}

/* Put the free buffer *buf of *cap bytes (tile_alloc's, or the backend's
 * memory if *backend) in the pool (kept sorted by capacity, smallest first,
 * so pool_take finds the best fit). A full pool gives up its smallest
 * buffers for a bigger one: a big buffer can hold any tile, a small one
 * only small tiles, so a pool of small buffers would miss every big tile.
 * Lock held. Returns the buffer the caller must free in *buf, *cap and
 * *backend (the given one, or one the pool gave up), *buf NULL if none. */
static void pool_put(wc_cache *c, uint8_t **buf, size_t *cap, bool *backend)
{
	uint64_t max = pool_max(c);
	if (c->bytes + max > budget_of(c))
		max = budget_of(c) > c->bytes ? budget_of(c) - c->bytes : 0;
	if (*cap < MMAP_MIN_BYTES || *cap > max)
		return;
	free_buf *give = NULL;
	while (c->pool_bytes + *cap > max && c->pool && c->pool->cap < *cap) {
		free_buf *h = c->pool;
		c->pool = h->next;
		c->pool_bytes -= h->cap;
		if (give) /* rare: a second one to give up, unmapped here */
			tile_free(c, (uint8_t *)give, give->cap, give->backend);
		give = h;
	}
	if (c->pool_bytes + *cap > max) {
		if (give) /* rare: a bigger one stays; both are freed */
			tile_free(c, (uint8_t *)give, give->cap, give->backend);
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
static uint8_t *pool_take(wc_cache *c, size_t n, size_t *cap, bool *backend)
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
static void pool_shrink(wc_cache *c, uint64_t bytes)
{
	while (c->pool && (bytes == UINT64_MAX || bytes + c->pool_bytes > budget_of(c))) {
		free_buf *f = c->pool;
		c->pool = f->next;
		c->pool_bytes -= f->cap;
		tile_free(c, (uint8_t *)f, f->cap, f->backend);
	}
}

/* Free an entry already out of the table and off every list, without the
 * lock (it may munmap and release a source). */
static void entry_free(wc_cache *c, entry *e)
{
	if (e->src)
		e->src->ops->release(e->src);
	tile_free(c, e->buf, e->buf_cap, e->buf_backend);
	free(e->reason);
	free(e);
}

static void free_chain(wc_cache *c, entry *e)
{
	for (entry *next; e; e = next) {
		next = e->hnext;
		entry_free(c, e);
	}
}

/* A prefetched entry's decode is over (or it is gone): it no longer counts
 * against the prefetch limits. Lock held. */
static void prefetch_done(wc_cache *c, entry *e)
{
	if (!e->prefetch_in_flight)
		return;
	e->prefetch_in_flight = false;
	c->prefetch_in_flight--;
	c->prefetch_bytes_in_flight -= e->ref.size;
}

/* Take an entry out of the table and its list and onto *dead, to be freed
 * once the lock is dropped. Lock held; no reader may hold it. */
static void entry_discard(wc_cache *c, entry *e, entry **dead)
{
	list_unlink(c, e);
	if (e->in_table)
		table_remove(c, e);
	c->bytes -= e->charge;
	e->charge = 0;
	prefetch_done(c, e);
	e->hnext = *dead;
	*dead = e;
}

/* The next entry to evict, or NULL. Prefetched entries no reader has used
 * yet sit at the cold end, in a FIFO of their own (c->cold): the oldest of
 * them goes first once there are more than cold_keep, so prefetches that no
 * reader came for do not push out tiles readers use. Up to cold_keep of them
 * are spared while the LRU of used tiles has victims: a tile prefetched for a
 * streaming reader must survive until that reader arrives, else, with the
 * cache full, each prefetch would evict the one before it. */
static entry *victim(wc_cache *c)
{
	if (c->consumed.tail) /* read through already: the page cache has it */
		return c->consumed.tail;
	if (c->cold.n > c->cold_keep || c->cold_bytes > c->cold_keep_bytes || !c->lru.tail)
		return c->cold.tail;
	return c->lru.tail;
}

/* Evict until `need` more bytes fit in the budget or nothing evictable is
 * left. Lock held. */
static void make_room(wc_cache *c, uint64_t need, entry **dead)
{
	entry *e;
	pool_shrink(c, c->bytes + need);
	while (c->bytes + need > budget_of(c) && (e = victim(c))) {
		entry_discard(c, e, dead);
		c->st.evictions++;
	}
}

/* ---- dispatch ------------------------------------------------------------ */

/* Charge a QUEUED entry, already off its queue, to the budget (room was
 * made for it), give it a pooled buffer if one fits, note whether a reader
 * waits for it, and mark it DECODING. Lock held. */
static void start_decode(wc_cache *c, entry *e, entry **dead)
{
	c->bytes += e->ref.size;
	e->charge = e->ref.size;
	if (!e->buf && e->ref.size >= MMAP_MIN_BYTES) {
		e->buf = pool_take(c, e->ref.size, &e->buf_cap, &e->buf_backend);
		/* A pooled buffer may be bigger than the tile, with pages of
		 * its earlier tile still resident: charge all of it. */
		if (e->buf) {
			c->bytes += e->buf_cap - e->ref.size;
			e->charge = e->buf_cap;
			make_room(c, 0, dead);
		}
	}
	e->waited = e->refs > 0;
	e->state = E_DECODING;
	c->ndecoding++;
}

/* Take up to max_batch queued entries, readers' first, charge them to the
 * budget and mark them DECODING. Lock held. Returns how many. */
static size_t take_batch(wc_cache *c, entry **batch, entry **dead)
{
	size_t nb = 0;
	uint64_t payload = 0;
	/* Share the queue among the dispatchers: one taking all of it would
	 * keep every queued tile waiting for its whole batch (on a GPU, 16
	 * tiles took 5-6 ms against 1-2 ms for 4) while the others idle. */
	size_t queued = c->demand.n + c->prefetch.n;
	size_t limit = (queued + c->ndispatch - 1) / c->ndispatch;
	if (limit > c->max_batch)
		limit = c->max_batch;
	while (nb < limit) {
		entry *e = c->demand.head ? c->demand.head : c->prefetch.head;
		if (!e || (nb && payload + e->csize > BATCH_PAYLOAD_MAX))
			break;
		list_unlink(c, e);
		make_room(c, e->ref.size, dead);
		if (c->bytes + e->ref.size > budget_of(c) && e->refs == 0) {
			/* A prefetch that would push out what readers hold: skip it. */
			entry_discard(c, e, dead);
			continue;
		}
		start_decode(c, e, dead);
		payload += e->csize;
		batch[nb++] = e;
	}
	return nb;
}

/* Record a failed decode, log it (once: this is its only report besides
 * the error every waiting reader gets), and free its buffer. No lock. */
static void entry_set_failed(wc_cache *c, entry *e, wc_err err, const char *reason)
{
	tile_free(c, e->buf, e->buf_cap, e->buf_backend);
	e->buf = NULL;
	e->buf_cap = 0;
	e->ref.data = NULL;
	e->err = err;
	e->reason = strdup(reason && *reason ? reason : wc_strerror(err));
	wc_log(WC_LOG_ERR, "tile %" PRIu32 " of source %" PRIu64 ": %s: %s", e->tile, e->id,
	       wc_strerror(err), e->reason ? e->reason : "");
}

/* Make d's payload buffer hold at least `need` bytes. It grows to twice its
 * capacity (up to BATCH_PAYLOAD_MAX) or to `need` if that is more: the
 * CUDA backend's page-locked buffers cost about 1.2 ms per MiB to allocate,
 * and growing by each batch's need made one dispatcher stall several times
 * at the start of four streams (docs/BENCHMARKS-GPU.md, section 13).
 * `ready`: made before the first read, so faulted in now (buf_alloc_ready). */
static bool payload_reserve(dispatcher *d, size_t need, bool ready)
{
	if (need <= d->payload_cap)
		return true;
	size_t cap = 2 * d->payload_cap < BATCH_PAYLOAD_MAX ? 2 * d->payload_cap : BATCH_PAYLOAD_MAX;
	if (cap < need)
		cap = need;
	cap = cap < (1u << 20) ? (1u << 20) : wc_backend_buf_size(cap);
	buf_free(d->cache, d->payload, d->payload_cap);
	d->payload = ready ? buf_alloc_ready(d->cache, cap) : buf_alloc(d->cache, cap);
	d->payload_cap = d->payload ? cap : 0;
	return d->payload != NULL;
}

/* Hand the buffers of tiles evicted to make room for this batch to the
 * batch's tiles of the same size: a streaming workload then decodes into
 * memory already mapped and faulted in, with no munmap (and its TLB
 * shootdown across every decoding thread) nor mmap and page faults per
 * tile, and the RSS is unchanged. No lock: both sides are private here. */
static void recycle_buffers(entry **batch, size_t nb, entry *dead)
{
	size_t i = 0;
	for (entry *v = dead; v && i < nb; v = v->hnext) {
		if (!v->buf)
			continue;
		for (size_t k = i; k < nb; k++) {
			entry *e = batch[k];
			if (!e->buf && buf_fits(v->buf_cap, e->ref.size)) {
				e->buf = v->buf;
				e->buf_cap = v->buf_cap;
				e->buf_backend = v->buf_backend;
				v->buf = NULL;
				v->buf_cap = 0;
				break;
			}
		}
		while (i < nb && batch[i]->buf)
			i++;
	}
}

/* The decode job of a DECODING entry whose payload is at `payload`: the
 * source describes the tile, the entry gives the buffers. */
static void entry_job(const entry *e, const uint8_t *payload, wc_tile_job *job)
{
	memset(job, 0, sizeof *job);
	e->src->ops->describe_job(e->src, e->tile, job);
	job->payload = payload;
	job->payload_size = e->csize;
	job->out = e->buf;
	job->out_size = e->ref.size;
	job->reader_waits = e->waited;
	job->status = WC_OK;
	job->detail[0] = '\0';
}

/* Read entry i's payload into its place in the batch buffer (a parallel
 * loop body: the entry and its slice of the buffer are this call's alone;
 * a failure is recorded on the entry, with the reading thread's reason). */
static void read_one(void *arg, size_t i)
{
	dispatcher *d = arg;
	entry *e = d->batch[i];
	if (e->err != WC_OK)
		return; /* no buffers */
	fault_in_fresh(e);
	wc_clear_detail();
	wc_err err = e->src->ops->read_payload(e->src, e->tile, d->payload + d->payload_off[i]);
	if (err != WC_OK)
		entry_set_failed(d->cache, e, err, wc_last_detail());
}

/* Read payloads, decode, and fill every entry's buffer, or set its err and
 * reason. No lock: nobody else touches a DECODING entry's buffer or error,
 * and its state changes only under the lock (publish_batch), since readers
 * read the state under the lock. The payloads are read by the dispatcher
 * and the cache's read threads together: one pread after another, the
 * reads of a batch of 1 MiB tiles took as long as its GPU round trip. */
static void decode_batch(dispatcher *d, entry **batch, size_t nb)
{
	wc_cache *c = d->cache;
	size_t total = 0;
	for (size_t i = 0; i < nb; i++)
		total += (batch[i]->csize + PAYLOAD_ALIGN - 1) & ~(size_t)(PAYLOAD_ALIGN - 1);
	bool have_payload = payload_reserve(d, total, false);
	size_t off = 0, nj = 0;
	uint64_t t0 = wc_mono_ns();
	for (size_t i = 0; i < nb; i++) {
		entry *e = batch[i];
		if (!entry_alloc_buf(c, e) || !have_payload) {
			entry_set_failed(c, e, WC_E_NOMEM, "no memory for the tile's buffers");
			continue;
		}
		e->ref.data = e->buf;
		d->payload_off[i] = off;
		off += (e->csize + PAYLOAD_ALIGN - 1) & ~(size_t)(PAYLOAD_ALIGN - 1);
	}
	if (c->readers && nb > 1)
		wc_threadpool_run(c->readers, read_one, d, nb);
	else
		for (size_t i = 0; i < nb; i++)
			read_one(d, i);
	for (size_t i = 0; i < nb; i++) {
		entry *e = batch[i];
		if (e->err != WC_OK) /* failed: no buffers, or the read */
			continue;
		entry_job(e, d->payload + d->payload_off[i], &d->jobs[nj]);
		d->job_entry[nj++] = (uint32_t)i;
	}
	uint64_t t1 = wc_mono_ns();
	d->read_ns = t1 - t0;
	d->decode_ns = 0;
	if (nj) {
		wc_err err = wc_backend_decode(c->backend, d->jobs, nj);
		d->decode_ns = wc_mono_ns() - t1;
		for (size_t j = 0; j < nj; j++) {
			wc_tile_job *job = &d->jobs[j];
			entry *e = batch[d->job_entry[j]];
			if (err != WC_OK)
				entry_set_failed(c, e, err, "decode backend could not start");
			else if (job->status != WC_OK)
				entry_set_failed(c, e, job->status, job->detail);
		}
	}
	if (d->payload_cap > PAYLOAD_KEEP_BYTES) {
		buf_free(c, d->payload, d->payload_cap);
		d->payload = NULL;
		d->payload_cap = 0;
	}
}

/* Make a DECODING entry READY or FAILED (its err set) and file it; its
 * source has been taken off it. The caller wakes the readers. Lock held. */
static void publish_entry(wc_cache *c, entry *e, entry **dead)
{
	prefetch_done(c, e);
	c->ndecoding--;
	e->state = e->err == WC_OK ? E_READY : E_FAILED;
	if (e->state == E_READY) {
		c->st.decodes++;
		if (e->refs == 0 && e->dropped) /* nobody will ask for it */
			entry_discard(c, e, dead);
		else if (e->refs == 0) /* prefetched, no reader yet: cold end */
			list_push_head(c, e, ON_COLD);
		return;
	}
	/* Failed: out of the table now, so the next get retries; the readers
	 * waiting for it take the error and free it. */
	c->st.decode_errors++;
	table_remove(c, e);
	c->bytes -= e->charge;
	e->charge = 0;
	if (e->refs == 0) {
		e->hnext = *dead;
		*dead = e;
	}
}

/* Make a decoded batch visible and wake its readers. Lock held. The sources
 * the batch retained go to d->srcs, to be released without the lock. */
static void publish_batch(wc_cache *c, dispatcher *d, entry **batch, size_t nb, entry **dead)
{
	for (size_t i = 0; i < nb; i++) {
		d->srcs[i] = batch[i]->src;
		batch[i]->src = NULL;
		c->st.batch_tiles++;
		publish_entry(c, batch[i], dead);
	}
	c->st.batches++;
	if (d->read_ns + d->decode_ns > SLOW_NS)
		wc_log(WC_LOG_DEBUG, "cache: at %.3f ms a batch of %zu tiles took %.3f ms (reads %.3f, decode %.3f)",
		       1e-6 * (double)(wc_mono_ns() - c->t_created), nb,
		       1e-6 * (double)(d->read_ns + d->decode_ns), 1e-6 * (double)d->read_ns,
		       1e-6 * (double)d->decode_ns);
	c->st.read_ns += d->read_ns;
	c->st.decode_ns += d->decode_ns;
	pthread_cond_broadcast(&c->done);
}

/* Fill the free-buffer pool with buffers of prefill_bytes up to its limit
 * (wc_cache_opts.prefill_tile_bytes), one allocation at a time without the
 * lock, so readers and dispatchers go on meanwhile; stops early when the
 * cache stops or the pool has no room left (the budget's room shrinks as
 * tiles are decoded). Ordinary buffers are faulted in here: a fresh
 * daemon's first read otherwise took some 10,000 page faults in the plane
 * merge, writing tiles into buffers never touched before
 * (docs/BENCHMARKS.md, nineteenth session). */
static void *pool_prefill_main(void *arg)
{
	wc_cache *c = arg;
	const size_t cap = c->prefill_bytes;
	const bool backend = wc_backend_buf_is_backend_memory(c->backend);
	pthread_mutex_lock(&c->lock);
	while (!c->stop && c->pool_bytes + cap <= pool_max(c) && c->bytes + pool_max(c) <= budget_of(c)) {
		pthread_mutex_unlock(&c->lock);
		uint8_t *buf = buf_alloc_ready(c, cap);
		pthread_mutex_lock(&c->lock);
		if (!buf)
			break;
		size_t bcap = cap;
		bool kind = backend;
		pool_put(c, &buf, &bcap, &kind);
		if (buf) { /* no room after all */
			pthread_mutex_unlock(&c->lock);
			tile_free(c, buf, bcap, kind);
			pthread_mutex_lock(&c->lock);
			break;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

static void *dispatch_main(void *arg)
{
	dispatcher *d = arg;
	wc_cache *c = d->cache;
	/* A payload buffer before the first read, big enough for the batches
	 * of several streams: allocating page-locked memory on the read path
	 * stalls this dispatcher's batch, and ordinary memory would fault its
	 * pages in there (payload_reserve). */
	if (c->payload_prealloc)
		payload_reserve(d, c->payload_prealloc, true);
	pthread_mutex_lock(&c->lock);
	for (;;) {
		while (!c->demand.head && !c->prefetch.head && !c->stop)
			pthread_cond_wait(&c->work, &c->lock);
		if (!c->demand.head && !c->prefetch.head)
			break; /* stopping, queue drained */
		entry *dead = NULL;
		size_t nb = take_batch(c, d->batch, &dead);
		pthread_mutex_unlock(&c->lock);
		recycle_buffers(d->batch, nb, dead);
		free_chain(c, dead);
		if (nb)
			decode_batch(d, d->batch, nb);
		pthread_mutex_lock(&c->lock);
		dead = NULL;
		if (nb)
			publish_batch(c, d, d->batch, nb, &dead);
		pthread_mutex_unlock(&c->lock);
		free_chain(c, dead);
		for (size_t i = 0; i < nb; i++)
			d->srcs[i]->ops->release(d->srcs[i]);
		pthread_mutex_lock(&c->lock);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

/* ---- public -------------------------------------------------------------- */

static void dispatchers_free(wc_cache *c)
{
	for (unsigned i = 0; i < c->ndispatch; i++) {
		dispatcher *d = &c->dispatchers[i];
		free(d->batch);
		free(d->jobs);
		free(d->job_entry);
		free(d->srcs);
		free(d->payload_off);
		buf_free(c, d->payload, d->payload_cap);
	}
	free(c->dispatchers);
}

static void cache_free(wc_cache *c)
{
	entry *dead = NULL;
	for (size_t i = 0; c->buckets && i < c->nbuckets; i++) {
		while (c->buckets[i])
			entry_discard(c, c->buckets[i], &dead);
	}
	free_chain(c, dead);
	pool_shrink(c, UINT64_MAX);
	dispatchers_free(c);
	wc_threadpool_destroy(c->readers);
	free(c->buckets);
	pthread_cond_destroy(&c->done);
	pthread_cond_destroy(&c->work);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

wc_err wc_cache_create(const wc_cache_opts *opts, wc_cache **out)
{
	*out = NULL;
	if (!opts || !opts->backend)
		return wc_fail(WC_E_INVAL, "tile cache needs a decode backend");
	wc_backend *be = opts->backend;
	wc_cache *c = calloc(1, sizeof *c);
	if (!c)
		return wc_fail(WC_E_NOMEM, "tile cache");
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->work, NULL);
	pthread_cond_init(&c->done, NULL);
	c->budget = opts->budget_bytes ? opts->budget_bytes : DEFAULT_BUDGET;
	c->max_prefetch = opts->max_prefetch ? opts->max_prefetch : DEFAULT_MAX_PREFETCH;
	c->max_prefetch_bytes = opts->max_prefetch_bytes ? opts->max_prefetch_bytes : UINT64_MAX;
	/* Room for several readers' readahead windows of max_prefetch tiles. */
	c->cold_keep = 4 * (size_t)c->max_prefetch;
	c->cold_keep_bytes = opts->max_prefetch_bytes ? 4 * opts->max_prefetch_bytes : UINT64_MAX;
	c->backend = be;
	c->t_created = wc_mono_ns();
	c->caller_decodes = opts->decode_misses_on_caller;
	c->max_batch = be->max_batch < 1 ? 1 : be->max_batch > 4096 ? 4096 : be->max_batch;
	unsigned nd = be->concurrency < 1 ? 1 : be->concurrency > 64 ? 64 : be->concurrency;
	c->nbuckets = 1024;
	c->buckets = calloc(c->nbuckets, sizeof *c->buckets);
	c->dispatchers = calloc(nd, sizeof *c->dispatchers);
	if (!c->buckets || !c->dispatchers) {
		cache_free(c);
		return wc_fail(WC_E_NOMEM, "tile cache");
	}
	c->ndispatch = nd;
	/* the compressed payloads of a few prefill-sized tiles, allocated (and
	 * for ordinary memory faulted in) by each dispatcher before its first
	 * batch */
	const bool prefill_pool = opts->prefill_tile_bytes >= MMAP_MIN_BYTES;
	if (prefill_pool)
		c->payload_prealloc = wc_backend_buf_size(4 * (size_t)opts->prefill_tile_bytes);
	for (unsigned i = 0; i < nd; i++) {
		dispatcher *d = &c->dispatchers[i];
		d->cache = c;
		d->batch = calloc(c->max_batch, sizeof *d->batch);
		d->jobs = calloc(c->max_batch, sizeof *d->jobs);
		d->job_entry = calloc(c->max_batch, sizeof *d->job_entry);
		d->srcs = calloc(c->max_batch, sizeof *d->srcs);
		d->payload_off = calloc(c->max_batch, sizeof *d->payload_off);
		if (!d->batch || !d->jobs || !d->job_entry || !d->srcs || !d->payload_off) {
			cache_free(c);
			return wc_fail(WC_E_NOMEM, "tile cache dispatcher");
		}
	}
	if (opts->read_threads) {
		wc_err e = wc_threadpool_create(opts->read_threads > 64 ? 64 : opts->read_threads, &c->readers);
		if (e != WC_OK) {
			cache_free(c);
			return e;
		}
	}
	for (unsigned i = 0; i < nd; i++) {
		int rc = pthread_create(&c->dispatchers[i].thread, NULL, dispatch_main,
					&c->dispatchers[i]);
		if (rc != 0) {
			pthread_mutex_lock(&c->lock);
			c->stop = true;
			pthread_cond_broadcast(&c->work);
			pthread_mutex_unlock(&c->lock);
			for (unsigned j = 0; j < i; j++)
				pthread_join(c->dispatchers[j].thread, NULL);
			cache_free(c);
			return wc_fail(WC_E_IO, "starting tile dispatch thread: %s", strerror(rc));
		}
	}
	if (prefill_pool) {
		c->prefill_bytes = (uint32_t)wc_backend_buf_size(opts->prefill_tile_bytes);
		/* no prefill if the thread cannot start: buffers come as needed */
		c->prefilling = pthread_create(&c->prefill, NULL, pool_prefill_main, c) == 0;
	}
	*out = c;
	return WC_OK;
}

void wc_cache_destroy(wc_cache *c)
{
	if (!c)
		return;
	entry *dead = NULL;
	pthread_mutex_lock(&c->lock);
	c->stop = true;
	/* Nobody waits for queued prefetches: drop them rather than decode. */
	while (c->prefetch.head && c->prefetch.head->refs == 0)
		entry_discard(c, c->prefetch.head, &dead);
	pthread_cond_broadcast(&c->work);
	pthread_mutex_unlock(&c->lock);
	free_chain(c, dead);
	for (unsigned i = 0; i < c->ndispatch; i++)
		pthread_join(c->dispatchers[i].thread, NULL);
	if (c->prefilling)
		pthread_join(c->prefill, NULL);
	cache_free(c);
}

/* A new QUEUED entry for (src, tile), in the table and on queue `which`
 * (the prefetch queue in order of `due`, the demand queue at its tail).
 * Lock held. NULL if out of memory. */
static entry *entry_new(wc_cache *c, wc_tile_source *src, uint32_t tile, int which, uint64_t due)
{
	entry *e = calloc(1, sizeof *e);
	if (!e)
		return NULL;
	e->id = src->id;
	e->tile = tile;
	e->ref.size = src->ops->tile_dsize(src, tile);
	e->csize = src->ops->tile_csize(src, tile);
	e->state = E_QUEUED;
	e->src = src;
	src->ops->retain(src);
	table_insert(c, e);
	e->due = due;
	if (which == ON_PREFETCH)
		list_insert_by_due(c, e, which);
	else
		list_push_tail(c, e, which);
	pthread_cond_signal(&c->work);
	return e;
}

/* Decode a DECODING entry on the CPU, the calling thread and the idle
 * threads of the shared CPU backend together (wc_decode_jobs_cpu), or set
 * its err and reason. No lock, as in decode_batch: nobody else touches a
 * DECODING entry's buffer or error. */
static void decode_on_caller(wc_cache *c, entry *e)
{
	uint8_t *payload = malloc(e->csize ? e->csize : 1);
	if (!entry_alloc_buf(c, e) || !payload) {
		free(payload);
		entry_set_failed(c, e, WC_E_NOMEM, "no memory for the tile's buffers");
		return;
	}
	e->ref.data = e->buf;
	fault_in_fresh(e);
	wc_clear_detail();
	wc_err err = e->src->ops->read_payload(e->src, e->tile, payload);
	if (err != WC_OK) {
		entry_set_failed(c, e, err, wc_last_detail());
		free(payload);
		return;
	}
	wc_tile_job job;
	entry_job(e, payload, &job);
	wc_decode_jobs_cpu(&job, 1);
	if (job.status != WC_OK)
		entry_set_failed(c, e, job.status, job.detail);
	free(payload);
}

wc_err wc_cache_get(wc_cache *c, wc_tile_source *src, uint32_t tile, wc_tile_ref **out)
{
	*out = NULL;
	uint32_t n = src->ops->ntiles(src);
	if (tile >= n)
		return wc_fail(WC_E_RANGE, "tile %" PRIu32 " of source %" PRIu64 " (it has %" PRIu32 ")",
			       tile, src->id, n);
	pthread_mutex_lock(&c->lock);
	entry *e = table_find(c, src->id, tile);
	if (e && e->state == E_READY) {
		c->st.hits++;
		if (e->refs++ == 0)
			list_unlink(c, e);
		pthread_mutex_unlock(&c->lock);
		*out = &e->ref;
		return WC_OK;
	}
	c->st.misses++;
	/* what the reader found, for the debug trace of slow waits */
	const char *found = !e ? "nothing" : e->list == ON_PREFETCH ? "a queued prefetch"
			    : e->list == ON_DEMAND ? "a queued demand" : "a tile decoding";
	const size_t q_demand = c->demand.n, q_prefetch = c->prefetch.n;
	const uint32_t n_decoding = c->ndecoding;
	if (!e) {
		e = entry_new(c, src, tile, ON_DEMAND, 0);
		if (!e) {
			pthread_mutex_unlock(&c->lock);
			return wc_fail(WC_E_NOMEM, "tile cache entry");
		}
	} else if (e->list == ON_PREFETCH) { /* a reader waits for it now */
		list_unlink(c, e);
		list_push_tail(c, e, ON_DEMAND);
	}
	e->refs++;
	const uint64_t t0 = wc_mono_ns();
	if (c->caller_decodes && e->state == E_QUEUED) {
		/* No dispatcher has taken it: decode it here rather than wait
		 * behind other streams' prefetches and a GPU round trip. */
		entry *dead = NULL;
		list_unlink(c, e);
		make_room(c, e->ref.size, &dead);
		start_decode(c, e, &dead);
		pthread_mutex_unlock(&c->lock);
		/* as a dispatcher does: the tile evicted for this one lends it
		 * its buffer, mapped and faulted in already */
		recycle_buffers(&e, 1, dead);
		free_chain(c, dead);
		decode_on_caller(c, e);
		pthread_mutex_lock(&c->lock);
		wc_tile_source *done_src = e->src; /* released without the lock */
		e->src = NULL;
		c->st.caller_decodes++;
		dead = NULL;
		publish_entry(c, e, &dead); /* refs > 0: e is not among the dead */
		pthread_cond_broadcast(&c->done);
		pthread_mutex_unlock(&c->lock);
		free_chain(c, dead);
		done_src->ops->release(done_src);
		pthread_mutex_lock(&c->lock);
	}
	while (e->state == E_QUEUED || e->state == E_DECODING)
		pthread_cond_wait(&c->done, &c->lock);
	const uint64_t waited = wc_mono_ns() - t0;
	c->st.wait_ns += waited;
	if (waited > SLOW_NS)
		wc_log(WC_LOG_DEBUG, "cache: at %.3f ms tile %" PRIu32 " of source %" PRIu64 " waited %.3f ms; "
		       "the reader found %s, with %zu demands and %zu prefetches queued and %" PRIu32 " tiles decoding",
		       1e-6 * (double)(t0 - c->t_created), tile, src->id, 1e-6 * (double)waited, found,
		       q_demand, q_prefetch, n_decoding);
	if (e->state == E_READY) {
		pthread_mutex_unlock(&c->lock);
		*out = &e->ref;
		return WC_OK;
	}
	wc_err err = e->err;
	char reason[512];
	snprintf(reason, sizeof reason, "%s", e->reason ? e->reason : wc_strerror(err));
	bool last = --e->refs == 0;
	pthread_mutex_unlock(&c->lock);
	if (last)
		entry_free(c, e);
	return wc_fail(err, "tile %" PRIu32 " of source %" PRIu64 ": %s", tile, src->id, reason);
}

/* Drop a reader's reference; the last one files the entry: on the consumed
 * FIFO if any reader released it as consumed (requests of one stream run on
 * several FUSE threads, so the one that read the tile's end may not be the
 * last to let go of it), else at the LRU's hot end. Lock held. */
static void release_locked(wc_cache *c, entry *e, bool consumed, entry **dead)
{
	if (consumed)
		e->consumed = true;
	if (--e->refs != 0)
		return;
	if (!e->in_table) {
		e->hnext = *dead;
		*dead = e;
		return;
	}
	if (!e->consumed) {
		list_push_head(c, e, ON_LRU);
		make_room(c, 0, dead); /* over budget while readers held more */
		return;
	}
	list_push_head(c, e, ON_CONSUMED);
	c->consumed_bytes += e->ref.size;
	/* Past the reordering window: drop the oldest, its buffer to the pool
	 * for the stream's next tiles. */
	const uint64_t keep = wc_backend_buf_is_backend_memory(c->backend) ? CONSUMED_KEEP_BACKEND_BYTES
									  : CONSUMED_KEEP_BYTES;
	while (c->consumed_bytes > keep && c->consumed.n > 1) {
		entry *v = c->consumed.tail;
		entry_discard(c, v, dead);
		if (v->buf)
			pool_put(c, &v->buf, &v->buf_cap, &v->buf_backend);
	}
	make_room(c, 0, dead);
}

static void release_ref(wc_cache *c, wc_tile_ref *ref, bool consumed)
{
	if (!ref)
		return;
	entry *dead = NULL;
	pthread_mutex_lock(&c->lock);
	release_locked(c, (entry *)ref, consumed, &dead);
	pthread_mutex_unlock(&c->lock);
	free_chain(c, dead);
}

void wc_cache_release(wc_cache *c, wc_tile_ref *ref) { release_ref(c, ref, false); }

void wc_cache_release_consumed(wc_cache *c, wc_tile_ref *ref) { release_ref(c, ref, true); }

void wc_cache_prefetch(wc_cache *c, wc_tile_source *src, uint32_t first, uint32_t count)
{
	uint32_t n = src->ops->ntiles(src);
	if (first >= n)
		return;
	if (count > n - first)
		count = n - first;
	const uint64_t now = wc_mono_ns();
	pthread_mutex_lock(&c->lock);
	for (uint32_t t = first; t < first + count; t++) {
		if (c->stop || c->prefetch_in_flight >= c->max_prefetch ||
		    c->prefetch_bytes_in_flight >= c->max_prefetch_bytes)
			break;
		if (table_find(c, src->id, t))
			continue;
		/* Queued by when the stream will want it, so that several
		 * streams' near tiles go before any stream's far ones (four
		 * readers starting at once queue 16 tiles each). */
		entry *e = entry_new(c, src, t, ON_PREFETCH, now + (uint64_t)(t - first) * PREFETCH_STEP_NS);
		if (!e)
			break;
		e->prefetch_in_flight = true;
		c->prefetch_in_flight++;
		c->prefetch_bytes_in_flight += e->ref.size;
		c->st.prefetches++;
	}
	pthread_mutex_unlock(&c->lock);
}

void wc_cache_drop_source(wc_cache *c, uint64_t id)
{
	entry *dead = NULL;
	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < c->nbuckets; i++) {
		for (entry *e = c->buckets[i], *next; e; e = next) {
			next = e->hnext;
			if (e->id != id)
				continue;
			if (e->state == E_DECODING) {
				e->dropped = true; /* discarded once decoded, if unreferenced */
				continue;
			}
			if (e->refs != 0)
				continue;
			if (e->list == ON_LRU || e->list == ON_COLD || e->list == ON_PREFETCH ||
			    e->list == ON_CONSUMED)
				entry_discard(c, e, &dead);
		}
	}
	pthread_mutex_unlock(&c->lock);
	free_chain(c, dead);
}

void wc_cache_charge(wc_cache *c, int64_t bytes)
{
	entry *dead = NULL;
	pthread_mutex_lock(&c->lock);
	if (bytes < 0 && (uint64_t)-bytes > c->external)
		c->external = 0;
	else
		c->external += (uint64_t)bytes;
	if (bytes > 0)
		make_room(c, 0, &dead);
	pthread_mutex_unlock(&c->lock);
	free_chain(c, dead);
}

void wc_cache_get_stats(wc_cache *c, wc_cache_stats *out)
{
	pthread_mutex_lock(&c->lock);
	*out = c->st;
	out->bytes_cached = c->bytes;
	out->buf_allocs = atomic_load(&c->buf_allocs);
	out->buf_frees = atomic_load(&c->buf_frees);
	out->buf_ns = atomic_load(&c->buf_ns);
	pthread_mutex_unlock(&c->lock);
}
