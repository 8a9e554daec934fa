/*
 * resident.c - packed tensors kept in device memory and decoded there on a
 * caller's stream, with no host work per decode (wcodec_cuda.h,
 * wcodec_cuda_resident_*): the model-weights path of the Python package
 * (python/wcodec/packed_cuda.py), where a transformer block's weights are
 * decoded just before the block runs.
 *
 * At create every tile's payload is read and checked (chash), uploaded
 * once through page-locked windows (resident_load.c), and planned into the
 * batch descriptors of the GPU decoder (wcc_kernels.h) as for a lane, in
 * "steps" of at most STEP_JOBS tiles and STEP_SCRATCH bytes of plane
 * scratch (resident_plan.c). The descriptors name the destination
 * through REL (an address no device pointer has); a decode into a
 * destination not seen before rebases a copy of them onto it and uploads
 * it into one of NSLOT descriptor slots (once per destination: a model's
 * decode buffers are a fixed few), after which a decode is two kernel
 * launches per step on the caller's stream.
 *
 * Integrity: payload checksums at create; with WCODEC_CUDA_RESIDENT_VERIFY
 * also a first decode whose bytes are checked against every tile's dhash on
 * the host; every later decode's rANS stream checks (docs/FORMAT.md 4) write
 * a failed tile's status into page-locked host memory that
 * wcodec_cuda_resident_check() reads without touching the GPU.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/limits.h"
#include "resident_impl.h"

#define EXPORT __attribute__((visibility("default")))

static wcc_ctx *g_ctx[WCC_MAX_GPUS];

/* The resident sets' decode context of a GPU, created on first use and kept
 * for the process: only its frequency-table cache and host threads serve
 * (the sets launch on callers' streams), so its lane is the smallest. */
static wc_err resident_ctx(int gpu, wcc_ctx **out)
{
	unsigned threads = wc_cpu_count();
	wcc_ctx_opts o = { .gpu = gpu, .memory_limit = (uint64_t)TABLE_SLOTS * 512u + 8u * MIB, .lanes = 1,
			   .host_threads = threads > 1 ? (threads > 16 ? 15 : threads - 1) : 1, .device_only = 1 };
	return wcc_ctx_once(g_ctx, &o, out);
}

/* ---- building ----------------------------------------------------------- */

/* The check at create (verify) copies decoded bytes back through one
 * page-locked buffer per GPU of VERIFY_STAGE bytes, made on first use and
 * kept: page-locked memory takes about 1.2 ms a MiB to allocate, so a
 * buffer the size of each set (what a 7B model's blocks needed: 9.4 of the
 * 12.2 s its load took, docs/BENCHMARKS.md) costs more than the copies. */
#define VERIFY_STAGE (64u * MIB)
static uint8_t *g_verify_stage[WCC_MAX_GPUS];
static pthread_mutex_t g_verify_mu = PTHREAD_MUTEX_INITIALIZER;

/* A piece and where its bytes go, for sorting by address. */
struct piece_at {
	uintptr_t out;
	size_t j;
};

typedef struct hash_ctx {
	const wcodec_cuda_resident *r;
	const struct piece_at *idx; /* the pieces hashed now */
	const uint8_t *h;   /* the window's bytes on the host */
	uintptr_t base;     /* the piece address (REL + offset, WORK + offset) of h[0] */
	wc_err *err;
} hash_ctx;

static void hash_one(void *arg, size_t k)
{
	const hash_ctx *x = arg;
	const size_t j = x->idx[k].j;
	const piece *p = &x->r->pieces[j];
	const wc_tile_info *tl = wc_container_tile(x->r->c, p->tile);
	wc_tile_job job;
	memset(&job, 0, sizeof job);
	job.out = (uint8_t *)x->h + (p->out - x->base);
	job.out_size = tl->dsize;
	job.dhash = tl->dhash;
	x->err[j] = wc_job_check_hash(&job);
}

/* The slot whose descriptors point at dst and at work (NULL: the slot's own
 * work buffer), or NULL. */
