/*
 * bench_cache.c - the decoded-tile cache under load (a benchmark, not a test).
 *
 *   bench_cache hit [seconds-per-step=0.5] [tiles=4096] [copy-bytes=0]
 *     Hit-path latency and throughput with 1..16 reader threads. Every tile is
 *     decoded once up front (fake backend, tests/fake_tiles.h), so each timed
 *     wc_cache_get() + wc_cache_release() is a hit: this measures the lookup,
 *     the refcount and the mutex under contention, not decoding. With
 *     copy-bytes, tiles are 1 MiB and each hit copies that many bytes out of
 *     the tile, as a FUSE read reply does (e.g. 131072: the kernel's usual
 *     read size), so the lock is weighed against real work.
 *
 *   bench_cache stream [budget-MiB=256] [file-MiB=1024] [readers=4]
 *     Readers stream through one file of 1 MiB tiles each from its own
 *     offset, prefetching 8 tiles ahead, through a cache of the given budget;
 *     reports throughput and peak RSS against the budget (the daemon's bar:
 *     peak RSS <= budget + 64 MiB).
 *
 *   bench_cache cpu [threads=online CPUs] [file-MiB=512] [readers=4]
 *     The same streaming through the real CPU backend on real payloads (1 MiB
 *     BF16 tiles of normal weights made by wc_tile_encode), against one
 *     thread's raw decode rate: shows whether the cache keeps every core busy.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <xxhash.h>

#include "codec/tile_codec.h"
#include "codec_testutil.h"
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
	size_t copy;
} reader;

static void *reader_main(void *arg)
{
	reader *r = arg;
	uint64_t x = r->seed, ops = 0, sink = 0;
	uint8_t *buf = malloc(r->copy + 1);
	pthread_barrier_wait(r->start);
	while (!*r->stop) {
		for (int k = 0; k < 256; k++) {
			uint32_t t = (uint32_t)(fake_splitmix(&x) % r->s->ntiles);
			wc_tile_ref *ref;
			if (wc_cache_get(r->c, &r->s->base, t, &ref) != WC_OK) {
				fprintf(stderr, "bench_cache: get failed: %s\n", wc_last_detail());
				exit(1);
			}
			if (r->copy) {
				memcpy(buf, ref->data + (x % (ref->size / r->copy)) * r->copy, r->copy);
				sink += buf[x % r->copy];
			} else {
				sink += ref->data[0];
			}
			wc_cache_release(r->c, ref);
		}
		ops += 256;
	}
	r->ops = ops;
	free(buf);
	return sink == 42 ? r : NULL; /* keep the loads */
}

static int bench_hit(int argc, char **argv)
{
	double step = argc > 0 ? atof(argv[0]) : 0.5;
	uint32_t ntiles = argc > 1 ? (uint32_t)atoi(argv[1]) : 4096;
	size_t copy = argc > 2 ? (size_t)atol(argv[2]) : 0;
	uint32_t tile = copy ? 1u << 20 : 4096;
	if (copy > tile)
		copy = tile;
	fake_backend fb;
	fake_backend_init(&fb, 16, 2);
	fake_source s;
	fake_source_init(&s, 1, 1, ntiles, tile, tile);
	wc_cache_opts o = { .budget_bytes = (uint64_t)ntiles * tile * 2, .backend = &fb.base };
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
	printf("# cache hit path: %u cached tiles of %u bytes, %zu bytes copied per hit, "
	       "%.2f s per step\n", ntiles, tile, copy, step);
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
					 .seed = (uint64_t)i * 7919 + 1, .copy = copy };
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

typedef struct streamer {
	wc_cache *c;
	wc_tile_source *s;
	uint32_t first;
	uint64_t bytes;
	size_t bad;
} streamer;

static void *streamer_main(void *arg)
{
	streamer *st = arg;
	uint32_t n = st->s->ops->ntiles(st->s);
	for (uint32_t k = 0; k < n; k++) {
		uint32_t t = (st->first + k) % n;
		wc_cache_prefetch(st->c, st->s, t + 1, 8);
		wc_tile_ref *ref;
		if (wc_cache_get(st->c, st->s, t, &ref) != WC_OK) {
			fprintf(stderr, "bench_cache: get failed: %s\n", wc_last_detail());
			exit(1);
		}
		/* Touch every page as a reader copying it out would. */
		uint64_t sum = 0;
		for (uint32_t i = 0; i < ref->size; i += 4096)
			sum += ref->data[i];
		st->bad += (sum == UINT64_MAX);
		st->bytes += ref->size;
		wc_cache_release(st->c, ref);
	}
	return NULL;
}

/* Stream src with nreaders threads, each starting at its own fraction of
 * the tiles; returns the bytes read and sets *secs to the wall time. */
