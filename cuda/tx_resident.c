/*
 * tx_resident.c - transform-mode archives resident in GPU memory
 * (tx_decode.h, wcc_tx_resident_*): the payloads uploaded and every image
 * parsed once; a batch is then its image numbers (device memory), a kernel
 * that builds its descriptors from them, the five decode kernels and one
 * synchronisation. A batch can be launched before the one ahead of it is
 * waited for: two are in flight at most, each with its own statuses, so
 * the GPU has the next batch queued while the caller takes the last.
 */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "codec/rans.h"
#include "qvq/qvq_job.h"
#include "tx_decode.h"

#define A16(x) (((size_t)(x) + 15u) & ~(size_t)15u)

/* A batch in flight: its statuses (page-locked, copied after its kernels)
 * and the event after that copy. */
typedef struct tx_slot {
	uint32_t *h_status;
	size_t cap, n;
	cudaEvent_t done;
	uint64_t ticket;
	int pending;
} tx_slot;

struct wcc_tx_resident {
	int gpu;
	pthread_mutex_t mu; /* launches take turns: one set of batch buffers, used in stream order */
	cudaStream_t stream;
	cudaEvent_t before;
	tx_slot slot[2];
	uint64_t next; /* the next batch's ticket */
	uint8_t *d_pay;
	uint32_t *d_tab;
	wcc_tx_image *d_all;
	wcc_tx_chunk *d_chunks;
	uint32_t nimg, per, w, h, max_esc, max_blocks;
	size_t sym_b, dc_b, plane_b;
	/* a batch's buffers, grown to the largest batch asked for */
	uint8_t *d_scratch;
	wcc_tx_image *d_batch;
	wcc_tx_chunk *d_bchunks;
	uint32_t *d_status;
	size_t cap;
};

void wcc_tx_resident_free(wcc_tx_resident *r)
{
	if (!r)
		return;
	cudaSetDevice(r->gpu);
	if (r->stream)
		cudaStreamSynchronize(r->stream);
	cudaFree(r->d_pay);
	cudaFree(r->d_tab);
	cudaFree(r->d_all);
	cudaFree(r->d_chunks);
	cudaFree(r->d_scratch);
	cudaFree(r->d_batch);
	cudaFree(r->d_bchunks);
	cudaFree(r->d_status);
	for (unsigned k = 0; k < 2; k++) {
		cudaFreeHost(r->slot[k].h_status);
		if (r->slot[k].done)
			cudaEventDestroy(r->slot[k].done);
	}
	if (r->stream)
		cudaStreamDestroy(r->stream);
	if (r->before)
		cudaEventDestroy(r->before);
	pthread_mutex_destroy(&r->mu);
	free(r);
}

/* Every image of jobs parsed from the host copy `stage` of the payloads
 * (job a's at stage + off[a]) into all / chunks. */
static wc_err parse_all(wcc_tx_resident *r, wc_tile_job *jobs, size_t n, const uint8_t *stage, const size_t *off,
			wcc_tx_image *all, wcc_tx_chunk *chunks)
{
	uint32_t g = 0, nch = 0;
	for (size_t a = 0; a < n; a++) {
		wc_tile_job j = jobs[a];
		j.payload = stage + off[a];
		for (uint32_t i = 0; i < wc_qvq_tx_job_of(&j)->nimages; i++, g++) {
			const uint32_t before = nch;
			memset(&all[g], 0, sizeof all[g]);
			if (wcc_tx_parse_image(&j, i, &all[g], chunks, &nch, stage, r->d_pay, g))
				return wc_fail(WC_E_CORRUPT, "tile %zu: %s", a, j.detail);
			if (nch - before != r->per)
				return wc_fail(WC_E_UNSUPPORTED, "cuda transform: images of one size and chunk layout");
			if (all[g].nesc > r->max_esc)
				r->max_esc = all[g].nesc;
		}
	}
	return WC_OK;
}

