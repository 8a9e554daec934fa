/*
 * qvq_parallel.h - a parallel-for over an index range for the encoder
 * (image loading, k-means, assignment, tile coding), on the engine's thread
 * pool. Work is cut into `nthreads` contiguous slices, so results that are
 * reduced per slice and then combined in slice order do not depend on
 * scheduling.
 */
#ifndef WC_QVQ_PARALLEL_H
#define WC_QVQ_PARALLEL_H

#include <stddef.h>

/* fn(ctx, slice, begin, end) is called once per slice [begin, end) of
 * [0, n), slice s being [n*s/nthreads, n*(s+1)/nthreads); slices are
 * numbered 0..nthreads-1 (some may be empty). The calling thread works on
 * them with nthreads - 1 pool workers started for the call; with
 * nthreads <= 1, or when the workers cannot be started, it runs them all.
 * Returns when every slice has run; it cannot fail. */
void wc_qvq_parallel(unsigned nthreads, size_t n,
		     void (*fn)(void *ctx, unsigned slice, size_t begin, size_t end), void *ctx);

#endif /* WC_QVQ_PARALLEL_H */
