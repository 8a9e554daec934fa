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
#include "engine/cache_impl.h"

/* ---- lists --------------------------------------------------------------- */

/* The bytes tiles may take: the budget less what is charged from outside. */
uint64_t wc_tc_budget_of(const wc_cache *c)
{
	return c->budget > c->external ? c->budget - c->external : 0;
}

bool wc_tc_room(const wc_cache *c, const entry *e, const entry *dead)
{
	if (e->unbounded)
		return true;
	uint64_t held = c->waiting_held < c->bytes ? c->waiting_held : c->bytes;
	uint64_t dying = c->dying_bytes;
	for (const entry *d = dead; d; d = d->hnext)
		dying -= d->dying < dying ? d->dying : dying;
	uint64_t charged = c->bytes - held + dying;
	return charged == 0 || charged + e->ref.size <= wc_tc_budget_of(c);
}

/* Wake dispatchers waiting for room (lock held). */
void wc_tc_room_freed(wc_cache *c)
{
	if (c->room_wait) {
		c->room_wait = false;
		pthread_cond_broadcast(&c->work);
	}
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

void wc_tc_list_unlink(wc_cache *c, entry *e)
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

void wc_tc_list_push_tail(wc_cache *c, entry *e, int which)
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
void wc_tc_list_insert_by_due(wc_cache *c, entry *e, int which)
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

void wc_tc_list_push_head(wc_cache *c, entry *e, int which)
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

entry *wc_tc_table_find(const wc_cache *c, uint64_t id, uint32_t tile)
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

void wc_tc_table_insert(wc_cache *c, entry *e)
{
	if (c->count >= c->nbuckets)
		table_grow(c);
	size_t k = bucket_of(c, e->id, e->tile);
	e->hnext = c->buckets[k];
	c->buckets[k] = e;
	e->in_table = true;
	c->count++;
}

void wc_tc_table_remove(wc_cache *c, entry *e)
{
	entry **pp = &c->buckets[bucket_of(c, e->id, e->tile)];
	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
	e->hnext = NULL;
	e->in_table = false;
	c->count--;
}

/* Free an entry already out of the table and off every list, without the
 * lock (it may munmap and release a source). */
void wc_tc_entry_free(wc_cache *c, entry *e)
{
	if (e->src)
		e->src->ops->release(e->src);
	wc_tc_tile_free(c, e->buf, e->buf_cap, e->buf_backend);
	free(e->reason);
	free(e);
}

void wc_tc_free_chain(wc_cache *c, entry *e)
{
	uint64_t freed = 0;
	for (entry *next; e; e = next) {
		next = e->hnext;
		freed += e->dying;
		wc_tc_entry_free(c, e);
	}
	if (freed) { /* their memory is gone (or lent to a new tile, charged already) */
		pthread_mutex_lock(&c->lock);
		c->dying_bytes -= freed;
		wc_tc_room_freed(c);
		pthread_mutex_unlock(&c->lock);
	}
}

/* A prefetched entry's decode is over (or it is gone): it no longer counts
 * against the prefetch limits. Lock held. */
void wc_tc_prefetch_done(wc_cache *c, entry *e)
{
	if (!e->prefetch_in_flight)
		return;
	e->prefetch_in_flight = false;
	c->prefetch_in_flight--;
	c->prefetch_bytes_in_flight -= e->ref.size;
}

/* Take an entry out of the table and its list and onto *dead, to be freed
 * once the lock is dropped. Lock held; no reader may hold it. */
void wc_tc_entry_discard(wc_cache *c, entry *e, entry **dead)
{
	wc_tc_list_unlink(c, e);
	if (e->in_table)
		wc_tc_table_remove(c, e);
	c->bytes -= e->charge;
	c->dying_bytes += e->charge; /* until its buffer is freed: free_chain */
	e->dying = e->charge;
	e->charge = 0;
	wc_tc_prefetch_done(c, e);
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
void wc_tc_make_room(wc_cache *c, uint64_t need, entry **dead)
{
	entry *e;
	wc_tc_pool_shrink(c, c->bytes + need);
	while (c->bytes + need > wc_tc_budget_of(c) && (e = victim(c))) {
		wc_tc_entry_discard(c, e, dead);
		c->st.evictions++;
	}
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
		wc_tc_buf_free(c, d->payload, d->payload_cap);
	}
	free(c->dispatchers);
}

static void cache_free(wc_cache *c)
{
	entry *dead = NULL;
	for (size_t i = 0; c->buckets && i < c->nbuckets; i++) {
		while (c->buckets[i])
			wc_tc_entry_discard(c, c->buckets[i], &dead);
	}
	wc_tc_free_chain(c, dead);
	wc_tc_pool_shrink(c, UINT64_MAX);
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
		int rc = pthread_create(&c->dispatchers[i].thread, NULL, wc_tc_dispatch_main,
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
		c->prefilling = pthread_create(&c->prefill, NULL, wc_tc_pool_prefill_main, c) == 0;
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
		wc_tc_entry_discard(c, c->prefetch.head, &dead);
	pthread_cond_broadcast(&c->work);
	pthread_mutex_unlock(&c->lock);
	wc_tc_free_chain(c, dead);
	for (unsigned i = 0; i < c->ndispatch; i++)
		pthread_join(c->dispatchers[i].thread, NULL);
	if (c->prefilling)
		pthread_join(c->prefill, NULL);
	cache_free(c);
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
				wc_tc_entry_discard(c, e, &dead);
		}
	}
	pthread_mutex_unlock(&c->lock);
	wc_tc_free_chain(c, dead);
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
		wc_tc_make_room(c, 0, &dead);
	pthread_mutex_unlock(&c->lock);
	wc_tc_free_chain(c, dead);
}

uint64_t wc_cache_room(wc_cache *c)
{
	pthread_mutex_lock(&c->lock);
	uint64_t r = wc_tc_budget_of(c);
	pthread_mutex_unlock(&c->lock);
	return r;
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
