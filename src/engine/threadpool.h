/*
 * threadpool.h - a fixed pool of worker threads that runs parallel loops.
 *
 * wc_threadpool_run(pool, fn, ctx, n) calls fn(ctx, i) once for every i in
 * [0, n) spread over the workers and the calling thread, and returns when
 * all n calls have returned. Several threads may call run at once on one
 * pool; their loops share the workers (each loop is served in the order it
 * arrived, and its caller always works on its own loop, so a run never
 * waits for idle workers to exist).
 */
#ifndef WC_THREADPOOL_H
#define WC_THREADPOOL_H

#include <stddef.h>

#include "core/wc_error.h"

typedef struct wc_threadpool wc_threadpool;

/* Body of a parallel loop: iteration i of n, with the caller's context. */
typedef void (*wc_pool_fn)(void *ctx, size_t i);

/* Start nthreads workers. With 0, every loop runs on its caller alone.
 * Errors: WC_E_NOMEM, WC_E_IO (pthread_create failed, with the reason). */
wc_err wc_threadpool_create(unsigned nthreads, wc_threadpool **out);

/* Stop and join the workers. No run may be in progress. */
void wc_threadpool_destroy(wc_threadpool *pool);

/* Number of worker threads (not counting callers of run). */
unsigned wc_threadpool_threads(const wc_threadpool *pool);

/* Run fn(ctx, i) for i in [0, n) and wait for all of them. Thread-safe. */
void wc_threadpool_run(wc_threadpool *pool, wc_pool_fn fn, void *ctx, size_t n);

#endif /* WC_THREADPOOL_H */
