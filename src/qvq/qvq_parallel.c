/* qvq_parallel.c - parallel-for over contiguous slices with pthreads. */
#include "qvq/qvq_parallel.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct slice_arg {
	void (*fn)(void *, unsigned, size_t, size_t);
	void *ctx;
	unsigned slice;
	size_t begin, end;
};

static void *run_slice(void *p)
{
	struct slice_arg *a = p;
	a->fn(a->ctx, a->slice, a->begin, a->end);
	return NULL;
}

wc_err wc_qvq_parallel(unsigned nthreads, size_t n,
		       void (*fn)(void *ctx, unsigned slice, size_t begin, size_t end), void *ctx)
{
	if (nthreads <= 1) {
		fn(ctx, 0, 0, n);
		return WC_OK;
	}
	struct slice_arg *args = calloc(nthreads, sizeof *args);
	pthread_t *tids = calloc(nthreads, sizeof *tids);
	if (!args || !tids) {
		free(args);
		free(tids);
		return wc_fail(WC_E_NOMEM, "no memory for %u threads", nthreads);
	}
	unsigned started = 1; /* threads 1..started-1 run */
	for (unsigned s = 0; s < nthreads; s++) {
		args[s] = (struct slice_arg){fn, ctx, s, n * s / nthreads, n * (s + 1) / nthreads};
		if (s > 0 && started == s && pthread_create(&tids[s], NULL, run_slice, &args[s]) == 0)
			started = s + 1;
	}
	/* Slice 0, and any slice whose thread could not start, run here: same
	 * slices, same result. */
	run_slice(&args[0]);
	for (unsigned s = started; s < nthreads; s++)
		run_slice(&args[s]);
	for (unsigned s = 1; s < started; s++)
		pthread_join(tids[s], NULL);
	free(args);
	free(tids);
	return WC_OK;
}

