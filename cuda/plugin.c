/*
 * plugin.c - the CUDA decode backend (engine/backend.h) over a wcc_ctx:
 * decode jobs whose payloads and outputs are host memory, through pinned
 * staging buffers and several CUDA streams, every output checked against
 * its dhash (wcc_device.h).
 */
#include <stdlib.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "core/limits.h"
#include "tx_decode.h"
#include "vq_gather.h"
#include "vq_nearest.h"
#include "wcc_device.h"
#include "wcc_impl.h"
#include "wcodec_cuda.h"

#define EXPORT __attribute__((visibility("default")))

typedef struct cuda_backend {
	wc_backend base;
	wcc_ctx *ctx;
	wcc_vq *vq; /* .qvq image tiles (WC_JOB_VQ), vq_gather.h */
	wcc_tx *tx; /* transform-mode image tiles into device memory (WC_JOB_TX), tx_decode.h */
	int gpu;
} cuda_backend;

static wc_err cuda_decode(wc_backend *be, wc_tile_job *jobs, size_t n)
{
	cuda_backend *cb = (cuda_backend *)be;
	if (wcc_vq_any(jobs, n))
		return wcc_vq_decode_mixed(cb->vq, jobs, n);
	return wcc_decode(cb->ctx, jobs, n, NULL);
}

static void cuda_destroy(wc_backend *be)
{
	cuda_backend *cb = (cuda_backend *)be;
	if (!cb)
		return;
	wcc_vq_destroy(cb->vq);
	wcc_tx_destroy(cb->tx);
	wcc_ctx_destroy(cb->ctx);
	free(cb);
}

/* The .qvq encoder's k-means search (vq_nearest.h), found by name
 * (wc_backend_symbol) rather than through the decode interface. */
EXPORT wc_err wcodec_cuda_vq_nearest(int gpu, const uint8_t *codebook, uint32_t k, uint32_t dim,
				     const uint8_t *points, uint64_t n, uint16_t *out)
{
	return wcc_vq_nearest(gpu, codebook, k, dim, points, n, out);
}

/* .qvq images straight into device memory (wcodec_cuda.h), found by name
 * (wc_backend_symbol) by libwcodec's image reader. */
EXPORT wc_err wcodec_cuda_vq_place(wc_backend *be, wc_tile_job *jobs, size_t n, const void *dsts, size_t ndst,
				   void *stream)
{
	if (!be || be->ops->decode != cuda_decode)
		return wc_fail(WC_E_INVAL, "cuda: wcodec_cuda_vq_place needs the CUDA backend");
	if (wcc_tx_any(jobs, n))
		return wcc_tx_place(((cuda_backend *)be)->tx, jobs, n, (const struct wc_qvq_image_dst *)dsts, ndst,
				    stream);
	return wcc_vq_place(((cuda_backend *)be)->vq, jobs, n, (const struct wc_qvq_image_dst *)dsts, ndst,
			    stream);
}

/* Transform-mode archives resident in GPU memory (wcodec_cuda.h), found by
 * name by libwcodec's image reader. */
EXPORT wc_err wcodec_cuda_tx_resident_create(wc_backend *be, wc_tile_job *jobs, size_t n, uint64_t max_bytes,
					     void **out)
{
	if (!be || be->ops->decode != cuda_decode)
		return wc_fail(WC_E_INVAL, "cuda: wcodec_cuda_tx_resident_create needs the CUDA backend");
	return wcc_tx_resident_create(((cuda_backend *)be)->gpu, jobs, n, max_bytes, (wcc_tx_resident **)out);
}

EXPORT wc_err wcodec_cuda_tx_resident_launch(void *r, const int64_t *idx, size_t n, int chw, int f32,
					     const float scale[3], const float bias[3], void *out, size_t out_stride,
					     void *stream, uint64_t *ticket)
{
	return wcc_tx_resident_launch(r, idx, n, chw, f32, scale, bias, out, out_stride, stream, ticket);
}

EXPORT wc_err wcodec_cuda_tx_resident_wait(void *r, uint64_t ticket)
{
	return wcc_tx_resident_wait(r, ticket);
}

