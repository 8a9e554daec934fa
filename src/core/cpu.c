/* cpu.c - run-time CPU feature detection (cpu.h). */
#include "core/cpu.h"

unsigned wc_cpu_features(void)
{
	/* bit 31 marks "known"; racing first calls store the same value */
	static unsigned known;
	unsigned v = __atomic_load_n(&known, __ATOMIC_RELAXED);
	if (!v) {
		v = 1u << 31;
#if defined(__x86_64__) && defined(__GNUC__)
		__builtin_cpu_init();
		if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt"))
			v |= WC_CPU_AVX2;
		if (__builtin_cpu_supports("avx512f"))
			v |= WC_CPU_AVX512F;
		if ((v & WC_CPU_AVX512F) && __builtin_cpu_supports("avx512bw") &&
		    __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vbmi"))
			v |= WC_CPU_AVX512VBMI;
#endif
		__atomic_store_n(&known, v, __ATOMIC_RELAXED);
	}
	return v & ~(1u << 31);
}
