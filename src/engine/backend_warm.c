/*
 * backend_warm.c - wc_backend_warm_up(): one synthetic tile decoded through
 * every decode call a backend runs at once, before the first real read.
 *
 * Why: the CUDA backend's first calls on a fresh context took 13-26 ms each
 * through the mount (docs/BENCHMARKS.md, "GPU backend through the mount"), while the first
 * readers waited. The CPU backend gains little (a millisecond's work): a
 * one-tile call runs on its calling thread, here a warm-up thread, so its
 * pool threads' per-thread tables are still built by the first reads; the
 * call only checks that the backend decodes right. The tile is BF16 drawn
 * like model weights, so both planes are rANS-coded and the whole path
 * runs: table upload, rANS and merge kernels, copies both ways, the XXH3
 * check.
 */
#include "engine/backend.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "codec/tile_codec.h"
#include "core/hash.h"

#define WARM_ELEMS (64u * 1024u) /* BF16 elements: 128 KiB decoded */
#define WARM_CHUNK 16384u        /* symbols per rANS chunk */
#define WARM_MAX_CALLS 64u
/* table_key of the warm-up's tables: container ids count up from 1 */
#define WARM_TABLE_KEY UINT64_MAX

typedef struct warm_call {
	wc_backend *be;
	wc_tile_job job;
	wc_err rc;
} warm_call;

static void *warm_thread(void *arg)
{
	warm_call *w = arg;
	w->rc = w->be->ops->decode(w->be, &w->job, 1);
	if (w->rc == WC_OK)
		w->rc = w->job.status;
	return NULL;
}

/* BF16 bits of roughly N(0, 0.02): the sum of four uniforms, scaled. */
static void fill_weights(uint8_t *out, size_t n)
{
	uint64_t s = 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < n; i++) {
		float v = 0;
		for (int k = 0; k < 4; k++) {
			s ^= s << 13;
			s ^= s >> 7;
			s ^= s << 17;
			v += (float)(s >> 40) / (float)(1u << 24) - 0.5f;
		}
		v *= 0.035f;
		uint32_t bits;
		memcpy(&bits, &v, sizeof bits);
		out[2 * i] = (uint8_t)(bits >> 16);
		out[2 * i + 1] = (uint8_t)(bits >> 24);
	}
}

wc_err wc_backend_warm_up(wc_backend *be, unsigned calls)
{
	if (calls == 0)
		calls = 1;
	if (calls > WARM_MAX_CALLS)
		calls = WARM_MAX_CALLS;
	const wc_layout l = wc_layout_for_dtype("BF16");
	const size_t nbytes = (size_t)WARM_ELEMS * 2u;
	wc_err e = WC_OK;
	uint8_t *data = malloc(nbytes);
	uint64_t(*hist)[256] = calloc(WC_MAX_PLANES, sizeof *hist);
	wc_freqtab tabs[WC_MAX_PLANES];
	const size_t cap = wc_tile_encode_bound(l, nbytes, WARM_CHUNK);
	uint8_t *payload = wc_backend_buf_alloc(be, cap);
	warm_call *w = calloc(calls, sizeof *w);
	pthread_t *th = calloc(calls, sizeof *th);
	bool *started = calloc(calls, sizeof *started);
	size_t len = 0;
	if (!data || !hist || !payload || !w || !th || !started) {
		e = wc_fail(WC_E_NOMEM, "backend warm-up");
		goto out;
	}
	fill_weights(data, WARM_ELEMS);
	wc_planes_histogram(l, data, WARM_ELEMS, hist);
	wc_plane_plan plan[WC_MAX_PLANES];
	for (unsigned p = 0; p < l.nplanes; p++) {
		if ((e = wc_freq_normalize(hist[p], &tabs[p])) != WC_OK)
			goto out;
		plan[p] = (wc_plane_plan){ &tabs[p], p, 0 };
	}
	if ((e = wc_tile_encode(l, data, nbytes, plan, WARM_CHUNK, payload, cap, &len, NULL)) != WC_OK)
		goto out;
	const uint64_t dhash = wc_xxh3_64(data, nbytes);
	for (unsigned i = 0; i < calls; i++) {
		wc_tile_job *j = &w[i].job;
		w[i].be = be;
		j->kind = WC_JOB_PLANES;
		j->layout = l;
		j->chunk_symbols = WARM_CHUNK;
		j->payload = payload;
		j->payload_size = (uint32_t)len;
		j->tables = tabs;
		j->ntables = l.nplanes;
		j->table_key = WARM_TABLE_KEY;
		j->out_size = (uint32_t)nbytes;
		j->dhash = dhash;
		if (!(j->out = wc_backend_buf_alloc(be, nbytes))) {
			e = wc_fail(WC_E_NOMEM, "backend warm-up");
			goto out;
		}
	}
	/* Every call at once, so that each of the backend's lanes (CUDA
	 * streams and their buffers) is used once. */
	for (unsigned i = 0; i < calls; i++)
		started[i] = pthread_create(&th[i], NULL, warm_thread, &w[i]) == 0;
	for (unsigned i = 0; i < calls; i++) {
		if (started[i])
			pthread_join(th[i], NULL);
		else
			warm_thread(&w[i]); /* no thread: this one decodes it */
	}
	for (unsigned i = 0; i < calls && e == WC_OK; i++) {
		if (w[i].rc != WC_OK)
			e = wc_fail(w[i].rc, "%s backend warm-up decode: %s", be->ops->name,
				    *w[i].job.detail ? w[i].job.detail : wc_strerror(w[i].rc));
		else if (memcmp(w[i].job.out, data, nbytes) != 0)
			e = wc_fail(WC_E_CORRUPT, "%s backend warm-up decode: wrong bytes", be->ops->name);
	}
out:
	if (w)
		for (unsigned i = 0; i < calls; i++)
			wc_backend_buf_free(be, w[i].job.out, nbytes);
	wc_backend_buf_free(be, payload, cap);
	free(started);
	free(th);
	free(w);
	free(hist);
	free(data);
	return e;
}
