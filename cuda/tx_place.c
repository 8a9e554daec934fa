/*
 * tx_place.c - the host side of transform-mode images into device memory
 * (tx_decode.h): each image's part of its tile payload parsed and checked
 * as the CPU decoder checks it (offsets, escape places, rANS chunk sizes),
 * the batch's payloads uploaded in one copy, the descriptors built in
 * page-locked memory, the kernels launched on a stream ordered after the
 * caller's, one synchronisation.
 */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "codec/rans.h"
#include "qvq/qvq_job.h"
#include "tx_decode.h"
#include "wcc_slots.h"

#define TX_TABLES 16u /* archives whose tables stay on the device */
#define A16(x) (((size_t)(x) + 15u) & ~(size_t)15u)

typedef struct tx_tables {
	uint64_t key;
	uint32_t *d_tab; /* 8 x 4096 decoding-table entries */
} tx_tables;

struct wcc_tx {
	int gpu;
	pthread_mutex_t mu; /* the tables */
	wcc_slots slots;
	tx_tables tabs[TX_TABLES];
	unsigned ntabs;
};

int wcc_tx_any(const wc_tile_job *jobs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (jobs[i].kind == WC_JOB_TX)
			return 1;
	return 0;
}

wc_err wcc_tx_create(int gpu, wcc_tx **out)
{
	wcc_tx *tx = calloc(1, sizeof *tx);
	if (!tx)
		return wc_fail(WC_E_NOMEM, "cuda transform: no memory");
	tx->gpu = gpu;
	pthread_mutex_init(&tx->mu, NULL);
	cudaError_t e = wcc_slots_init(&tx->slots, gpu);
	if (e != cudaSuccess) {
		wcc_tx_destroy(tx);
		return wc_fail(WC_E_BACKEND, "cuda transform: streams on GPU %d: %s", gpu, cudaGetErrorString(e));
	}
	*out = tx;
	return WC_OK;
}

void wcc_tx_destroy(wcc_tx *tx)
{
	if (!tx)
		return;
	wcc_slots_destroy(&tx->slots);
	for (unsigned t = 0; t < tx->ntabs; t++)
		cudaFree(tx->tabs[t].d_tab);
	pthread_mutex_destroy(&tx->mu);
	free(tx);
}

/* The device copy of a job's archive tables, uploaded on first use. */
static const uint32_t *device_tables(wcc_tx *tx, const wc_tile_job *j, cudaError_t *err)
{
	const wc_qvq_job *q = wc_qvq_tx_job_of(j);
	const uint32_t *d = NULL;
	pthread_mutex_lock(&tx->mu);
	for (unsigned t = 0; t < tx->ntabs && !d; t++)
		if (tx->tabs[t].key == j->table_key)
			d = tx->tabs[t].d_tab;
	if (!d && tx->ntabs < TX_TABLES) {
		uint32_t *dt = NULL;
		*err = cudaMalloc((void **)&dt, WCC_TX_PLANES * sizeof(wc_rans_dtab));
		for (unsigned p = 0; p < WCC_TX_PLANES && *err == cudaSuccess; p++)
			*err = cudaMemcpy(dt + 4096 * p, q->dtabs[p]->entry, sizeof(wc_rans_dtab), cudaMemcpyHostToDevice);
		if (*err == cudaSuccess) {
			tx->tabs[tx->ntabs++] = (tx_tables){j->table_key, dt};
			d = dt;
		} else {
			cudaFree(dt);
		}
	}
	pthread_mutex_unlock(&tx->mu);
	return d;
}

