/*
 * direct.c - decoding tensors straight into caller-owned device memory
 * (wcodec_cuda.h): whole tensors go through the pipelined loader
 * (loader.c); job lists through the batch pipeline with device targets.
 */
#include <stdlib.h>
#include <string.h>

#include "wcc_device.h"
#include "wcodec_cuda.h"

#define EXPORT __attribute__((visibility("default")))
static wcc_ctx *g_ctx[WCC_MAX_GPUS];

/* The process-wide context of a GPU, created on first use. */
static wc_err get_ctx(int gpu, wcc_ctx **out)
{
	wcc_ctx_opts o = { .gpu = gpu, .memory_limit = 0, .lanes = 3, .host_threads = 3 };
	return wcc_ctx_once(g_ctx, &o, out);
}

EXPORT wc_err wcodec_cuda_decode_jobs(wc_tile_job *jobs, size_t n, void *const *device_dst, int gpu)
{
	wcc_ctx *ctx = NULL;
	wc_err e = get_ctx(gpu, &ctx);
	if (e != WC_OK)
		return e;
	/* after the work queued on gpu's default stream (the lanes' streams
	 * are non-blocking and would not wait for it); the caller's current
	 * device is left as it was */
	int prev = gpu;
	cudaError_t ce = cudaGetDevice(&prev);
	if (ce == cudaSuccess)
		ce = cudaSetDevice(gpu);
	if (ce == cudaSuccess)
		ce = cudaStreamSynchronize(0);
	if (prev != gpu)
		cudaSetDevice(prev);
	if (ce != cudaSuccess)
		return wc_fail(WC_E_BACKEND, "cuda: default stream: %s", cudaGetErrorString(ce));
	return wcc_decode(ctx, jobs, n, (uint8_t *const *)device_dst);
}

EXPORT wc_err wcodec_cuda_decode_tensor_c(wc_container *c, const char *tensor_name, void *device_dst,
					  size_t dst_bytes, int gpu, cudaStream_t stream)
{
	size_t plen;
	wc_container_prefix(c, &plen);
	uint64_t begin = plen, end = wc_container_virtual_size(c);
	if (tensor_name) {
		uint32_t ti;
		if (wc_container_find_tensor(c, tensor_name, &ti) != WC_OK)
			return wc_fail(WC_E_NOTFOUND, "cuda: no tensor '%s' in the file", tensor_name);
		begin = wc_container_tensor(c, ti)->begin;
		end = wc_container_tensor(c, ti)->end;
	}
	if (end - begin > dst_bytes)
		return wc_fail(WC_E_RANGE, "cuda: destination holds %zu bytes, the tensor needs %llu", dst_bytes,
			       (unsigned long long)(end - begin));
	/* NULL is the default stream, whose queued work (a cudaMemset of the
	 * destination) must finish first too: the loader's streams are
	 * non-blocking and do not wait for it. */
	cudaError_t ce = cudaStreamSynchronize(stream);
	if (ce != cudaSuccess)
		return wc_fail(WC_E_BACKEND, "cuda: caller's stream: %s", cudaGetErrorString(ce));
	wc_tensor_file *f;
	wc_err e = wc_tensor_file_of_container(c, "(container)", &f);
	if (e != WC_OK)
		return e;
	wc_load_range r = { .file = 0, .offset = begin - plen, .length = end - begin, .dst = device_dst };
	e = wcodec_cuda_load(&f, 1, &r, 1, gpu, NULL, NULL);
	wc_tensor_file_close(f);
	return e;
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