EXPORT void wcodec_cuda_tx_resident_free(void *r)
{
	wcc_tx_resident_free(r);
}

static void cuda_host_free(void *p, size_t bytes)
{
	(void)bytes;
	wcodec_cuda_host_free(p);
}

static const wc_backend_ops cuda_ops = {
	.name = "cuda",
	.decode = cuda_decode,
	.destroy = cuda_destroy,
	/* page-locked cache buffers: wcc_device.c DMAs payloads from them and
	 * decoded tiles into them, skipping its staging buffers */
	.host_alloc = wcodec_cuda_host_alloc,
	.host_free = cuda_host_free,
};

EXPORT wc_err wcodec_cuda_backend_create_v5(const wc_backend_opts *opts, wc_backend **out)
{
	wc_backend_opts def = { 0 };
	if (!opts)
		opts = &def;
	unsigned cpus = wc_cpu_count();
	unsigned threads = opts->threads ? opts->threads : (cpus > 1 ? cpus / 2 : 1);
	if (threads > 8)
		threads = 8;
	/* Decode calls in flight at once (the cache's dispatcher threads): each
	 * holds one lane while it reads its next batch's payloads, so there is
	 * one lane more than calls. Six: on an H200 with 4 readers through
	 * the mount, 2 calls gave 5754 MB/s, 3 gave 6903, 4 gave 7253-7481
	 * (docs/BENCHMARKS.md, "GPU backend through the mount"); once no dispatcher allocated
	 * page-locked memory while reading, 6 calls read four streams in a
	 * median of 268-272 ms against 281-285 with 4 (18 runs each, section
	 * 13). */
	const unsigned calls = 6;
	wcc_ctx_opts co = {
		.gpu = opts->gpu,
		.memory_limit = opts->gpu_memory_limit,
		.lanes = calls + 1,
		/* the caller's thread works too */
		.host_threads = threads > 1 ? threads - 1 : 1,
		.fault_every_batch = opts->gpu_fault_every_batch,
	};
	cuda_backend *cb = calloc(1, sizeof(*cb));
	if (!cb)
		return wc_fail(WC_E_NOMEM, "cuda: backend");
	wc_err e = wcc_ctx_create(&co, &cb->ctx);
	if (e != WC_OK) {
		free(cb);
		return e;
	}
	cb->gpu = opts->gpu;
	if ((e = wcc_vq_create(cb->ctx, opts->gpu, &cb->vq)) != WC_OK ||
	    (e = wcc_tx_create(opts->gpu, &cb->tx)) != WC_OK) {
		wcc_vq_destroy(cb->vq);
		wcc_ctx_destroy(cb->ctx);
		free(cb);
		return e;
	}
	size_t mib = wcc_ctx_lane_bytes(cb->ctx) >> 20;
	cb->base.ops = &cuda_ops;
	/* two lanes' worth of 1 MiB tiles per call keeps copy and decode overlapped */
	cb->base.max_batch = (uint32_t)(2 * mib < 16 ? 16 : 2 * mib);
	cb->base.concurrency = calls;
	/* A GPU decodes fast only in batches of many tiles, so readers should
	 * read further ahead: on an H200, +24-33% for one sequential reader with
	 * less CPU time (docs/BENCHMARKS.md, "GPU backend through the mount"). */
	cb->base.readahead_tiles = 16;
	/* A one-tile call's round trip (0.3-0.65 ms) is longer than one CPU
	 * thread's decode of a waiting reader's tile: one stream read 9% faster
	 * with reader-side decodes of untaken misses (section 11). */
	cb->base.reader_decodes_misses = true;
	*out = &cb->base;
	return WC_OK;
}

EXPORT void *wcodec_cuda_host_alloc(size_t bytes)
{
	void *p = NULL;
	if (cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable) != cudaSuccess) {
		cudaGetLastError();
		return NULL;
	}
	wcc_pinned_add(p, bytes ? bytes : 1);
	return p;
}

EXPORT void wcodec_cuda_host_free(void *p)
{
	if (p) {
		wcc_pinned_remove(p);
		cudaFreeHost(p);
	}
}
