/* cache_get.c - the tile cache's readers: a get that finds, queues or
 * decodes its tile and waits for it (within the budget, cache_impl.h's
 * wc_tc_room), the release that files a tile on the LRU, and prefetch
 * requests (cache.h). */
#include "engine/cache_impl.h"

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
	wc_tc_table_insert(c, e);
	e->due = due;
	if (which == ON_PREFETCH)
		wc_tc_list_insert_by_due(c, e, which);
	else
		wc_tc_list_push_tail(c, e, which);
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
	if (!wc_tc_entry_alloc_buf(c, e) || !payload) {
		free(payload);
		wc_tc_entry_set_failed(c, e, WC_E_NOMEM, "no memory for the tile's buffers");
		return;
	}
	e->ref.data = e->buf;
	wc_tc_fault_in_fresh(e);
	wc_clear_detail();
	wc_err err = e->src->ops->read_payload(e->src, e->tile, payload);
	if (err != WC_OK) {
		wc_tc_entry_set_failed(c, e, err, wc_last_detail());
		free(payload);
		return;
	}
	wc_tile_job job;
	wc_tc_entry_job(e, payload, &job);
	wc_decode_jobs_cpu(&job, 1);
	if (job.status != WC_OK)
		wc_tc_entry_set_failed(c, e, job.status, job.detail);
	free(payload);
}

static wc_err get_tile(wc_cache *c, wc_tile_source *src, uint32_t tile, bool bounded, uint64_t held,
		       wc_tile_ref **out);

wc_err wc_cache_get(wc_cache *c, wc_tile_source *src, uint32_t tile, wc_tile_ref **out)
{
	return get_tile(c, src, tile, false, 0, out);
}

wc_err wc_cache_get_holding(wc_cache *c, wc_tile_source *src, uint32_t tile, uint64_t held, wc_tile_ref **out)
{
	return get_tile(c, src, tile, true, held, out);
}

static wc_err get_tile(wc_cache *c, wc_tile_source *src, uint32_t tile, bool bounded, uint64_t held,
		       wc_tile_ref **out)
{
	*out = NULL;
	uint32_t n = src->ops->ntiles(src);
	if (tile >= n)
		return wc_fail(WC_E_RANGE, "tile %" PRIu32 " of source %" PRIu64 " (it has %" PRIu32 ")",
			       tile, src->id, n);
	pthread_mutex_lock(&c->lock);
	entry *e = wc_tc_table_find(c, src->id, tile);
	if (e && e->state == E_READY) {
		c->st.hits++;
		if (e->refs++ == 0)
			wc_tc_list_unlink(c, e);
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
		wc_tc_list_unlink(c, e);
		wc_tc_list_push_tail(c, e, ON_DEMAND);
	}
	e->refs++;
	if (!bounded && !e->unbounded) {
		/* A caller that may hold other tiles while it waits: waiting for
		 * room could wait for itself. */
		e->unbounded = true;
		wc_tc_room_freed(c);
	}
	const uint64_t t0 = wc_mono_ns();
	entry *dead = NULL;
	if (c->caller_decodes && e->state == E_QUEUED) {
		wc_tc_list_unlink(c, e);
		wc_tc_make_room(c, e->ref.size, &dead);
	}
	if (c->caller_decodes && e->state == E_QUEUED && !wc_tc_room(c, e, dead)) {
		/* Over budget: it waits for room like any demand. */
		wc_tc_list_push_head(c, e, ON_DEMAND);
		c->room_wait = true;
		pthread_mutex_unlock(&c->lock);
		wc_tc_free_chain(c, dead);
		pthread_mutex_lock(&c->lock);
	} else if (c->caller_decodes && e->state == E_QUEUED) {
		/* No dispatcher has taken it: decode it here rather than wait
		 * behind other streams' prefetches and a GPU round trip. */
		wc_tc_start_decode(c, e, &dead);
		pthread_mutex_unlock(&c->lock);
		/* as a dispatcher does: the tile evicted for this one lends it
		 * its buffer, mapped and faulted in already */
		wc_tc_recycle_buffers(&e, 1, dead);
		wc_tc_free_chain(c, dead);
		decode_on_caller(c, e);
		pthread_mutex_lock(&c->lock);
		wc_tile_source *done_src = e->src; /* released without the lock */
		e->src = NULL;
		c->st.caller_decodes++;
		dead = NULL;
		wc_tc_publish_entry(c, e, &dead); /* refs > 0: e is not among the dead */
		pthread_cond_broadcast(&c->done);
		pthread_mutex_unlock(&c->lock);
		wc_tc_free_chain(c, dead);
		done_src->ops->release(done_src);
		pthread_mutex_lock(&c->lock);
	}
	c->waiting_held += held;
	if (held)
		wc_tc_room_freed(c); /* what this reader holds no longer blocks a decode */
	while (e->state == E_QUEUED || e->state == E_DECODING)
		pthread_cond_wait(&c->done, &c->lock);
	c->waiting_held -= held;
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
		wc_tc_entry_free(c, e);
	char name[PATH_MAX + 128];
	wc_tile_source_name(src, src->id, tile, name, sizeof name);
	return wc_fail(err, "%s: %s", name, reason);
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
		wc_tc_list_push_head(c, e, ON_LRU);
		wc_tc_make_room(c, 0, dead); /* over budget while readers held more */
		return;
	}
	wc_tc_list_push_head(c, e, ON_CONSUMED);
	c->consumed_bytes += e->ref.size;
	/* Past the reordering window: drop the oldest, its buffer to the pool
	 * for the stream's next tiles. */
	const uint64_t keep = wc_backend_buf_is_backend_memory(c->backend) ? CONSUMED_KEEP_BACKEND_BYTES
									  : CONSUMED_KEEP_BYTES;
	while (c->consumed_bytes > keep && c->consumed.n > 1) {
		entry *v = c->consumed.tail;
		wc_tc_entry_discard(c, v, dead);
		if (v->buf)
			wc_tc_pool_put(c, &v->buf, &v->buf_cap, &v->buf_backend);
	}
	wc_tc_make_room(c, 0, dead);
}

static void release_ref(wc_cache *c, wc_tile_ref *ref, bool consumed)
{
	if (!ref)
		return;
	entry *dead = NULL;
	pthread_mutex_lock(&c->lock);
	release_locked(c, (entry *)ref, consumed, &dead);
	pthread_mutex_unlock(&c->lock);
	wc_tc_free_chain(c, dead);
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
		if (wc_tc_table_find(c, src->id, t))
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
