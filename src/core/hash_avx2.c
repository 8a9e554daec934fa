/* hash_avx2.c - xxHash's XXH3-64 from the library's header-only mode,
 * compiled for AVX2 (hash.h says why). Only called when the CPU has AVX2;
 * the rest of the program stays baseline x86-64. */
#include <stddef.h>
#include <stdint.h>

#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC target("avx2")
#define XXH_INLINE_ALL /* every XXH symbol static to this file */
#define XXH_VECTOR XXH_AVX2
#include <xxhash.h>

uint64_t wc_xxh3_64_avx2(const void *p, size_t n);

uint64_t wc_xxh3_64_avx2(const void *p, size_t n)
{
	return XXH3_64bits(p, n);
}
#endif