static slot *slot_of(wcodec_cuda_resident *r, uintptr_t dst, const uint8_t *work)
{
	for (unsigned k = 0; k < NSLOT; k++) {
		const slot *s = &r->slots[k];
		if (s->dst == dst && s->work == (work ? work : s->d_work))
			return &r->slots[k];
	}
	return NULL;
}

static int by_out(const void *a, const void *b)
{
	uintptr_t x = ((const struct piece_at *)a)->out, y = ((const struct piece_at *)b)->out;
	return x < y ? -1 : x > y;
}

/* Hash the pieces whose bytes lie in d (REL pieces: the destination) or
 * work (WORK pieces: shared tiles), window by window of the stage: the
 * pieces sorted by address, each window the next pieces that fit whole,
 * copied down at once and hashed on the context's threads. Lock held. */
static wc_err verify_windows(wcodec_cuda_resident *r, const uint8_t *d, const uint8_t *work, uint8_t *stage,
			     struct piece_at *idx, wc_err *errs)
{
	for (size_t j = 0; j < r->ntiles; j++)
		idx[j] = (struct piece_at){ r->pieces[j].out, j };
	qsort(idx, r->ntiles, sizeof *idx, by_out);
	for (size_t i = 0; i < r->ntiles;) {
		const piece *p0 = &r->pieces[idx[i].j];
		const uintptr_t region = p0->out >= WORK ? WORK : REL, base = p0->out;
		uintptr_t end = base;
		size_t k = i;
		for (; k < r->ntiles; k++) {
			const piece *p = &r->pieces[idx[k].j];
			const uintptr_t pend = p->out + wc_container_tile(r->c, p->tile)->dsize;
			if ((p->out >= WORK ? WORK : REL) != region || (pend - base > VERIFY_STAGE && k > i))
				break;
			if (pend > end)
				end = pend;
		}
		if (end - base > VERIFY_STAGE) /* one tile larger than the stage */
			return wc_fail(WC_E_UNSUPPORTED, "cuda resident: tile %u of %llu bytes is larger than the %u MiB "
				       "check window", p0->tile, (unsigned long long)(end - base), (unsigned)(VERIFY_STAGE >> 20));
		if (region == WORK && !work)
			return wc_fail(WC_E_BACKEND, "cuda resident: no work buffer to check shared tiles in");
		const uint8_t *src = (region == WORK ? work : d) + (base - region);
		cudaError_t ce = cudaMemcpy(stage, src, end - base, cudaMemcpyDeviceToHost);
		if (ce != cudaSuccess)
			return wcr_cuda_err("verify copy", ce);
		hash_ctx x = { r, idx + i, stage, base, errs };
		wc_threadpool_run(r->ctx->pool, hash_one, &x, k - i);
		for (size_t m = i; m < k; m++)
			if (errs[idx[m].j] != WC_OK)
				return wc_fail(WC_E_CORRUPT, "cuda resident: tensor '%s', tile %u: decoded bytes fail their "
					       "checksum", r->pieces[idx[m].j].name, r->pieces[idx[m].j].tile);
		i = k;
	}
	return WC_OK;
}

/* With WCODEC_CUDA_RESIDENT_VERIFY: decode once into scratch and check
 * every tile's bytes (in the destination, or the work buffer for shared
 * tiles) against its dhash on the host, on the context's threads. */
