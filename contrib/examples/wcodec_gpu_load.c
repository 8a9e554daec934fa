/*
 * wcodec_gpu_load.c - an example for model loaders that want weights in GPU
 * memory: each tensor of a .wcodec file is decoded by the CUDA plugin
 * straight into a cudaMalloc()ed buffer (wcodec_cuda_decode_tensor_c, no
 * host round trip of the decoded bytes). As a check, each buffer is then
 * copied back and compared with the CPU decoder's bytes (wc_container_pread).
 *
 *   cc wcodec_gpu_load.c $(pkg-config --cflags wcodec) -I$CUDA/include \
 *      $(pkg-config --libs wcodec) -L$(pkg-config --variable=pkglibdir wcodec) \
 *      -l:wcodec-cuda.so -L$CUDA/lib64 -lcudart -o wcodec_gpu_load
 *   ./wcodec_gpu_load [-g GPU] model.wcodec [TENSOR...]   # all tensors if none named
 *
 * Prints one line per tensor (name, dtype, bytes, "equal"). Exit status: 0
 * when every tensor decoded on the GPU equals the CPU's bytes; 1 on an
 * error or a difference; 3 when no GPU is usable (the plugin's reason on
 * stderr).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "container/container.h"
#include "core/wc_error.h"
#include "wcodec_cuda.h"

/* Decode tensor i on GPU gpu and compare with the CPU's decode. */
static wc_err load_one(wc_container *c, uint32_t i, int gpu)
{
	const wc_tensor_info *t = wc_container_tensor(c, i);
	size_t n = (size_t)(t->end - t->begin);
	void *dev = NULL;
	uint8_t *back = malloc(n ? n : 1), *want = malloc(n ? n : 1);
	wc_err e = back && want ? WC_OK : wc_fail(WC_E_NOMEM, "%zu bytes", n);
	cudaError_t ce = cudaSuccess;
	if (e == WC_OK && (ce = cudaMalloc(&dev, n ? n : 1)) != cudaSuccess)
		e = wc_fail(WC_E_BACKEND, "cudaMalloc of %zu bytes: %s", n, cudaGetErrorString(ce));
	if (e == WC_OK)
		e = wcodec_cuda_decode_tensor_c(c, t->name, dev, n, gpu, NULL);
	if (e == WC_OK && (ce = cudaMemcpy(back, dev, n, cudaMemcpyDeviceToHost)) != cudaSuccess)
		e = wc_fail(WC_E_BACKEND, "cudaMemcpy back: %s", cudaGetErrorString(ce));
	if (e == WC_OK)
		e = wc_container_pread(c, want, n, t->begin);
	if (e == WC_OK && memcmp(back, want, n) != 0)
		e = wc_fail(WC_E_CORRUPT, "the GPU's bytes differ from the CPU's");
	if (e == WC_OK)
		printf("%s\t%s\t%zu\tequal\n", t->name, t->dtype, n);
	if (dev)
		cudaFree(dev);
	free(back);
	free(want);
	return e == WC_OK ? e : wc_fail_context(e, "tensor %s", t->name);
}

int main(int argc, char **argv)
{
	int gpu = 0, a = 1;
	if (argc > 2 && !strcmp(argv[1], "-g")) {
		gpu = atoi(argv[2]);
		a = 3;
	}
	if (a >= argc) {
		fprintf(stderr, "usage: %s [-g GPU] FILE.wcodec [TENSOR...]\n", argv[0]);
		return 2;
	}
	const char *path = argv[a++];
	int ndev = 0;
	cudaError_t ce = cudaGetDeviceCount(&ndev);
	if (ce != cudaSuccess || gpu < 0 || gpu >= ndev || (ce = cudaSetDevice(gpu)) != cudaSuccess) {
		fprintf(stderr, "wcodec_gpu_load: no usable GPU %d: %s\n", gpu,
			ce != cudaSuccess ? cudaGetErrorString(ce) : "no such device");
		return 3;
	}
	wc_container *c;
	wc_err e = wc_container_open(path, &c);
	if (e == WC_OK) {
		if (a == argc) {
			for (uint32_t i = 0; i < wc_container_ntensors(c) && e == WC_OK; i++)
				e = load_one(c, i, gpu);
		}
		for (; a < argc && e == WC_OK; a++) {
			uint32_t i;
			e = wc_container_find_tensor(c, argv[a], &i);
			e = e == WC_OK ? load_one(c, i, gpu) : wc_fail(e, "no tensor named \"%s\"", argv[a]);
		}
		wc_container_release(c);
	}
	if (e != WC_OK) {
		const char *why = wc_last_detail();
		fprintf(stderr, "wcodec_gpu_load: %s: %s%s%s\n", path, wc_strerror(e), *why ? ": " : "", why);
		return e == WC_E_BACKEND ? 3 : 1;
	}
	return 0;
}
