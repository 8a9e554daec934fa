/*
 * resident_load.c - a resident set's payloads from the file into device
 * memory (resident_impl.h, wcr_load_payloads): read and checked (chash) on
 * the context's threads into a page-locked window, the window's pieces
 * planned from it, and the window uploaded asynchronously while the next
 * is read into the other window. Nothing is staged in pageable memory and
 * no copy waits for the host, so a model's units load at the speed of the
 * page cache's reads and the PCIe link (docs/BENCHMARKS.md, "Models with
 * packed weights on the GPU").
 *
 * The windows come from one pool of page-locked buffers kept for the
 * process (page-locked memory takes about a millisecond a MiB to make;
 * the pool is made once, as sets are created, and reused by every set
 * after), two per set being loaded.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resident_impl.h"

#define WIN_BYTES (8u * MIB)
#define WIN_MAX 8u /* two for each of the four sets packed_cuda.py builds at once */

static uint8_t *g_win[WIN_MAX];   /* NULL: not made yet */
static unsigned g_win_busy;       /* a bit per window */
static pthread_mutex_t g_win_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_win_cv = PTHREAD_COND_INITIALIZER;

/* Two windows of the pool (made on first need), taken together so that
 * sets created at once never each hold one while waiting for a second;
 * waits while fewer than two are free. A window whose making failed stays
 * unmade and free, to be made by a later call. */
static wc_err take_windows(unsigned k[2])
{
	pthread_mutex_lock(&g_win_mu);
	for (;;) {
		unsigned have = 0;
		for (unsigned i = 0; i < WIN_MAX; i++)
			have += !(g_win_busy & (1u << i));
		if (have >= 2)
			break;
		pthread_cond_wait(&g_win_cv, &g_win_mu);
	}
	unsigned n = 0;
	for (unsigned pass = 0; pass < 2; pass++) /* made ones first */
		for (unsigned i = 0; i < WIN_MAX && n < 2; i++)
			if (!(g_win_busy & (1u << i)) && (pass || g_win[i])) {
				g_win_busy |= 1u << i;
				k[n++] = i;
			}
	pthread_mutex_unlock(&g_win_mu);
	cudaError_t ce = cudaSuccess;
	uint8_t *p[2] = { NULL, NULL };
	for (unsigned j = 0; j < 2 && ce == cudaSuccess; j++) /* outside the lock: the allocation is slow */
		if (!g_win[k[j]] && (ce = cudaHostAlloc((void **)&p[j], WIN_BYTES, cudaHostAllocPortable)) == cudaSuccess)
			wcc_pinned_add(p[j], WIN_BYTES);
	pthread_mutex_lock(&g_win_mu);
	for (unsigned j = 0; j < 2; j++)
		if (p[j])
			g_win[k[j]] = p[j];
	if (ce != cudaSuccess) {
		g_win_busy &= ~((1u << k[0]) | (1u << k[1]));
		pthread_cond_broadcast(&g_win_cv);
	}
	pthread_mutex_unlock(&g_win_mu);
	return ce == cudaSuccess ? WC_OK : wcr_cuda_err("page-locked window", ce);
}

static void give_window(unsigned k)
{
	pthread_mutex_lock(&g_win_mu);
	g_win_busy &= ~(1u << k);
	pthread_cond_broadcast(&g_win_cv);
	pthread_mutex_unlock(&g_win_mu);
}

/* The end of piece j's bytes in the payload layout: its payload, and a
 * lossy tile's scales after it. */
static size_t piece_end(const wcodec_cuda_resident *r, const wc_container *c, size_t j)
{
	const piece *p = &r->pieces[j];
	size_t end = p->poff + ALIGN16(wc_container_tile(c, p->tile)->csize);
	if (p->lossy && p->soff + ALIGN16(p->span.count * 4) > end)
		end = p->soff + ALIGN16(p->span.count * 4);
	return end;
}

typedef struct read_ctx {
	const wc_container *c;
	const piece *pc;
	size_t first;   /* the window's first piece */
	uint8_t *win;   /* holding payload bytes from base */
	size_t base;
	wc_err *err;    /* per piece of the window */
	char (*why)[256];
} read_ctx;

static void read_one(void *arg, size_t k)
{
	read_ctx *x = arg;
	const size_t i = x->first + k;
	x->err[k] = WC_OK;
	if (k > 0 && x->pc[i].poff == x->pc[i - 1].poff)
		return; /* the same tile for the next tensor */
	x->err[k] = wc_container_read_payload(x->c, x->pc[i].tile, x->win + (x->pc[i].poff - x->base));
	if (x->err[k] != WC_OK)
		snprintf(x->why[k], sizeof x->why[k], "%s", wc_last_detail());
}

/* One window's pieces [i, k): read and checked into win, lossy scales
 * placed, planned, and the upload enqueued. */
