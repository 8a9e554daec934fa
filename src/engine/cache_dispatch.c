/* cache_dispatch.c - the tile cache's batches, decodes and dispatcher threads (cache_impl.h). */
#include "engine/cache_impl.h"

/* ---- dispatch ------------------------------------------------------------ */

/* Charge a QUEUED entry, already off its queue, to the budget (room was
 * made for it), give it a pooled buffer if one fits, note whether a reader
 * waits for it, and mark it DECODING. Lock held. */
void wc_tc_start_decode(wc_cache *c, entry *e, entry **dead)
{
	c->bytes += e->ref.size;
	e->charge = e->ref.size;
	if (!e->buf && e->ref.size >= MMAP_MIN_BYTES) {
		e->buf = wc_tc_pool_take(c, e->ref.size, &e->buf_cap, &e->buf_backend);
		/* A pooled buffer may be bigger than the tile, with pages of
		 * its earlier tile still resident: charge all of it. */
		if (e->buf) {
			c->bytes += e->buf_cap - e->ref.size;
			e->charge = e->buf_cap;
			wc_tc_make_room(c, 0, dead);
		}
	}
	e->waited = e->refs > 0;
	e->state = E_DECODING;
	c->ndecoding++;
}

/* Take up to max_batch queued entries, readers' first, charge them to the
 * budget and mark them DECODING. Lock held. Returns how many. */
static size_t take_batch(wc_cache *c, entry **batch, entry **dead, bool *blocked)
{
	*blocked = false;
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
		wc_tc_list_unlink(c, e);
		wc_tc_make_room(c, e->ref.size, dead);
		if (c->bytes + e->ref.size > wc_tc_budget_of(c) && e->refs == 0) {
			/* A prefetch that would push out what readers hold: skip it. */
			wc_tc_entry_discard(c, e, dead);
			continue;
		}
		if (!wc_tc_room(c, e, *dead)) {
			/* A reader's miss over budget: it waits at the queue's
			 * head until bytes are freed (room_freed). */
			wc_tc_list_push_head(c, e, ON_DEMAND);
			c->room_wait = true;
			*blocked = true;
			break;
		}
		wc_tc_start_decode(c, e, dead);
		payload += e->csize;
		batch[nb++] = e;
	}
	return nb;
}

/* Record a failed decode, log it (once: this is its only report besides
 * the error every waiting reader gets), and free its buffer. No lock. */
void wc_tc_entry_set_failed(wc_cache *c, entry *e, wc_err err, const char *reason)
{
	wc_tc_tile_free(c, e->buf, e->buf_cap, e->buf_backend);
	e->buf = NULL;
	e->buf_cap = 0;
	e->ref.data = NULL;
	e->err = err;
	e->reason = strdup(reason && *reason ? reason : wc_strerror(err));
	char name[PATH_MAX + 128];
	wc_tile_source_name(e->src, e->id, e->tile, name, sizeof name);
	wc_log(WC_LOG_ERR, "%s: %s: %s", name, wc_strerror(err), e->reason ? e->reason : "");
}

/* Make d's payload buffer hold at least `need` bytes. It grows to twice its
 * capacity (up to BATCH_PAYLOAD_MAX) or to `need` if that is more: the
 * CUDA backend's page-locked buffers cost about 1.2 ms per MiB to allocate,
 * and growing by each batch's need made one dispatcher stall several times
 * at the start of four streams (docs/BENCHMARKS.md, "GPU backend through the mount").
 * `ready`: made before the first read, so faulted in now (buf_alloc_ready). */
static bool payload_reserve(dispatcher *d, size_t need, bool ready)
{
	if (need <= d->payload_cap)
		return true;
	size_t cap = 2 * d->payload_cap < BATCH_PAYLOAD_MAX ? 2 * d->payload_cap : BATCH_PAYLOAD_MAX;
	if (cap < need)
		cap = need;
	cap = cap < (1u << 20) ? (1u << 20) : wc_backend_buf_size(cap);
	wc_tc_buf_free(d->cache, d->payload, d->payload_cap);
	d->payload = ready ? wc_tc_buf_alloc_ready(d->cache, cap) : wc_tc_buf_alloc(d->cache, cap);
	d->payload_cap = d->payload ? cap : 0;
	return d->payload != NULL;
}

/* Hand the buffers of tiles evicted to make room for this batch to the
 * batch's tiles of the same size: a streaming workload then decodes into
 * memory already mapped and faulted in, with no munmap (and its TLB
 * shootdown across every decoding thread) nor mmap and page faults per
 * tile, and the RSS is unchanged. No lock: both sides are private here. */
