/*
 * vq_nearest.cu - k-means' nearest-entry search on the GPU (vq_nearest.h).
 *
 * One thread per vector, its W words in registers; the codebook passes
 * through shared memory a slice at a time, every thread of a warp reading
 * the same entry (a broadcast, no bank conflicts). The distance of two
 * vectors of 4W bytes is sum over words of dp4a(d, d) with d the per-byte
 * absolute differences: exact integers (at most 16 * 255^2), so the result
 * is the CPU's whatever the order of additions.
 */
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "vq_nearest.h"

#define NN_THREADS 256u
#define NN_SLICE 2048u               /* entries per shared-memory slice */
#define NN_MAX_POINTS (1ull << 23)   /* vectors per device pass */

template <int W>
__global__ void nearest_kernel(const uint32_t *__restrict__ cb, uint32_t k,
			       const uint32_t *__restrict__ pts, uint32_t n,
			       uint16_t *__restrict__ out)
{
	__shared__ uint32_t sc[NN_SLICE * W];
	const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
	const bool live = i < n;
	uint32_t x[W];
#pragma unroll
	for (int w = 0; w < W; w++)
		x[w] = live ? pts[(size_t)i * W + w] : 0u;
	uint32_t best = 0xffffffffu, bi = 0;
	for (uint32_t base = 0; base < k; base += NN_SLICE) {
		const uint32_t m = k - base < NN_SLICE ? k - base : NN_SLICE;
		__syncthreads(); /* the previous slice is no longer read */
		for (uint32_t t = threadIdx.x; t < m * W; t += blockDim.x)
			sc[t] = cb[(size_t)base * W + t];
		__syncthreads();
		if (!live || best == 0)
			continue; /* an exact match cannot be beaten */
		for (uint32_t j = 0; j < m; j++) {
			uint32_t d = 0;
#pragma unroll
			for (int w = 0; w < W; w++) {
				const uint32_t a = __vabsdiffu4(x[w], sc[j * W + w]);
				d = __dp4a(a, a, d);
			}
			if (d < best) { /* strictly: the lowest index keeps a tie */
				best = d;
				bi = base + j;
			}
		}
	}
	if (live)
		out[i] = (uint16_t)bi;
}

typedef void (*launch_fn)(const uint32_t *, uint32_t, const uint32_t *, uint32_t, uint16_t *,
			  cudaStream_t);

template <int W>
static void launch(const uint32_t *cb, uint32_t k, const uint32_t *pts, uint32_t n, uint16_t *out,
		   cudaStream_t s)
{
	nearest_kernel<W><<<(n + NN_THREADS - 1) / NN_THREADS, NN_THREADS, 0, s>>>(cb, k, pts, n, out);
}

static wc_err cuda_fail(cudaError_t e, const char *what)
{
	return wc_fail(WC_E_BACKEND, "cuda k-means search: %s: %s", what, cudaGetErrorString(e));
}

extern "C" wc_err wcc_vq_nearest(int gpu, const uint8_t *codebook, uint32_t k, uint32_t dim,
				 const uint8_t *points, uint64_t n, uint16_t *out)
{
	static const launch_fn by_words[5] = {NULL, launch<1>, launch<2>, launch<3>, launch<4>};
	if (dim % 4 || dim < 4 || dim > WCC_VQ_NEAREST_MAX_DIM || k < 1 || k > 65536)
		return wc_fail(WC_E_UNSUPPORTED, "cuda k-means search: vectors of %u bytes, %u entries",
			       dim, k);
	if (n == 0)
		return WC_OK;
	const uint64_t slice = n < NN_MAX_POINTS ? n : NN_MAX_POINTS;
	cudaError_t ce = cudaSetDevice(gpu);
	if (ce != cudaSuccess)
		return cuda_fail(ce, "cudaSetDevice");
	cudaStream_t s = NULL;
	uint8_t *dcb = NULL, *dpts = NULL;
	uint16_t *dout = NULL;
	wc_err e = WC_OK;
	if ((ce = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)) != cudaSuccess ||
	    (ce = cudaMalloc((void **)&dcb, (size_t)k * dim)) != cudaSuccess ||
	    (ce = cudaMalloc((void **)&dpts, (size_t)slice * dim)) != cudaSuccess ||
	    (ce = cudaMalloc((void **)&dout, (size_t)slice * sizeof *dout)) != cudaSuccess) {
		e = cuda_fail(ce, "setting up");
		goto out;
	}
	if ((ce = cudaMemcpyAsync(dcb, codebook, (size_t)k * dim, cudaMemcpyHostToDevice, s)) !=
	    cudaSuccess) {
		e = cuda_fail(ce, "codebook copy");
		goto out;
	}
	for (uint64_t at = 0; at < n; at += slice) {
		const uint32_t m = (uint32_t)(n - at < slice ? n - at : slice);
		if ((ce = cudaMemcpyAsync(dpts, points + at * dim, (size_t)m * dim,
					  cudaMemcpyHostToDevice, s)) != cudaSuccess) {
			e = cuda_fail(ce, "vector copy");
			break;
		}
		by_words[dim / 4]((const uint32_t *)dcb, k, (const uint32_t *)dpts, m, dout, s);
		if ((ce = cudaGetLastError()) != cudaSuccess) {
			e = cuda_fail(ce, "kernel launch");
			break;
		}
		if ((ce = cudaMemcpyAsync(out + at, dout, (size_t)m * sizeof *dout,
					  cudaMemcpyDeviceToHost, s)) != cudaSuccess ||
		    (ce = cudaStreamSynchronize(s)) != cudaSuccess) {
			e = cuda_fail(ce, "kernel or result copy");
			break;
		}
	}
out:
	cudaFree(dcb);
	cudaFree(dpts);
	cudaFree(dout);
	if (s)
		cudaStreamDestroy(s);
	return e;
}