static wc_err one_window(wcodec_cuda_resident *r, const wc_container *c, wcr_planner *pl, size_t i, size_t k,
			 uint8_t *win, size_t base, size_t end, wc_err *errs, char (*why)[256], cudaStream_t stream)
{
	read_ctx x = { c, r->pieces, i, win, base, errs, why };
	wc_threadpool_run(r->ctx->pool, read_one, &x, k - i);
	for (size_t j = i; j < k; j++)
		if (errs[j - i] != WC_OK)
			return wc_fail(errs[j - i], "cuda resident: tensor '%s', tile %u: %s", r->pieces[j].name,
				       r->pieces[j].tile, why[j - i]);
	for (size_t j = i; j < k; j++) {
		const piece *p = &r->pieces[j];
		if (p->lossy)
			wcc_scale_copy(p->lp.scales, p->lp.channels, &p->span, win + (p->soff - base));
	}
	wc_err e = wcr_plan_pieces(r, c, pl, k, win, base);
	if (e != WC_OK)
		return e;
	cudaError_t ce = cudaMemcpyAsync(r->d_payload + base, win, end - base, cudaMemcpyHostToDevice, stream);
	return ce == cudaSuccess ? WC_OK : wcr_cuda_err("payload upload", ce);
}

wc_err wcr_load_payloads(wcodec_cuda_resident *r, const wc_container *c, cudaStream_t stream)
{
	wcr_planner pl;
	wc_err e = wcr_plan_begin(r, &pl);
	unsigned w[2] = { WIN_MAX, WIN_MAX };
	cudaEvent_t ev[2] = { NULL, NULL };
	const size_t cap = 4096; /* pieces a window takes at most */
	wc_err *errs = calloc(cap, sizeof *errs);
	char(*why)[256] = calloc(cap, sizeof *why);
	if (e == WC_OK && (!errs || !why))
		e = wc_fail(WC_E_NOMEM, "cuda resident: window");
	for (unsigned b = 0; b < 2 && e == WC_OK; b++) {
		cudaError_t ce = cudaEventCreateWithFlags(&ev[b], cudaEventDisableTiming);
		if (ce != cudaSuccess)
			e = wcr_cuda_err("events", ce);
	}
	if (e == WC_OK && (e = take_windows(w)) != WC_OK)
		w[0] = w[1] = WIN_MAX;
	uint8_t *big = NULL; /* a window for a piece larger than the pool's, pageable */
	for (size_t i = 0, b = 0; i < r->ntiles && e == WC_OK; b ^= 1) {
		const size_t base = r->pieces[i].poff;
		size_t k = i + 1, end = piece_end(r, c, i);
		/* whole pieces, a shared tile's pieces together */
		while (k < r->ntiles && k - i < cap &&
		       (r->pieces[k].poff == r->pieces[k - 1].poff || piece_end(r, c, k) - base <= WIN_BYTES)) {
			const size_t pe = piece_end(r, c, k);
			end = pe > end ? pe : end;
			k++;
		}
		if (end - base > WIN_BYTES) {
			/* one tile larger than a window (tiles go up to 64 MiB): through
			 * pageable memory, synchronously */
			free(big);
			if (!(big = malloc(end - base))) {
				e = wc_fail(WC_E_NOMEM, "cuda resident: a window of %zu bytes", end - base);
				break;
			}
			cudaError_t ce = cudaStreamSynchronize(stream);
			e = ce == cudaSuccess ? one_window(r, c, &pl, i, k, big, base, end, errs, why, stream)
					      : wcr_cuda_err("payload upload", ce);
			if (e == WC_OK && (ce = cudaStreamSynchronize(stream)) != cudaSuccess)
				e = wcr_cuda_err("payload upload", ce);
			i = k;
			continue;
		}
		/* the window's previous upload is done before it is refilled */
		cudaError_t ce = cudaEventSynchronize(ev[b]);
		if (ce != cudaSuccess) {
			e = wcr_cuda_err("payload upload", ce);
			break;
		}
		e = one_window(r, c, &pl, i, k, g_win[w[b]], base, end, errs, why, stream);
		if (e == WC_OK && (ce = cudaEventRecord(ev[b], stream)) != cudaSuccess)
			e = wcr_cuda_err("events", ce);
		i = k;
	}
	cudaError_t ce = cudaStreamSynchronize(stream); /* the windows are free again */
	if (e == WC_OK && ce != cudaSuccess)
		e = wcr_cuda_err("payload upload", ce);
	for (unsigned b = 0; b < 2; b++) {
		if (w[b] < WIN_MAX)
			give_window(w[b]);
		if (ev[b])
			cudaEventDestroy(ev[b]);
	}
	free(big);
	free(errs);
	free(why);
	return wcr_plan_end(r, &pl, e);
}
