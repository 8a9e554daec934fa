/*
 * vq_nearest.h - k-means' nearest-entry search on the GPU, for `wcodec
 * pack-images` (exported as wcodec_cuda_vq_nearest, wcodec_cuda.h; the CPU
 * search is src/qvq/kmeans.c). Plain C so the plugin's host code stays C11.
 *
 * Brute force, exact: every vector is compared with every entry, squared
 * Euclidean distance in integers (per-byte absolute differences, then
 * sums of their squares: __vabsdiffu4 and __dp4a), entries scanned in
 * index order keeping the first strictly smaller distance, so ties go to
 * the lowest index: the answer of the CPU search, bit for bit.
 */
#ifndef WCC_VQ_NEAREST_H
#define WCC_VQ_NEAREST_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "core/wc_error.h"

/* The vector sizes the kernel takes: a multiple of 4 bytes up to 16 (the
 * 2x2 RGB patches of .qvq are 12). */
#define WCC_VQ_NEAREST_MAX_DIM 16u

/* For each of n vectors of dim bytes at points (host memory), out[i] = the
 * index of the nearest of the k entries of dim bytes at codebook (host
 * memory, 1 <= k <= 65536), on GPU `gpu`. Vectors go to the device in
 * slices of at most 2^23 (a sixth of a GiB at dim 12), so device memory
 * stays bounded whatever n is. Errors: WC_E_UNSUPPORTED (dim not a
 * multiple of 4 in [4, 16], or k out of range), WC_E_BACKEND (a CUDA call
 * failed, with its message; out may hold anything), WC_E_NOMEM. */
wc_err wcc_vq_nearest(int gpu, const uint8_t *codebook, uint32_t k, uint32_t dim,
		      const uint8_t *points, uint64_t n, uint16_t *out);

#ifdef __cplusplus
}
#endif

#endif /* WCC_VQ_NEAREST_H */