void wc_tc_recycle_buffers(entry **batch, size_t nb, entry *dead)
{
	size_t i = 0;
	for (entry *v = dead; v && i < nb; v = v->hnext) {
		if (!v->buf)
			continue;
		for (size_t k = i; k < nb; k++) {
			entry *e = batch[k];
			if (!e->buf && wc_tc_buf_fits(v->buf_cap, e->ref.size)) {
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
void wc_tc_entry_job(const entry *e, const uint8_t *payload, wc_tile_job *job)
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
	wc_tc_fault_in_fresh(e);
	wc_clear_detail();
	wc_err err = e->src->ops->read_payload(e->src, e->tile, d->payload + d->payload_off[i]);
	if (err != WC_OK)
		wc_tc_entry_set_failed(d->cache, e, err, wc_last_detail());
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
		if (!wc_tc_entry_alloc_buf(c, e) || !have_payload) {
			wc_tc_entry_set_failed(c, e, WC_E_NOMEM, "no memory for the tile's buffers");
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
		wc_tc_entry_job(e, d->payload + d->payload_off[i], &d->jobs[nj]);
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
				wc_tc_entry_set_failed(c, e, err, "decode backend could not start");
			else if (job->status != WC_OK)
				wc_tc_entry_set_failed(c, e, job->status, job->detail);
		}
	}
	if (d->payload_cap > PAYLOAD_KEEP_BYTES) {
		wc_tc_buf_free(c, d->payload, d->payload_cap);
		d->payload = NULL;
		d->payload_cap = 0;
	}
}

/* Make a DECODING entry READY or FAILED (its err set) and file it; its
 * source has been taken off it. The caller wakes the readers. Lock held. */
void wc_tc_publish_entry(wc_cache *c, entry *e, entry **dead)
{
	wc_tc_prefetch_done(c, e);
	c->ndecoding--;
	e->state = e->err == WC_OK ? E_READY : E_FAILED;
	if (e->state == E_READY) {
		c->st.decodes++;
		if (e->refs == 0 && e->dropped) /* nobody will ask for it */
			wc_tc_entry_discard(c, e, dead);
		else if (e->refs == 0) /* prefetched, no reader yet: cold end */
			wc_tc_list_push_head(c, e, ON_COLD);
		return;
	}
	/* Failed: out of the table now, so the next get retries; the readers
	 * waiting for it take the error and free it. */
	c->st.decode_errors++;
	wc_tc_table_remove(c, e);
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
		wc_tc_publish_entry(c, batch[i], dead);
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
 * (docs/BENCHMARKS.md). */
void *wc_tc_pool_prefill_main(void *arg)
{
	wc_cache *c = arg;
	const size_t cap = c->prefill_bytes;
	const bool backend = wc_backend_buf_is_backend_memory(c->backend);
	pthread_mutex_lock(&c->lock);
	while (!c->stop && c->pool_bytes + cap <= wc_tc_pool_max(c) && c->bytes + wc_tc_pool_max(c) <= wc_tc_budget_of(c)) {
		pthread_mutex_unlock(&c->lock);
		uint8_t *buf = wc_tc_buf_alloc_ready(c, cap);
		pthread_mutex_lock(&c->lock);
		if (!buf)
			break;
		size_t bcap = cap;
		bool kind = backend;
		wc_tc_pool_put(c, &buf, &bcap, &kind);
		if (buf) { /* no room after all */
			pthread_mutex_unlock(&c->lock);
			wc_tc_tile_free(c, buf, bcap, kind);
			pthread_mutex_lock(&c->lock);
			break;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

void *wc_tc_dispatch_main(void *arg)
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
		bool blocked;
		size_t nb = take_batch(c, d->batch, &dead, &blocked);
		pthread_mutex_unlock(&c->lock);
		wc_tc_recycle_buffers(d->batch, nb, dead);
		wc_tc_free_chain(c, dead);
		if (nb)
			decode_batch(d, d->batch, nb);
		pthread_mutex_lock(&c->lock);
		dead = NULL;
		if (nb)
			publish_batch(c, d, d->batch, nb, &dead);
		pthread_mutex_unlock(&c->lock);
		wc_tc_free_chain(c, dead);
		for (size_t i = 0; i < nb; i++)
			d->srcs[i]->ops->release(d->srcs[i]);
		pthread_mutex_lock(&c->lock);
		if (!nb && blocked && c->room_wait && !c->stop)
			pthread_cond_wait(&c->work, &c->lock); /* room_freed() */
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