wc_err wcc_tx_resident_create(int gpu, wc_tile_job *jobs, size_t n, uint64_t max_bytes, wcc_tx_resident **out)
{
	*out = NULL;
	size_t total = 0, nimg = 0;
	uint32_t w = 0, h = 0;
	for (size_t a = 0; a < n; a++) {
		const wc_qvq_job *q = wc_qvq_tx_job_of(&jobs[a]);
		if (!q || !q->dims || !q->dtabs || !jobs[a].payload || jobs[a].table_key != jobs[0].table_key)
			return wc_fail(WC_E_INVAL, "cuda transform: job %zu is not a tile of the archive", a);
		for (uint32_t i = 0; i < q->nimages; i++) {
			if (!nimg)
				w = q->dims[0], h = q->dims[1];
			if (q->dims[2 * i] != w || q->dims[2 * i + 1] != h)
				return wc_fail(WC_E_UNSUPPORTED, "cuda transform: a resident archive's images are of one size "
					       "(%ux%u and %ux%u)", w, h, q->dims[2 * i], q->dims[2 * i + 1]);
			nimg++;
		}
		total += A16(jobs[a].payload_size);
	}
	if (!n || !nimg)
		return wc_fail(WC_E_INVAL, "cuda transform: no images");
	if (total > max_bytes)
		return wc_fail(WC_E_RANGE, "cuda transform: payloads of %zu bytes past the %llu given", total,
			       (unsigned long long)max_bytes);
	wcc_tx_resident *r = calloc(1, sizeof *r);
	size_t *off = malloc(n * sizeof *off);
	uint8_t *stage = malloc(total);
	const uint32_t mw = (w + 15) / 16, mh = (h + 15) / 16, C = jobs[0].chunk_symbols ? jobs[0].chunk_symbols : 1;
	const size_t mb = (size_t)mw * mh, nsym_max = mb * 384 + 8 * 32;
	wcc_tx_image *all = malloc(nimg * sizeof *all);
	wcc_tx_chunk *chunks = malloc(nimg * (nsym_max / C + 1) * sizeof *chunks);
	wc_err e = r && off && stage && all && chunks ? WC_OK : wc_fail(WC_E_NOMEM, "cuda transform: no memory");
	if (e) {
		free(r);
		goto out;
	}
	pthread_mutex_init(&r->mu, NULL);
	r->gpu = gpu;
	r->nimg = (uint32_t)nimg;
	r->w = w, r->h = h;
	for (size_t a = 0, o = 0; a < n; a++) {
		off[a] = o;
		memcpy(stage + o, jobs[a].payload, jobs[a].payload_size);
		o += A16(jobs[a].payload_size);
	}
	{ /* the chunks an image: from the first */
		wcc_tx_image im = {0};
		uint32_t c = 0;
		wc_tile_job j = jobs[0];
		j.payload = stage;
		r->d_pay = stage; /* device addresses are not needed to count */
		if (wcc_tx_parse_image(&j, 0, &im, chunks, &c, stage, stage, 0))
			e = wc_fail(WC_E_CORRUPT, "tile 0: %s", j.detail);
		r->d_pay = NULL;
		r->per = c;
		r->sym_b = A16(im.end[WCC_TX_PLANES - 1]);
		r->dc_b = A16(mb * 6 * 4);
		r->plane_b = A16(mb * 384);
		r->max_blocks = (uint32_t)(6 * mb);
	}
	cudaError_t ce = cudaSetDevice(gpu);
	if (!e && ce == cudaSuccess)
		ce = cudaMalloc((void **)&r->d_pay, total);
	if (!e && ce == cudaSuccess)
		e = parse_all(r, jobs, n, stage, off, all, chunks);
	if (!e && ce == cudaSuccess)
		ce = cudaMemcpy(r->d_pay, stage, total, cudaMemcpyHostToDevice);
	if (!e && ce == cudaSuccess)
		ce = cudaMalloc((void **)&r->d_all, nimg * sizeof *all);
	if (!e && ce == cudaSuccess)
		ce = cudaMemcpy(r->d_all, all, nimg * sizeof *all, cudaMemcpyHostToDevice);
	if (!e && ce == cudaSuccess)
		ce = cudaMalloc((void **)&r->d_chunks, nimg * r->per * sizeof *chunks);
	if (!e && ce == cudaSuccess)
		ce = cudaMemcpy(r->d_chunks, chunks, nimg * r->per * sizeof *chunks, cudaMemcpyHostToDevice);
	if (!e && ce == cudaSuccess)
		ce = cudaMalloc((void **)&r->d_tab, WCC_TX_PLANES * sizeof(wc_rans_dtab));
	for (unsigned p = 0; !e && ce == cudaSuccess && p < WCC_TX_PLANES; p++)
		ce = cudaMemcpy(r->d_tab + 4096 * p, wc_qvq_tx_job_of(&jobs[0])->dtabs[p]->entry, sizeof(wc_rans_dtab),
				cudaMemcpyHostToDevice);
	if (!e && ce == cudaSuccess)
		ce = cudaStreamCreateWithFlags(&r->stream, cudaStreamNonBlocking);
	if (!e && ce == cudaSuccess)
		ce = cudaEventCreateWithFlags(&r->before, cudaEventDisableTiming);
	for (unsigned k = 0; k < 2 && !e && ce == cudaSuccess; k++)
		ce = cudaEventCreateWithFlags(&r->slot[k].done, cudaEventDisableTiming);
	if (!e && ce != cudaSuccess)
		e = wc_fail(ce == cudaErrorMemoryAllocation ? WC_E_RANGE : WC_E_BACKEND,
			    "cuda transform: a resident archive of %zu bytes on GPU %d: %s", total, gpu,
			    cudaGetErrorString(ce));
	if (e)
		wcc_tx_resident_free(r);
	else
		*out = r;
out:
	free(off);
	free(stage);
	free(all);
	free(chunks);
	return e;
}

