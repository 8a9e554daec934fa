/* hash_avx2.c - xxHash's XXH3-64 from the library's header-only mode,
 * compiled for AVX2 (hash.h says why). Only called when the CPU has AVX2;
 * the rest of the program stays baseline x86-64. */
#include <stddef.h>
#include <stdint.h>

#if defined(__x86_64__) && defined(__GNUC__)
/* GCC compiles the rest of the file for AVX2; clang has no such pragma, so
 * every function below gets the target attribute instead, and the AVX2
 * intrinsics, which xxhash.h includes only when __AVX2__ is defined, are
 * declared first. */
#ifdef __clang__
#include <immintrin.h>
#pragma clang attribute push(__attribute__((target("avx2"))), apply_to = function)
#else
#pragma GCC target("avx2")
#endif
#define XXH_INLINE_ALL /* every XXH symbol static to this file */
#define XXH_VECTOR XXH_AVX2
#include <xxhash.h>

uint64_t wc_xxh3_64_avx2(const void *p, size_t n);

uint64_t wc_xxh3_64_avx2(const void *p, size_t n)
{
	return XXH3_64bits(p, n);
}
#ifdef __clang__
#pragma clang attribute pop
#endif
#endif
