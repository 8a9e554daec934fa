/*
 * hash.h - the XXH3-64 checksum of tiles, payloads and headers.
 *
 * Algorithm and code: xxHash's XXH3_64bits (Y. Collet,
 * https://github.com/Cyan4973/xxHash; docs/FORMAT.md names it as the
 * format's checksum). This is the linked libxxhash's function, except on
 * CPUs with AVX2, where the same library's header-only mode (XXH_INLINE_ALL)
 * compiled for AVX2 is used instead: distributions build libxxhash for
 * baseline x86-64 (SSE2), about 20 GB/s per core against about 47 GB/s,
 * and the decode path hashes every decoded byte. Both give the same value
 * for the same bytes (the test in tests/test_error.c checks it).
 */
#ifndef WC_HASH_H
#define WC_HASH_H

#include <stddef.h>
#include <stdint.h>

/* XXH3-64 with seed 0 of bytes [p, p+n); p may be NULL when n is 0. */
uint64_t wc_xxh3_64(const void *p, size_t n);

/* The same through the linked library only (tests, benchmarks). */
uint64_t wc_xxh3_64_lib(const void *p, size_t n);

#endif /* WC_HASH_H */