wc_err wcc_tx_place(wcc_tx *tx, wc_tile_job *jobs, size_t n, const wc_qvq_image_dst *dsts, size_t ndst, void *stream)
{
	const uint8_t *lo = NULL, *hi = NULL;
	size_t chunks_max = 0;
	for (size_t a = 0; a < n; a++) {
		const wc_qvq_job *q = wc_qvq_tx_job_of(&jobs[a]);
		if (!q || !q->dims || !q->dtabs || !jobs[a].payload || jobs[a].chunk_symbols < 32)
			return wc_fail(WC_E_INVAL, "cuda transform: job %zu is not a transform-mode image tile", a);
		if (!lo || jobs[a].payload < lo)
			lo = jobs[a].payload;
		if (!hi || jobs[a].payload + jobs[a].payload_size > hi)
			hi = jobs[a].payload + jobs[a].payload_size;
	}
	for (size_t d = 0; d < ndst; d++) {
		if (dsts[d].job >= n || dsts[d].image >= wc_qvq_tx_job_of(&jobs[dsts[d].job])->nimages ||
		    !dsts[d].device_dst)
			return wc_fail(WC_E_INVAL, "cuda transform: image destination %zu names no image of the jobs", d);
		const wc_tile_job *j = &jobs[dsts[d].job];
		const uint32_t *dm = wc_qvq_tx_job_of(j)->dims + 2 * dsts[d].image;
		const size_t nsym = ((size_t)(dm[0] + 15) / 16) * ((dm[1] + 15) / 16) * 384 + 8 * 32;
		chunks_max += nsym / j->chunk_symbols + 1;
	}
	if (!n || !ndst)
		return WC_OK;
	/* scratch a destination: symbols, DCs, planes */
	size_t scratch = 0, pay = (size_t)(hi - lo);
	for (size_t d = 0; d < ndst; d++) {
		const uint32_t *dm = wc_qvq_tx_job_of(&jobs[dsts[d].job])->dims + 2 * dsts[d].image;
		const size_t mb = ((size_t)(dm[0] + 15) / 16) * ((dm[1] + 15) / 16);
		scratch += A16(mb * 384 + 8 * 32) + A16(mb * 6 * 4) + A16(mb * 384);
	}
	/* chunks: twice, the second half a place to reorder them */
	const size_t desc = A16(ndst * sizeof(wcc_tx_image)), chk = A16(2 * chunks_max * sizeof(wcc_tx_chunk));
	const size_t stat = A16(n * 4);
	wcc_slot *s = wcc_slots_take(&tx->slots);
	cudaError_t ce = cudaSetDevice(tx->gpu);
	if (ce == cudaSuccess)
		ce = wcc_slot_grow(s, A16(pay) + scratch + desc + chk + stat, desc + chk + stat);
	wc_err ret = WC_OK;
	const uint32_t *d_tab = NULL;
	for (size_t a = 0; a < n && ce == cudaSuccess; a++)
		if (!(d_tab = device_tables(tx, &jobs[a], &ce)) && ce == cudaSuccess)
			ce = cudaErrorMemoryAllocation; /* the table cache is full */
	for (size_t a = 1; a < n && ce == cudaSuccess; a++)
		if (jobs[a].table_key != jobs[0].table_key)
			ret = wc_fail(WC_E_INVAL, "cuda transform: the jobs of one call come from one archive");
	if (ce != cudaSuccess || ret) {
		wcc_slots_give(&tx->slots, s);
		return ret ? ret : wc_fail(WC_E_BACKEND, "cuda transform: %s", cudaGetErrorString(ce));
	}
	uint8_t *d_pay = s->d_buf, *d_scr = d_pay + A16(pay);
	wcc_tx_image *h_img = (wcc_tx_image *)s->h_buf, *d_img = (wcc_tx_image *)(d_scr + scratch);
	wcc_tx_chunk *h_chk = (wcc_tx_chunk *)(s->h_buf + desc), *d_chk = (wcc_tx_chunk *)((uint8_t *)d_img + desc);
	uint32_t *h_stat = (uint32_t *)(s->h_buf + desc + chk), *d_stat = (uint32_t *)((uint8_t *)d_chk + chk);
	uint32_t nimg = 0, nch = 0, max_blocks = 0, max_pixels = 0, max_esc = 0;
	size_t so = 0;
	for (size_t a = 0; a < n; a++)
		jobs[a].status = WC_OK;
	for (size_t d = 0; d < ndst; d++) {
		wc_tile_job *j = &jobs[dsts[d].job];
		if (j->status)
			continue;
		wcc_tx_image *im = &h_img[nimg];
		memset(im, 0, sizeof *im);
		if (wcc_tx_parse_image(j, dsts[d].image, im, h_chk, &nch, lo, d_pay, nimg))
			continue;
		const size_t mb = (size_t)im->mw * im->mh;
		im->sym = d_scr + so;
		so += A16(im->end[WCC_TX_PLANES - 1]);
		im->dc = (int32_t *)(d_scr + so);
		so += A16(mb * 6 * 4);
		im->planes = d_scr + so;
		so += A16(mb * 384);
		im->out = dsts[d].device_dst;
		im->chw = dsts[d].chw ? 1 : 0;
		im->f32 = dsts[d].f32 ? 1 : 0;
		memcpy(im->scale, dsts[d].scale, sizeof im->scale);
		memcpy(im->bias, dsts[d].bias, sizeof im->bias);
		im->job = dsts[d].job;
		max_blocks = (uint32_t)(6 * mb) > max_blocks ? (uint32_t)(6 * mb) : max_blocks;
		max_pixels = im->w * im->h > max_pixels ? im->w * im->h : max_pixels;
		max_esc = im->nesc > max_esc ? im->nesc : max_esc;
		nimg++;
	}
	/* after what the caller queued on its stream (NULL: the default one) */
	ce = cudaEventRecord(s->after, (cudaStream_t)stream);
	if (ce == cudaSuccess)
		ce = cudaStreamWaitEvent(s->stream, s->after, 0);
	if (ce == cudaSuccess && pay)
		ce = cudaMemcpyAsync(d_pay, lo, pay, cudaMemcpyHostToDevice, s->stream);
	if (ce == cudaSuccess && nimg)
		ce = cudaMemcpyAsync(d_img, h_img, nimg * sizeof *h_img, cudaMemcpyHostToDevice, s->stream);
	if (ce == cudaSuccess)
		ce = cudaMemsetAsync(d_stat, 0, n * 4, s->stream);
	/* Images of one size: the chunks reordered chunk index first (every
	 * image's first chunk, then every second...), a launch a group whose
	 * chunks share their layout, so the rANS step shares its tables in a
	 * thread block. */
	uint32_t group = 0;
	int same = nimg > 0 && nch % nimg == 0;
	for (uint32_t i = 1; i < nimg && same; i++)
		same = h_img[i].w == h_img[0].w && h_img[i].h == h_img[0].h;
	wcc_tx_chunk *h_ord = h_chk + chunks_max; /* room reserved after the chunks */
	if (same) {
		const uint32_t per = nch / nimg;
		for (uint32_t c = 0; c < nch; c++) /* parse_image appended them image by image */
			h_ord[(c % per) * nimg + c / per] = h_chk[c];
		memcpy(h_chk, h_ord, nch * sizeof *h_chk);
		group = nimg;
	}
	if (ce == cudaSuccess && nch)
		ce = cudaMemcpyAsync(d_chk, h_chk, nch * sizeof *h_chk, cudaMemcpyHostToDevice, s->stream);
	if (ce == cudaSuccess)
		ce = (cudaError_t)wcc_tx_launch(d_img, nimg, d_chk, nch, group, d_tab, max_blocks, max_pixels, max_esc,
						d_stat, s->stream);
	if (ce == cudaSuccess)
		ce = cudaMemcpyAsync(h_stat, d_stat, n * 4, cudaMemcpyDeviceToHost, s->stream);
	if (ce == cudaSuccess)
		ce = cudaStreamSynchronize(s->stream);
	if (ce != cudaSuccess)
		ret = wc_fail(WC_E_BACKEND, "cuda transform: %s", cudaGetErrorString(ce));
	for (size_t a = 0; !ret && a < n; a++)
		if (jobs[a].status == WC_OK && h_stat[a])
			wc_job_fail(&jobs[a], WC_E_CORRUPT, "transform: an image's stream failed its checks on the GPU");
	wcc_slots_give(&tx->slots, s);
	return ret;
}