static wc_err verify(wcodec_cuda_resident *r, wc_err *errs)
{
	uint8_t *d = NULL;
	struct piece_at *idx = malloc((r->ntiles + 1) * sizeof *idx);
	cudaError_t ce = idx ? cudaMalloc((void **)&d, r->out_bytes + 16) : cudaErrorMemoryAllocation;
	if (ce != cudaSuccess) {
		free(idx);
		return wcr_cuda_err("verify buffers", ce);
	}
	wc_err e = wcodec_cuda_resident_decode(r, d, r->out_bytes + 16, 0);
	slot *s = slot_of(r, (uintptr_t)d, NULL);
	if (e == WC_OK && (ce = cudaStreamSynchronize(0)) != cudaSuccess)
		e = wcr_cuda_err("verify decode", ce);
	if (e == WC_OK)
		e = wcodec_cuda_resident_check(r);
	if (e == WC_OK) {
		pthread_mutex_lock(&g_verify_mu);
		uint8_t **stage = &g_verify_stage[r->gpu];
		if (!*stage && (ce = cudaHostAlloc((void **)stage, VERIFY_STAGE, 0)) != cudaSuccess) {
			*stage = NULL;
			e = wcr_cuda_err("verify stage", ce);
		}
		if (e == WC_OK)
			e = verify_windows(r, d, s ? s->work : NULL, *stage, idx, errs);
		pthread_mutex_unlock(&g_verify_mu);
	}
	if (s) { /* d leaves no slot behind pointing at it, nor memory */
		cudaFree(s->d_work);
		cudaFree(s->d_blob);
		s->d_work = s->d_blob = s->work = NULL;
		s->dst = 0, s->last = 0;
	}
	cudaFree(d); /* after the decode: cudaFree waits for the device */
	free(idx);
	return e;
}

EXPORT wc_err wcodec_cuda_resident_create(wc_container *c, const char *const *names, size_t n, int gpu,
					  unsigned flags, wcodec_cuda_resident **out)
{
	*out = NULL;
	if (n == 0 || n > UINT32_MAX)
		return wc_fail(WC_E_INVAL, "cuda resident: %zu tensors", n);
	wcodec_cuda_resident *r = calloc(1, sizeof *r);
	if (!r)
		return wc_fail(WC_E_NOMEM, "cuda resident");
	r->gpu = gpu;
	r->ntensors = (uint32_t)n;
	r->c = c;
	wc_container_retain(c);
	int prev = 0;
	cudaGetDevice(&prev);
	wc_err *errs = NULL;
	cudaStream_t st = NULL;
	cudaError_t ce;
	wc_err e = resident_ctx(gpu, &r->ctx);
	if (e == WC_OK && (ce = cudaSetDevice(gpu)) != cudaSuccess)
		e = wcr_cuda_err("device", ce);
	if (e == WC_OK && !(r->offsets = calloc(n, sizeof *r->offsets)))
		e = wc_fail(WC_E_NOMEM, "cuda resident");
	if (e == WC_OK)
		e = wcr_lay_out(r, c, names, n);
	if (e != WC_OK)
		goto done;
	errs = calloc(r->ntiles + 1, sizeof *errs);
	if (!errs) {
		e = wc_fail(WC_E_NOMEM, "cuda resident: %zu tiles", r->ntiles);
		goto done;
	}
	if ((ce = cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking)) != cudaSuccess ||
	    (ce = cudaMalloc((void **)&r->d_payload, r->payload_bytes + 16)) != cudaSuccess ||
	    (ce = cudaHostAlloc((void **)&r->h_status, 4u * (r->ntiles + 1), cudaHostAllocMapped)) != cudaSuccess ||
	    (ce = cudaHostGetDevicePointer((void **)&r->d_status, r->h_status, 0)) != cudaSuccess) {
		e = wcr_cuda_err("allocating device payloads", ce);
		goto done;
	}
	memset(r->h_status, 0, 4u * (r->ntiles + 1));
	/* payloads: read, checked, planned and uploaded window by window */
	e = wcr_load_payloads(r, c, st);
	if (e != WC_OK)
		goto done;
	if ((ce = cudaHostAlloc((void **)&r->h_stage, r->blob_bytes + 16, 0)) != cudaSuccess) {
		e = wcr_cuda_err("descriptors", ce);
		goto done;
	}
	for (unsigned s = 0; s < NSLOT; s++)
		if ((ce = cudaEventCreateWithFlags(&r->slots[s].used, cudaEventDisableTiming)) != cudaSuccess) {
			e = wcr_cuda_err("events", ce);
			goto done;
		}
	if (flags & WCODEC_CUDA_RESIDENT_VERIFY)
		e = verify(r, errs);
