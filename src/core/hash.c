/* hash.c - XXH3-64, dispatched to the AVX2 build where the CPU allows
 * (hash.h). */
#include "core/hash.h"

#include <xxhash.h>

#if defined(__x86_64__) && defined(__GNUC__)
uint64_t wc_xxh3_64_avx2(const void *p, size_t n); /* hash_avx2.c */

static int have_avx2(void)
{
	static int known; /* 0 unknown, 1 no, 2 yes; racing first calls store the same */
	int v = __atomic_load_n(&known, __ATOMIC_RELAXED);
	if (!v) {
		__builtin_cpu_init();
		v = __builtin_cpu_supports("avx2") ? 2 : 1;
		__atomic_store_n(&known, v, __ATOMIC_RELAXED);
	}
	return v == 2;
}
#endif

uint64_t wc_xxh3_64_lib(const void *p, size_t n)
{
	return XXH3_64bits(p, n);
}

uint64_t wc_xxh3_64(const void *p, size_t n)
{
#if defined(__x86_64__) && defined(__GNUC__)
	if (have_avx2())
		return wc_xxh3_64_avx2(p, n);
#endif
	return XXH3_64bits(p, n);
}