static uint64_t run_streamers(wc_cache *c, wc_tile_source *src, uint32_t ntiles, int nreaders, double *secs)
{
	streamer st[64];
	pthread_t th[64];
	double t0 = now_s();
	for (int i = 0; i < nreaders; i++) {
		st[i] = (streamer){ .c = c, .s = src, .first = (uint32_t)((uint64_t)ntiles * i / nreaders) };
		pthread_create(&th[i], NULL, streamer_main, &st[i]);
	}
	uint64_t bytes = 0;
	for (int i = 0; i < nreaders; i++) {
		pthread_join(th[i], NULL);
		bytes += st[i].bytes;
	}
	*secs = now_s() - t0;
	return bytes;
}

static int bench_stream(int argc, char **argv)
{
	uint64_t budget = (uint64_t)(argc > 0 ? atoi(argv[0]) : 256) << 20;
	uint32_t ntiles = (uint32_t)(argc > 1 ? atoi(argv[1]) : 1024);
	int nreaders = argc > 2 ? atoi(argv[2]) : 4;
	if (nreaders < 1 || nreaders > 64)
		nreaders = 4;
	fake_backend fb;
	fake_backend_init(&fb, 8, 2);
	fake_source s;
	fake_source_init(&s, 1, 1, ntiles, 1u << 20, 1u << 20);
	wc_cache_opts o = { .budget_bytes = budget, .backend = &fb.base, .max_prefetch = 16 };
	wc_cache *c;
	if (wc_cache_create(&o, &c) != WC_OK)
		return 1;
	long rss0 = rss_kib();
	double dt;
	uint64_t bytes = run_streamers(c, &s.base, ntiles, nreaders, &dt);
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	wc_cache_stats cs;
	wc_cache_get_stats(c, &cs);
	printf("# stream: %d readers x %u MiB, budget %llu MiB\n", nreaders, ntiles,
	       (unsigned long long)(budget >> 20));
	printf("throughput %.0f MiB/s (fake decode), hits %llu misses %llu decodes %llu "
	       "evictions %llu prefetches %llu\n", bytes / dt / (1 << 20),
	       (unsigned long long)cs.hits, (unsigned long long)cs.misses,
	       (unsigned long long)cs.decodes, (unsigned long long)cs.evictions,
	       (unsigned long long)cs.prefetches);
	printf("RSS before %ld MiB, peak %ld MiB, peak - budget = %ld MiB\n", rss0 >> 10,
	       ru.ru_maxrss >> 10, (ru.ru_maxrss >> 10) - (long)(budget >> 20));
	wc_cache_destroy(c);
	printf("RSS after destroy %ld MiB\n", rss_kib() >> 10);
	return 0;
}

/* ---- real tiles through the CPU backend ---------------------------------- */

enum { REAL_KINDS = 8, REAL_TILE = 1 << 20, REAL_CHUNK = 16384 };

typedef struct real_tiles {
	wc_tile_source base;
	uint32_t ntiles;
	uint8_t *payload[REAL_KINDS];
	uint32_t len[REAL_KINDS];
	uint64_t dhash[REAL_KINDS];
	wc_freqtab tabs[REAL_KINDS][2];
} real_tiles;

static uint32_t rt_ntiles(const wc_tile_source *s) { return ((const real_tiles *)s)->ntiles; }
static uint32_t rt_dsize(const wc_tile_source *s, uint32_t t) { (void)s; (void)t; return REAL_TILE; }
static uint32_t rt_csize(const wc_tile_source *s, uint32_t t)
{
	return ((const real_tiles *)s)->len[t % REAL_KINDS];
}
static wc_err rt_read(const wc_tile_source *s, uint32_t t, uint8_t *buf)
{
	const real_tiles *r = (const real_tiles *)s;
	memcpy(buf, r->payload[t % REAL_KINDS], r->len[t % REAL_KINDS]);
	return WC_OK;
}
static void rt_describe(const wc_tile_source *s, uint32_t t, wc_tile_job *j)
{
	const real_tiles *r = (const real_tiles *)s;
	j->kind = WC_JOB_PLANES;
	j->layout = wc_layout_for_dtype("BF16");
	j->chunk_symbols = REAL_CHUNK;
	j->tables = r->tabs[t % REAL_KINDS];
	j->ntables = 2;
	j->table_key = s->id;
	j->dhash = r->dhash[t % REAL_KINDS];
}
static void rt_nop(wc_tile_source *s) { (void)s; }
static const wc_tile_source_ops rt_ops = {
	rt_ntiles, rt_dsize, rt_csize, rt_read, rt_describe, rt_nop, rt_nop, NULL,
};

