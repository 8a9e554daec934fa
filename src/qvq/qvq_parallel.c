/* qvq_parallel.c - parallel-for over contiguous slices, on the engine's
 * thread pool (engine/threadpool.h), the one threading mechanism of the
 * library. */
#include "qvq/qvq_parallel.h"

#include "engine/threadpool.h"

struct slices {
	void (*fn)(void *, unsigned, size_t, size_t);
	void *ctx;
	unsigned nslices;
	size_t n;
};

static void run_slice(void *p, size_t s)
{
	const struct slices *a = p;
	a->fn(a->ctx, (unsigned)s, a->n * s / a->nslices, a->n * (s + 1) / a->nslices);
}

void wc_qvq_parallel(unsigned nthreads, size_t n,
		     void (*fn)(void *ctx, unsigned slice, size_t begin, size_t end), void *ctx)
{
	if (nthreads <= 1) {
		fn(ctx, 0, 0, n);
		return;
	}
	struct slices a = {fn, ctx, nthreads, n};
	/* The caller works too, so nthreads - 1 workers. Without them (no
	 * memory, no threads) every slice runs here: same slices, same result. */
	wc_threadpool *pool = NULL;
	if (wc_threadpool_create(nthreads - 1, &pool) != WC_OK) {
		for (unsigned s = 0; s < nthreads; s++)
			run_slice(&a, s);
		return;
	}
	wc_threadpool_run(pool, run_slice, &a, nthreads);
	wc_threadpool_destroy(pool);
}