/* The device buffers of a batch of n images (grown, never shrunk; a batch
 * in flight has copied its statuses out once the stream is idle). */
static cudaError_t grow(wcc_tx_resident *r, size_t n)
{
	if (n <= r->cap)
		return cudaSuccess;
	cudaStreamSynchronize(r->stream);
	cudaFree(r->d_scratch);
	cudaFree(r->d_batch);
	cudaFree(r->d_bchunks);
	cudaFree(r->d_status);
	r->d_scratch = NULL, r->d_batch = NULL, r->d_bchunks = NULL, r->d_status = NULL;
	r->cap = 0;
	cudaError_t ce = cudaMalloc((void **)&r->d_scratch, n * (r->sym_b + r->dc_b + r->plane_b));
	if (ce == cudaSuccess)
		ce = cudaMalloc((void **)&r->d_batch, n * sizeof *r->d_batch);
	if (ce == cudaSuccess)
		ce = cudaMalloc((void **)&r->d_bchunks, n * r->per * sizeof *r->d_bchunks);
	if (ce == cudaSuccess)
		ce = cudaMalloc((void **)&r->d_status, n * sizeof *r->d_status);
	if (ce == cudaSuccess)
		r->cap = n;
	return ce;
}

/* A slot's statuses for n images (its batch waited for). */
static cudaError_t grow_slot(tx_slot *s, size_t n)
{
	if (n <= s->cap)
		return cudaSuccess;
	cudaFreeHost(s->h_status);
	s->h_status = NULL;
	s->cap = 0;
	cudaError_t ce = cudaMallocHost((void **)&s->h_status, n * sizeof *s->h_status);
	if (ce == cudaSuccess)
		s->cap = n;
	return ce;
}