static void real_tiles_make(real_tiles *r, uint32_t ntiles)
{
	memset(r, 0, sizeof *r);
	r->base.ops = &rt_ops;
	r->base.id = 2;
	r->ntiles = ntiles;
	wc_layout l = wc_layout_for_dtype("BF16");
	uint8_t *data = malloc(REAL_TILE);
	for (int k = 0; k < REAL_KINDS; k++) {
		tu_weights_bf16(data, REAL_TILE / 2, 0.02, (uint64_t)k + 1);
		uint64_t hist[WC_MAX_PLANES][256];
		memset(hist, 0, sizeof hist);
		wc_planes_histogram(l, data, REAL_TILE / 2, hist);
		wc_plane_plan plan[2];
		for (int p = 0; p < 2; p++) {
			if (wc_freq_normalize(hist[p], &r->tabs[k][p]) != WC_OK)
				exit(1);
			plan[p] = (wc_plane_plan){ &r->tabs[k][p], (uint32_t)p, 0 };
		}
		size_t cap = wc_tile_encode_bound(l, REAL_TILE, REAL_CHUNK), len;
		r->payload[k] = malloc(cap);
		if (wc_tile_encode(l, data, REAL_TILE, plan, REAL_CHUNK, r->payload[k], cap, &len,
				   NULL) != WC_OK)
			exit(1);
		r->len[k] = (uint32_t)len;
		r->dhash[k] = XXH3_64bits(data, REAL_TILE);
	}
	free(data);
}

static int bench_cpu(int argc, char **argv)
{
	unsigned threads = argc > 0 ? (unsigned)atoi(argv[0]) : 0;
	uint32_t ntiles = (uint32_t)(argc > 1 ? atoi(argv[1]) : 512);
	int nreaders = argc > 2 ? atoi(argv[2]) : 4;
	if (nreaders < 1 || nreaders > 64)
		nreaders = 4;
	real_tiles rt;
	real_tiles_make(&rt, ntiles);
	/* One thread's raw decode rate. */
	wc_tile_job j;
	memset(&j, 0, sizeof j);
	rt_describe(&rt.base, 0, &j);
	j.payload = rt.payload[0];
	j.payload_size = rt.len[0];
	j.out = malloc(REAL_TILE);
	j.out_size = REAL_TILE;
	int reps = 0;
	double t0 = now_s();
	while (now_s() - t0 < 0.5 || reps < 4) {
		if (wc_decode_job_cpu(&j) != WC_OK) {
			fprintf(stderr, "bench_cache: %s\n", j.detail);
			return 1;
		}
		reps++;
	}
	double one = reps * (double)REAL_TILE / (now_s() - t0) / (1 << 20);
	free(j.out);
	wc_backend *be;
	if (wc_backend_cpu_create(threads, &be) != WC_OK)
		return 1;
	/* A budget well below the file: readers far apart share no tiles. */
	wc_cache_opts o = { .budget_bytes = 64ull << 20, .backend = be, .max_prefetch = 16 };
	wc_cache *c;
	if (wc_cache_create(&o, &c) != WC_OK)
		return 1;
	double dt;
	uint64_t bytes = run_streamers(c, &rt.base, ntiles, nreaders, &dt);
	wc_cache_stats cs;
	wc_cache_get_stats(c, &cs);
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	printf("# cpu: %d readers x %u MiB of BF16 tiles (ratio %.3f), batches of %u, %u at once\n",
	       nreaders, ntiles, rt.len[0] / (double)REAL_TILE, be->max_batch, be->concurrency);
	printf("one thread raw decode %.0f MiB/s; %ld cores\n", one, cores);
	printf("through the cache: %.0f MiB/s read, %.0f MiB/s decoded (%.1f x one thread, %.0f%% of cores x one thread), "
	       "decodes %llu, batches %llu (%.1f tiles each)\n",
	       bytes / dt / (1 << 20), cs.decodes * (double)REAL_TILE / dt / (1 << 20),
	       cs.decodes * (double)REAL_TILE / dt / (1 << 20) / one,
	       100.0 * cs.decodes * (double)REAL_TILE / dt / (1 << 20) / one / (double)cores,
	       (unsigned long long)cs.decodes, (unsigned long long)cs.batches,
	       cs.batches ? cs.batch_tiles / (double)cs.batches : 0.0);
	wc_cache_destroy(c);
	wc_backend_destroy(be);
	for (int k = 0; k < REAL_KINDS; k++)
		free(rt.payload[k]);
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "hit";
	if (strcmp(mode, "hit") == 0)
		return bench_hit(argc - 2 < 0 ? 0 : argc - 2, argv + 2);
	if (strcmp(mode, "stream") == 0)
		return bench_stream(argc - 2 < 0 ? 0 : argc - 2, argv + 2);
	if (strcmp(mode, "cpu") == 0)
		return bench_cpu(argc - 2 < 0 ? 0 : argc - 2, argv + 2);
	fprintf(stderr, "usage: bench_cache hit [seconds] [tiles] | stream [budget-MiB] [tiles] "
		"[readers] | cpu [threads] [tiles] [readers]\n");
	return 2;
}
