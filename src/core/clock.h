/* clock.h - monotonic time for timings (stats, progress, benchmarks of a
 * whole call): CLOCK_MONOTONIC, unaffected by changes of the wall clock. */
#ifndef WC_CLOCK_H
#define WC_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Nanoseconds since an arbitrary fixed point (boot). */
static inline uint64_t wc_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The same in seconds. */
static inline double wc_mono_s(void)
{
	return 1e-9 * (double)wc_mono_ns();
}

#endif /* WC_CLOCK_H */
