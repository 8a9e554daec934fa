/*
 * exponent_input.h - the input both entropy-decoder experiments use
 * (bench_rans_lookup.c, bench_huff_exponents.c), and their clock.
 */
#ifndef WC_BENCH_EXPONENT_INPUT_H
#define WC_BENCH_EXPONENT_INPUT_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Thread CPU time in seconds: time slices given to other processes on a
 * shared machine do not count. */
static inline double bench_cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* n BF16 exponent bytes of N(0, 0.02) weights (Box-Muller over rand(),
 * seeded with 1, so every run and both programs get the same bytes), the
 * tail below exponent 100 folded into 100 so that at most 32 symbols
 * occur (24 here, 2.55 bits of entropy); hist[s] counts symbol s. */
static inline void bench_exponent_bytes(uint8_t *sym, size_t n, uint64_t hist[256])
{
	memset(hist, 0, 256 * sizeof hist[0]);
	srand(1);
	for (size_t i = 0; i < n; i++) {
		double u1 = (rand() + 1.0) / ((double)RAND_MAX + 2.0), u2 = rand() / ((double)RAND_MAX + 1.0);
		float g = (float)(0.02 * sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
		uint32_t b;
		memcpy(&b, &g, 4);
		uint32_t e = (b >> 23) & 0xff; /* the BF16 exponent byte is the F32 one */
		sym[i] = (uint8_t)(e < 100 ? 100 : e);
		hist[sym[i]]++;
	}
}

#endif /* WC_BENCH_EXPONENT_INPUT_H */
