/*
 * bench_cache.c - hit-path latency and throughput of the decoded-tile cache
 * with 1..16 reader threads (a benchmark, not a test).
 *
 * Every tile is decoded once up front (fake backend, tests/fake_tiles.h), so
 * each timed wc_cache_get() + wc_cache_release() is a hit: this measures the
 * lookup, the refcount and the mutex under contention, not decoding.
 *
 * Usage: bench_cache [seconds-per-step (default 0.5)] [tiles (default 4096)]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "engine/cache.h"
#include "fake_tiles.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct reader {
	wc_cache *c;
	fake_source *s;
	pthread_barrier_t *start;
	volatile int *stop;
	uint64_t seed;
	uint64_t ops;
	double max_ns;
} reader;

static void *reader_main(void *arg)
{
	reader *r = arg;
	uint64_t x = r->seed, ops = 0, sink = 0;
	pthread_barrier_wait(r->start);
	while (!*r->stop) {
		for (int k = 0; k < 256; k++) {
			uint32_t t = (uint32_t)(fake_splitmix(&x) % r->s->ntiles);
			wc_tile_ref *ref;
			if (wc_cache_get(r->c, &r->s->base, t, &ref) != WC_OK) {
				fprintf(stderr, "bench_cache: get failed: %s\n", wc_last_detail());
				exit(1);
			}
			sink += ref->data[0];
			wc_cache_release(r->c, ref);
		}
		ops += 256;
	}
	r->ops = ops + (sink & 0); /* keep the loads */
	return NULL;
}

int main(int argc, char **argv)
{
	double step = argc > 1 ? atof(argv[1]) : 0.5;
	uint32_t ntiles = argc > 2 ? (uint32_t)atoi(argv[2]) : 4096;
	fake_backend fb;
	fake_backend_init(&fb, 16, 2);
	fake_source s;
	fake_source_init(&s, 1, 1, ntiles, 4096, 4096);
	wc_cache_opts o = { .budget_bytes = (uint64_t)ntiles * 4096 * 2, .backend = &fb.base };
	wc_cache *c;
	if (wc_cache_create(&o, &c) != WC_OK) {
		fprintf(stderr, "bench_cache: %s\n", wc_last_detail());
		return 1;
	}
	for (uint32_t t = 0; t < ntiles; t++) { /* warm: every get below is a hit */
		wc_tile_ref *ref;
		if (wc_cache_get(c, &s.base, t, &ref) != WC_OK)
			return 1;
		wc_cache_release(c, ref);
	}
	printf("# cache hit path: %u cached tiles, %.2f s per step\n", ntiles, step);
	printf("%8s %14s %14s\n", "threads", "hits/s", "ns/hit/thread");
	static const int steps[] = { 1, 2, 4, 8, 16 };
	for (size_t k = 0; k < sizeof steps / sizeof *steps; k++) {
		int n = steps[k];
		reader r[16];
		pthread_t th[16];
		pthread_barrier_t start;
		volatile int stop = 0;
		pthread_barrier_init(&start, NULL, (unsigned)n + 1);
		for (int i = 0; i < n; i++) {
			r[i] = (reader){ .c = c, .s = &s, .start = &start, .stop = &stop,
					 .seed = (uint64_t)i * 7919 + 1 };
			pthread_create(&th[i], NULL, reader_main, &r[i]);
		}
		pthread_barrier_wait(&start);
		double t0 = now_s();
		struct timespec nap = { (time_t)step, (long)((step - (time_t)step) * 1e9) };
		nanosleep(&nap, NULL);
		stop = 1;
		uint64_t ops = 0;
		for (int i = 0; i < n; i++) {
			pthread_join(th[i], NULL);
			ops += r[i].ops;
		}
		double dt = now_s() - t0;
		pthread_barrier_destroy(&start);
		printf("%8d %14.0f %14.1f\n", n, ops / dt, dt * 1e9 * n / (double)ops);
	}
	wc_cache_stats st;
	wc_cache_get_stats(c, &st);
	printf("# hits %llu misses %llu decodes %llu\n", (unsigned long long)st.hits,
	       (unsigned long long)st.misses, (unsigned long long)st.decodes);
	wc_cache_destroy(c);
	return 0;
}
