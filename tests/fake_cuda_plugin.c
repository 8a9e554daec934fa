/*
 * fake_cuda_plugin.c - a stand-in for the CUDA plugin (cuda/plugin.c),
 * built as tests/fakeplugin/wcodec-cuda.so so test_backend exercises the real
 * dlopen()/dlsym() path of wc_backend_create("cuda"). It decodes on the CPU.
 * $WCODEC_FAKE_PLUGIN_MODE picks a behaviour:
 *   unset   - create succeeds (max_batch 7, concurrency 3, readahead_tiles
 *             11, reader_decodes_misses), decode works;
 *   "nogpu" - create fails with WC_E_BACKEND, as with no driver or device;
 *   "fail"  - decode (and wcodec_cuda_vq_nearest) scribble over the outputs
 *             and return WC_E_BACKEND.
 * Its wcodec_cuda_vq_nearest (found by wc_backend_symbol) is a brute-force search (every entry, lowest index on
 * ties), the reference the real plugin's kernel and the CPU search agree
 * with; pack-images through it must write the CPU's archive byte for byte.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"

wc_err wcodec_cuda_backend_create_v5(const wc_backend_opts *opts, wc_backend **out);
wc_err wcodec_cuda_vq_nearest(int gpu, const uint8_t *codebook, uint32_t k, uint32_t dim, const uint8_t *points,
			      uint64_t n, uint16_t *out);

static wc_err fake_decode(wc_backend *be, wc_tile_job *jobs, size_t n)
{
	(void)be;
	const char *mode = getenv("WCODEC_FAKE_PLUGIN_MODE");
	if (mode && strcmp(mode, "fail") == 0) {
		for (size_t i = 0; i < n; i++)
			memset(jobs[i].out, 0x5A, jobs[i].out_size);
		return wc_fail(WC_E_BACKEND, "fake plugin: device lost");
	}
	for (size_t i = 0; i < n; i++)
		wc_decode_job_cpu(&jobs[i]);
	return WC_OK;
}

static void fake_destroy(wc_backend *be) { free(be); }

wc_err wcodec_cuda_vq_nearest(int gpu, const uint8_t *codebook, uint32_t k, uint32_t dim, const uint8_t *points,
			      uint64_t n, uint16_t *out)
{
	(void)gpu;
	const char *mode = getenv("WCODEC_FAKE_PLUGIN_MODE");
	if (mode && strcmp(mode, "fail") == 0) {
		memset(out, 0x5A, n * sizeof *out);
		return wc_fail(WC_E_BACKEND, "fake plugin: device lost");
	}
	for (uint64_t i = 0; i < n; i++) {
		const uint8_t *x = points + i * dim;
		uint32_t best = UINT32_MAX, bi = 0;
		for (uint32_t c = 0; c < k; c++) {
			const uint8_t *y = codebook + (size_t)c * dim;
			uint32_t d = 0;
			for (uint32_t j = 0; j < dim; j++)
				d += (uint32_t)(((int)x[j] - y[j]) * ((int)x[j] - y[j]));
			if (d < best) {
				best = d;
				bi = c;
			}
		}
		out[i] = (uint16_t)bi;
	}
	return WC_OK;
}

static const wc_backend_ops fake_ops = {
	.name = "fake-cuda",
	.decode = fake_decode,
	.destroy = fake_destroy,
};

wc_err wcodec_cuda_backend_create_v5(const wc_backend_opts *opts, wc_backend **out)
{
	(void)opts;
	const char *mode = getenv("WCODEC_FAKE_PLUGIN_MODE");
	if (mode && strcmp(mode, "nogpu") == 0)
		return wc_fail(WC_E_BACKEND, "fake plugin: no CUDA-capable device is detected");
	wc_backend *be = calloc(1, sizeof *be);
	if (!be)
		return wc_fail(WC_E_NOMEM, "fake plugin");
	be->ops = &fake_ops;
	be->max_batch = 7;
	be->concurrency = 3;
	be->readahead_tiles = 11;
	be->reader_decodes_misses = true;
	*out = be;
	return WC_OK;
}
