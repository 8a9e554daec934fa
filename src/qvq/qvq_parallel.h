/*
 * qvq_parallel.h - a minimal parallel-for over an index range with POSIX
 * threads, for the encoder (k-means, assignment, tile coding). Work is cut
 * into `nthreads` contiguous slices, so results that are reduced per slice
 * and then combined in slice order do not depend on scheduling.
 */
#ifndef WC_QVQ_PARALLEL_H
#define WC_QVQ_PARALLEL_H

#include <stddef.h>

#include "core/wc_error.h"

/* fn(ctx, slice, begin, end) is called once per slice [begin, end) of
 * [0, n); slices are numbered 0..nthreads-1 (some may be empty). Runs on
 * the calling thread when nthreads <= 1. Errors: WC_E_NOMEM/WC_E_IO if
 * threads cannot be started (then nothing ran). */
wc_err wc_qvq_parallel(unsigned nthreads, size_t n,
		       void (*fn)(void *ctx, unsigned slice, size_t begin, size_t end), void *ctx);

#endif /* WC_QVQ_PARALLEL_H */