wc_err wcc_tx_resident_launch(wcc_tx_resident *r, const int64_t *idx, size_t n, int chw, int f32,
			      const float scale[3], const float bias[3], void *out, size_t out_stride, void *stream,
			      uint64_t *ticket)
{
	if (!idx || !out || !ticket || n == 0 || n > UINT32_MAX / 8)
		return wc_fail(WC_E_INVAL, "cuda transform: a batch of %zu images", n);
	pthread_mutex_lock(&r->mu);
	tx_slot *sl = &r->slot[r->next % 2];
	if (sl->pending) {
		pthread_mutex_unlock(&r->mu);
		return wc_fail(WC_E_INVAL, "cuda transform: two batches in flight: wait for one first");
	}
	cudaError_t ce = cudaSetDevice(r->gpu);
	if (ce == cudaSuccess)
		ce = grow(r, n);
	if (ce == cudaSuccess)
		ce = grow_slot(sl, n);
	wcc_tx_batch b = {.scratch = r->d_scratch, .sym_bytes = r->sym_b, .dc_bytes = r->dc_b,
			  .plane_bytes = r->plane_b, .out = out, .out_stride = out_stride, .chw = chw ? 1u : 0u,
			  .f32 = f32 ? 1u : 0u};
	for (unsigned c = 0; c < 3; c++) {
		b.scale[c] = scale ? scale[c] : 1.0f;
		b.bias[c] = bias ? bias[c] : 0.0f;
	}
	/* after the caller's stream's work; the caller's later work after ours.
	 * The batch buffers are reused in the order of r->stream. */
	if (ce == cudaSuccess)
		ce = cudaEventRecord(r->before, (cudaStream_t)stream);
	if (ce == cudaSuccess)
		ce = cudaStreamWaitEvent(r->stream, r->before, 0);
	if (ce == cudaSuccess)
		ce = (cudaError_t)wcc_tx_launch_prepare(r->d_all, r->nimg, r->d_chunks, r->per, idx, (uint32_t)n, &b,
							r->d_batch, r->d_bchunks, r->d_status, r->stream);
	if (ce == cudaSuccess)
		ce = (cudaError_t)wcc_tx_launch(r->d_batch, (uint32_t)n, r->d_bchunks, (uint32_t)n * r->per, (uint32_t)n,
						r->d_tab, r->max_blocks, r->w * r->h, r->max_esc, r->d_status, r->stream);
	if (ce == cudaSuccess)
		ce = cudaMemcpyAsync(sl->h_status, r->d_status, n * sizeof *sl->h_status, cudaMemcpyDeviceToHost,
				     r->stream);
	if (ce == cudaSuccess)
		ce = cudaEventRecord(sl->done, r->stream);
	if (ce == cudaSuccess)
		ce = cudaStreamWaitEvent((cudaStream_t)stream, sl->done, 0);
	wc_err e = WC_OK;
	if (ce != cudaSuccess) {
		e = wc_fail(WC_E_BACKEND, "cuda transform: resident batch: %s", cudaGetErrorString(ce));
	} else {
		sl->n = n;
		sl->ticket = r->next++;
		sl->pending = 1;
		*ticket = sl->ticket;
	}
	pthread_mutex_unlock(&r->mu);
	return e;
}

wc_err wcc_tx_resident_wait(wcc_tx_resident *r, uint64_t ticket)
{
	pthread_mutex_lock(&r->mu);
	tx_slot *sl = &r->slot[ticket % 2];
	if (!sl->pending || sl->ticket != ticket) {
		pthread_mutex_unlock(&r->mu);
		return wc_fail(WC_E_INVAL, "cuda transform: no batch %llu in flight", (unsigned long long)ticket);
	}
	pthread_mutex_unlock(&r->mu);
	/* the one synchronisation: the statuses (the slot stays this batch's until it is released below) */
	cudaError_t ce = cudaEventSynchronize(sl->done);
	wc_err e = ce == cudaSuccess ? WC_OK
				     : wc_fail(WC_E_BACKEND, "cuda transform: resident batch: %s", cudaGetErrorString(ce));
	for (size_t k = 0; !e && k < sl->n; k++)
		if (sl->h_status[k])
			e = sl->h_status[k] == 2 ? wc_fail(WC_E_RANGE, "cuda transform: batch place %zu: an image number "
							   "past the archive's %u", k, r->nimg)
						 : wc_fail(WC_E_CORRUPT, "cuda transform: batch place %zu: the image's stream "
							   "failed its checks", k);
	pthread_mutex_lock(&r->mu);
	sl->pending = 0;
	pthread_mutex_unlock(&r->mu);
	return e;
}
