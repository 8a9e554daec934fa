/*
 * direct.c - decoding tensors straight into caller-owned device memory
 * (wcodec_cuda.h): payloads are read and chash-checked on the host, then
 * decoded by the same batch pipeline as the backend with device targets.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "wcc_device.h"
#include "wcodec_cuda.h"

#define EXPORT __attribute__((visibility("default")))
#define MAX_GPUS 64
/* compressed bytes read per round (bounds host memory for huge tensors) */
#define GROUP_BYTES ((size_t)256 << 20)

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static wcc_ctx *g_ctx[MAX_GPUS];

/* The process-wide context of a GPU, created on first use. */
static wc_err get_ctx(int gpu, wcc_ctx **out)
{
	if (gpu < 0 || gpu >= MAX_GPUS)
		return wc_fail(WC_E_BACKEND, "cuda: GPU ordinal %d out of range", gpu);
	wc_err e = WC_OK;
	pthread_mutex_lock(&g_mu);
	if (!g_ctx[gpu]) {
		wcc_ctx_opts o = { .gpu = gpu, .memory_limit = 0, .lanes = 3, .host_threads = 3 };
		e = wcc_ctx_create(&o, &g_ctx[gpu]);
	}
	*out = g_ctx[gpu];
	pthread_mutex_unlock(&g_mu);
	return e;
}

EXPORT wc_err wcodec_cuda_decode_jobs(wc_tile_job *jobs, size_t n, void *const *device_dst, int gpu)
{
	wcc_ctx *ctx;
	wc_err e = get_ctx(gpu, &ctx);
	if (e != WC_OK)
		return e;
	return wcc_decode(ctx, jobs, n, (uint8_t *const *)device_dst);
}

EXPORT wc_err wcodec_cuda_decode_tensor_c(wc_container *c, const char *tensor_name, void *device_dst,
					  size_t dst_bytes, int gpu, cudaStream_t stream)
{
	uint64_t begin, end;
	uint32_t first, count;
	if (tensor_name) {
		uint32_t ti;
		wc_err e = wc_container_find_tensor(c, tensor_name, &ti);
		if (e != WC_OK)
			return wc_fail(WC_E_NOTFOUND, "cuda: no tensor '%s' in the file", tensor_name);
		const wc_tensor_info *t = wc_container_tensor(c, ti);
		begin = t->begin;
		end = t->end;
		first = t->first_tile;
		count = t->ntiles;
	} else {
		size_t plen;
		wc_container_prefix(c, &plen);
		begin = plen;
		end = wc_container_virtual_size(c);
		first = 0;
		count = wc_container_ntiles(c);
	}
	if (end - begin > dst_bytes)
		return wc_fail(WC_E_RANGE, "cuda: destination holds %zu bytes, the tensor needs %llu", dst_bytes,
			       (unsigned long long)(end - begin));
	wcc_ctx *ctx;
	wc_err err = get_ctx(gpu, &ctx);
	if (err != WC_OK)
		return err;
	if (stream) {
		cudaError_t ce = cudaStreamSynchronize(stream);
		if (ce != cudaSuccess)
			return wc_fail(WC_E_BACKEND, "cuda: caller's stream: %s", cudaGetErrorString(ce));
	}
	wc_tile_source *src = wc_container_source(c);
	wc_tile_job *jobs = calloc(count ? count : 1, sizeof(*jobs));
	uint8_t **dst = calloc(count ? count : 1, sizeof(*dst));
	uint8_t *buf = NULL;
	size_t bufcap = 0;
	if (!jobs || !dst) {
		err = wc_fail(WC_E_NOMEM, "cuda: job list");
		goto out;
	}
	/* tiles in groups of about GROUP_BYTES of payload */
	for (uint32_t g = 0; g < count && err == WC_OK;) {
		size_t bytes = 0;
		uint32_t k = 0;
		while (g + k < count && (k == 0 || bytes + wc_container_tile(c, first + g + k)->csize <= GROUP_BYTES))
			bytes += wc_container_tile(c, first + g + k++)->csize;
		if (bytes > bufcap) {
			uint8_t *nb = realloc(buf, bytes);
			if (!nb) {
				err = wc_fail(WC_E_NOMEM, "cuda: payload buffer of %zu bytes", bytes);
				break;
			}
			buf = nb;
			bufcap = bytes;
		}
		size_t off = 0;
		for (uint32_t i = 0; i < k && err == WC_OK; i++) {
			const uint32_t tile = first + g + i;
			const wc_tile_info *ti = wc_container_tile(c, tile);
			if (ti->voff < begin || ti->voff + ti->dsize > end) {
				err = wc_fail(WC_E_FORMAT, "cuda: tile %u lies outside its tensor", tile);
				break;
			}
			err = wc_container_read_payload(c, tile, buf + off);
			if (err != WC_OK)
				break;
			wc_tile_job *job = &jobs[g + i];
			memset(job, 0, sizeof(*job));
			src->ops->describe_job(src, tile, job);
			job->payload = buf + off;
			job->payload_size = ti->csize;
			job->out = NULL;
			job->out_size = ti->dsize;
			dst[g + i] = (uint8_t *)device_dst + (ti->voff - begin);
			off += ti->csize;
		}
		if (err != WC_OK)
			break;
		err = wcc_decode(ctx, jobs + g, k, dst + g);
		for (uint32_t i = 0; i < k && err == WC_OK; i++)
			if (jobs[g + i].status != WC_OK)
				err = wc_fail(jobs[g + i].status, "cuda: tile %u: %s", first + g + i,
					      jobs[g + i].detail[0] ? jobs[g + i].detail : wc_strerror(jobs[g + i].status));
		g += k;
	}
out:
	free(buf);
	free(dst);
	free(jobs);
	return err;
}

EXPORT wc_err wcodec_cuda_decode_tensor(const char *wcodec_path, const char *tensor_name, void *device_dst,
					size_t dst_bytes, int gpu, cudaStream_t stream)
{
	wc_container *c;
	wc_err e = wc_container_open(wcodec_path, &c);
	if (e != WC_OK)
		return e;
	e = wcodec_cuda_decode_tensor_c(c, tensor_name, device_dst, dst_bytes, gpu, stream);
	wc_container_release(c);
	return e;
}
