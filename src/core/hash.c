/* hash.c - XXH3-64, dispatched to the AVX2 build where the CPU allows
 * (hash.h). */
#include "core/hash.h"

#include <xxhash.h>

#include "core/cpu.h"

#if defined(__x86_64__) && defined(__GNUC__)
uint64_t wc_xxh3_64_avx2(const void *p, size_t n); /* hash_avx2.c */
#endif

uint64_t wc_xxh3_64_lib(const void *p, size_t n)
{
	return XXH3_64bits(p, n);
}

uint64_t wc_xxh3_64(const void *p, size_t n)
{
#if defined(__x86_64__) && defined(__GNUC__)
	if (wc_cpu_features() & WC_CPU_AVX2)
		return wc_xxh3_64_avx2(p, n);
#endif
	return XXH3_64bits(p, n);
}