done:
	if (st)
		cudaStreamDestroy(st);
	free(errs);
	cudaSetDevice(prev);
	if (e != WC_OK) {
		wcodec_cuda_resident_free(r);
		return e;
	}
	*out = r;
	return WC_OK;
}

/* ---- decoding ----------------------------------------------------------- */

/* The slot whose descriptors point at dst and work (NULL: a work buffer of
 * the slot's own), rebasing and uploading them into the least recently
 * used slot on first sight (after its last reader). */
static wc_err slot_for(wcodec_cuda_resident *r, uintptr_t dst, uint8_t *work, cudaStream_t stream, slot **out)
{
	if ((*out = slot_of(r, dst, work)) != NULL)
		return WC_OK;
	slot *lru = &r->slots[0];
	for (unsigned s = 1; s < NSLOT; s++)
		if (r->slots[s].last < lru->last)
			lru = &r->slots[s];
	/* the upload below follows the slot's last decode, on any stream */
	cudaError_t ce = cudaStreamWaitEvent(stream, lru->used, 0);
	if (ce == cudaSuccess && !lru->d_blob)
		ce = cudaMalloc((void **)&lru->d_blob, r->blob_bytes + 16);
	if (ce == cudaSuccess && work && lru->d_work) { /* given one: its own goes */
		ce = cudaStreamSynchronize(stream);
		cudaFree(lru->d_work);
		lru->d_work = NULL;
	}
	if (ce == cudaSuccess && !work && !lru->d_work && r->work_bytes)
		ce = cudaMalloc((void **)&lru->d_work, r->work_bytes);
	if (ce != cudaSuccess)
		return wcr_cuda_err("descriptor slot", ce);
	lru->work = work ? work : lru->d_work;
	wcr_rebase(r, dst, (uintptr_t)lru->work);
	ce = cudaMemcpyAsync(lru->d_blob, r->h_stage, r->blob_bytes, cudaMemcpyHostToDevice, stream);
	if (ce == cudaSuccess)
		ce = cudaStreamSynchronize(stream); /* h_stage is free again */
	if (ce != cudaSuccess)
		return wcr_cuda_err("descriptor upload", ce);
	lru->dst = dst;
	*out = lru;
	return WC_OK;
}

EXPORT wc_err wcodec_cuda_resident_decode(wcodec_cuda_resident *r, void *device_dst, size_t dst_bytes,
					  cudaStream_t stream)
{
	return wcodec_cuda_resident_decode_work(r, device_dst, dst_bytes, NULL, 0, stream);
}

EXPORT size_t wcodec_cuda_resident_work_bytes(const wcodec_cuda_resident *r)
{
	return r->work_bytes;
}

