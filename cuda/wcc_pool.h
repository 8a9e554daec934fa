/*
 * wcc_pool.h - a small fixed pool of host threads for the CUDA plugin's CPU
 * work around the GPU: copying payloads into pinned staging buffers,
 * copying decoded tiles out of them and checking their XXH3-64 dhash, and
 * decoding the tiles the GPU cannot (zstd planes) with the CPU reference.
 */
#ifndef WCC_POOL_H
#define WCC_POOL_H

#include <stddef.h>

#include "core/wc_error.h"

typedef struct wcc_pool wcc_pool;

/* Start nthreads workers (0: none, every loop runs on the caller).
 * Errors: WC_E_NOMEM. */
wc_err wcc_pool_create(unsigned nthreads, wcc_pool **out);
void wcc_pool_destroy(wcc_pool *pool);

/* Run fn(ctx, i) for i in [0, n) on the workers and the calling thread;
 * return when all calls have returned. Safe to call from several threads at
 * once (their loops share the workers). */
void wcc_pool_for(wcc_pool *pool, size_t n, void (*fn)(void *ctx, size_t i), void *ctx);

#endif /* WCC_POOL_H */
