/*
 * kmeans.h - codebook training for .qvq: k-means over uint8 patch vectors.
 *
 * Algorithm: k-means++ seeding (Arthur & Vassilvitskii, "k-means++: the
 * advantages of careful seeding", SODA 2007) on a random sample, then Lloyd
 * iterations (Lloyd, "Least squares quantization in PCM", 1982) on a larger
 * sample, with centroids rounded to uint8 after each step. Nearest-entry
 * search is exact: entries sorted by their component sum, scanned outward
 * from the query's sum and stopped by the bound (sum(x) - sum(c))^2 <=
 * dim * |x - c|^2 (Cauchy-Schwarz), the "mean-ordered" search of VQ
 * literature (e.g. Ra & Kim, IEEE TCSVT 1993); inside that window a
 * candidate is skipped without a distance computation when the lower bound
 * (sum(x) - sum(c))^2 / dim + (perp(x) - perp(c))^2 (perp: the distance
 * from the grey axis) exceeds the best distance so far. Ties go to the
 * lowest index.
 *
 * Results depend only on the data and the seed, never on the thread count:
 * the random choices are made on one thread, the seeding's distance updates
 * (spread over threads when they are wide) touch disjoint blocks of the
 * sample, and per-thread partial sums are integers.
 */
#ifndef WC_KMEANS_H
#define WC_KMEANS_H

#include <stdint.h>

#include "core/wc_error.h"

#define WC_KMEANS_MAX_DIM 64u

typedef struct wc_kmeans_opts {
	uint32_t k;           /* entries wanted, 1..65536 */
	uint32_t dim;         /* bytes per vector, 1..WC_KMEANS_MAX_DIM */
	uint64_t seed;
	unsigned threads;     /* 0 = online CPUs */
	uint32_t iterations;  /* Lloyd iterations at most; 0 = 10 */
	uint64_t train_points;/* Lloyd sample size; 0 = min(n, max(2^18, 32k)) capped at 2^21 */
	uint64_t seed_points; /* k-means++ sample size; 0 = min(train, max(2^14, 4k)) */
	/* Progress: stage 0 seeding (done/total centres), 1 Lloyd (iteration). */
	void (*progress)(void *ctx, int stage, uint64_t done, uint64_t total);
	void *progress_ctx;
	/* Optional: the nearest-entry search of the Lloyd iterations and of
	 * wc_kmeans_assign_opts done elsewhere (a GPU: the CUDA plugin's
	 * wcodec_cuda_vq_nearest), for n vectors at once. It must give the CPU search's
	 * answer (exact, lowest index on ties), so the codebook does not depend
	 * on it. On an error the search goes back to the CPU for the rest of the
	 * call, with a warning (wc_log), or silently for WC_E_UNSUPPORTED (a
	 * search that does not take these vectors). NULL: the CPU. */
	wc_err (*nearest)(void *ctx, const uint8_t *codebook, uint32_t k, uint32_t dim,
			  const uint8_t *points, uint64_t n, uint16_t *out);
	void *nearest_ctx;
} wc_kmeans_opts;

/* Train a codebook on n vectors of opts->dim bytes at points. Writes up to
 * k entries (k * dim bytes) to codebook and their number to *k_out: fewer
 * than k only if the data has fewer distinct vectors. Errors: WC_E_INVAL
 * (k, dim or n == 0), WC_E_NOMEM. */
wc_err wc_kmeans_train(const uint8_t *points, uint64_t n, const wc_kmeans_opts *opts,
		       uint8_t *codebook, uint32_t *k_out);

/* Assign each of n vectors to its nearest entry (squared Euclidean; lowest
 * index on ties): out[i] in [0, k). *sse (may be NULL) receives the sum of
 * squared errors. Errors: WC_E_INVAL, WC_E_NOMEM. */
wc_err wc_kmeans_assign(const uint8_t *codebook, uint32_t k, uint32_t dim, const uint8_t *points,
			uint64_t n, unsigned threads, uint16_t *out, uint64_t *sse);

/* wc_kmeans_assign with opts->dim, opts->threads and opts->nearest (the
 * same answer wherever it is searched). */
wc_err wc_kmeans_assign_opts(const uint8_t *codebook, uint32_t k, const uint8_t *points,
			     uint64_t n, const wc_kmeans_opts *opts, uint16_t *out, uint64_t *sse);

#endif /* WC_KMEANS_H */