EXPORT wc_err wcodec_cuda_resident_decode_work(wcodec_cuda_resident *r, void *device_dst, size_t dst_bytes,
					       void *work, size_t work_bytes, cudaStream_t stream)
{
	if (!r || !device_dst || ((uintptr_t)device_dst & (OUT_ALIGN - 1u)))
		return wc_fail(WC_E_INVAL, "cuda resident: destination %p is not %u-byte aligned", device_dst,
			       OUT_ALIGN);
	if (work && (work_bytes < r->work_bytes || ((uintptr_t)work & 15u)))
		return wc_fail(WC_E_RANGE, "cuda resident: a work buffer of %zu bytes (16-byte aligned) is too small "
			       "for %zu", work_bytes, r->work_bytes);
	if (work && r->work_bytes == 0)
		work = NULL;
	if (dst_bytes < r->out_bytes)
		return wc_fail(WC_E_RANGE, "cuda resident: destination holds %zu bytes, the tensors need %llu",
			       dst_bytes, (unsigned long long)r->out_bytes);
	int prev = r->gpu;
	cudaGetDevice(&prev);
	if (prev != r->gpu)
		cudaSetDevice(r->gpu);
	slot *s = NULL;
	wc_err e = slot_for(r, (uintptr_t)device_dst, work, stream, &s);
	for (size_t k = 0; k < r->nsteps && e == WC_OK; k++) {
		const step *st = &r->steps[k];
		const uint8_t *b = s->d_blob;
		const wcc_merge_tile *tl = (const wcc_merge_tile *)(b + st->d.tiles);
		int le = wcc_launch_rans((const wcc_rans_block *)(b + st->d.blocks), st->d.nblocks,
					 (const wcc_chunk *)(b + st->d.chunks), r->ctx->d_freqs, tl, r->d_status,
					 stream);
		if (!le)
			le = wcc_launch_merge((const wcc_merge_seg *)(b + st->d.segs), st->nsegs, tl, stream);
		if (le)
			e = wcr_cuda_err("kernel launch", (cudaError_t)le);
	}
	for (size_t k = 0; k < r->ncopies && e == WC_OK; k++) {
		const piece_copy *pcp = &r->copies[k];
		cudaError_t ce = cudaMemcpyAsync((uint8_t *)device_dst + pcp->dst_off, s->work + pcp->work_off,
						 pcp->len, cudaMemcpyDeviceToDevice, stream);
		if (ce != cudaSuccess)
			e = wcr_cuda_err("shared tile copy", ce);
	}
	if (e == WC_OK) {
		cudaError_t ce = cudaEventRecord(s->used, stream);
		if (ce != cudaSuccess)
			e = wcr_cuda_err("event", ce);
		s->last = ++r->ndecodes;
	}
	if (prev != r->gpu)
		cudaSetDevice(prev);
	return e;
}

EXPORT wc_err wcodec_cuda_resident_check(const wcodec_cuda_resident *r)
{
	for (size_t i = 0; i < r->ntiles; i++) {
		uint32_t v = __atomic_load_n(&r->h_status[i], __ATOMIC_ACQUIRE);
		if (v)
			return wc_fail(WC_E_CORRUPT, "cuda resident: tensor '%s', tile %u failed the rANS stream checks "
				       "on the GPU", r->pieces[i].name, r->pieces[i].tile);
	}
	return WC_OK;
}

EXPORT uint64_t wcodec_cuda_resident_out_bytes(const wcodec_cuda_resident *r)
{
	return r->out_bytes;
}

EXPORT uint64_t wcodec_cuda_resident_offset(const wcodec_cuda_resident *r, size_t k)
{
	return k < r->ntensors ? r->offsets[k] : UINT64_MAX;
}

EXPORT size_t wcodec_cuda_resident_device_bytes(const wcodec_cuda_resident *r)
{
	size_t b = r->payload_bytes;
	for (unsigned s = 0; s < NSLOT; s++)
		b += (r->slots[s].d_blob ? r->blob_bytes : 0) + (r->slots[s].d_work ? r->work_bytes : 0);
	return b;
}

EXPORT void wcodec_cuda_resident_free(wcodec_cuda_resident *r)
{
	if (!r)
		return;
	int prev = r->gpu;
	cudaGetDevice(&prev);
	cudaSetDevice(r->gpu);
	for (unsigned s = 0; s < NSLOT; s++) {
		if (r->slots[s].used) {
			cudaEventSynchronize(r->slots[s].used);
			cudaEventDestroy(r->slots[s].used);
		}
		cudaFree(r->slots[s].d_blob);
		cudaFree(r->slots[s].d_work);
	}
	cudaFree(r->d_payload);
	if (r->h_status)
		cudaFreeHost(r->h_status);
	if (r->h_stage)
		cudaFreeHost(r->h_stage);
	cudaSetDevice(prev);
	free(r->offsets);
	free(r->copies);
	free(r->blob);
	free(r->steps);
	free(r->pieces);
	if (r->c)
		wc_container_release(r->c);
	free(r);
}
