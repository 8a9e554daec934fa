/*
 * test_cache.c - the decoded-tile cache (src/engine/cache.c) against a fake
 * tile source and backend (fake_tiles.h): correct bytes on hits and misses,
 * one decode shared by concurrent readers, the byte budget and LRU eviction
 * under load, referenced entries surviving eviction, errors reaching every
 * waiter and not being cached, bounded prefetch, drop_source, the RSS
 * staying within the budget while streaming, and a clean destroy (sources
 * released; leaks are caught by ASan builds).
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "engine/cache.h"
#include "fake_tiles.h"

#define KIB 1024u

static wc_cache *make_cache(fake_backend *fb, uint64_t budget, uint32_t max_prefetch)
{
	wc_cache_opts o = { .budget_bytes = budget, .backend = &fb->base,
			    .max_prefetch = max_prefetch };
	wc_cache *c = NULL;
	ck_assert_int_eq(wc_cache_create(&o, &c), WC_OK);
	ck_assert_ptr_nonnull(c);
	return c;
}

static void get_check(wc_cache *c, fake_source *s, uint32_t tile)
{
	wc_tile_ref *r = NULL;
	wc_err e = wc_cache_get(c, &s->base, tile, &r);
	ck_assert_msg(e == WC_OK, "tile %u: %s (%s)", tile, wc_strerror(e), wc_last_detail());
	ck_assert_uint_eq(r->size, fake_dsize(&s->base, tile));
	ck_assert_uint_eq(fake_tile_check(s->seed, tile, r->data, r->size), 0);
	wc_cache_release(c, r);
}

/* A streaming reader over tiles [first, end) of s: each one got, checked
 * and released as consumed (wc_cache_release_consumed). */
static void stream_consumed(wc_cache *c, fake_source *s, uint32_t first, uint32_t end)
{
	for (uint32_t t = first; t < end; t++) {
		wc_tile_ref *r = NULL;
		ck_assert_int_eq(wc_cache_get(c, &s->base, t, &r), WC_OK);
		ck_assert_uint_eq(fake_tile_check(s->seed, t, r->data, r->size), 0);
		wc_cache_release_consumed(c, r);
	}
}

/* ---- log capture --------------------------------------------------------- */

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static int log_errors;
static char log_last[1024];

static void capture(int level, const char *msg, void *ctx)
{
	(void)ctx;
	pthread_mutex_lock(&log_lock);
	if (level == WC_LOG_ERR) {
		log_errors++;
		snprintf(log_last, sizeof log_last, "%s", msg);
	}
	pthread_mutex_unlock(&log_lock);
}

/* ---- tests --------------------------------------------------------------- */

START_TEST(hits_and_misses_give_the_right_bytes)
{
	fake_backend fb;
	fake_backend_init(&fb, 4, 2);
	/* 70 KiB tiles take the mmap path, the 100-byte last tile malloc. */
	fake_source s;
	fake_source_init(&s, 1, 42, 12, 70 * KIB, 100);
	wc_cache *c = make_cache(&fb, 64ull << 20, 0);
	for (uint32_t t = 0; t < s.ntiles; t++)
		get_check(c, &s, t);
	wc_cache_stats st;
	wc_cache_get_stats(c, &st);
	ck_assert_uint_eq(st.misses, 12);
	ck_assert_uint_eq(st.hits, 0);
	ck_assert_uint_eq(st.decodes, 12);
	ck_assert_uint_eq(st.bytes_cached, 11 * 70 * KIB + 100);
	ck_assert_uint_gt(st.wait_ns, 0); /* every miss waited for its decode */
	const uint64_t waited = st.wait_ns;
	for (uint32_t t = 0; t < s.ntiles; t++)
		get_check(c, &s, s.ntiles - 1 - t);
	wc_cache_get_stats(c, &st);
	ck_assert_uint_eq(st.hits, 12);
	ck_assert_uint_eq(st.wait_ns, waited); /* hits do not wait */
	ck_assert_uint_eq(atomic_load(&fb.decodes), 12);
	ck_assert_uint_eq(atomic_load(&s.reads), 12);
	/* Out of range. */
	wc_tile_ref *r = (wc_tile_ref *)1;
	ck_assert_int_eq(wc_cache_get(c, &s.base, 12, &r), WC_E_RANGE);
	ck_assert_ptr_null(r);
	wc_cache_destroy(c);
	ck_assert_int_eq(atomic_load(&s.refs), 1);
}
END_TEST

typedef struct getter {
	wc_cache *c;
	fake_source *s;
	pthread_barrier_t *start;
	uint32_t tile;
	wc_err err;
	char detail[512];
	size_t bad;
} getter;

static void *getter_main(void *arg)
{
	getter *g = arg;
	pthread_barrier_wait(g->start);
	wc_tile_ref *r = NULL;
	g->err = wc_cache_get(g->c, &g->s->base, g->tile, &r);
	snprintf(g->detail, sizeof g->detail, "%s", wc_last_detail());
	if (g->err == WC_OK) {
		g->bad = fake_tile_check(g->s->seed, g->tile, r->data, r->size) +
			 (r->size != fake_dsize(&g->s->base, g->tile));
		wc_cache_release(g->c, r);
	}
	return NULL;
}

/* Start n threads getting one tile at the same moment, with fb's decodes
 * held until all n have asked for it (a get counts its hit or miss before it
 * waits); wait for them. */
static void get_concurrently(wc_cache *c, fake_source *s, uint32_t tile, getter *g, int n,
			     fake_backend *fb)
{
	pthread_barrier_t start;
	pthread_barrier_init(&start, NULL, (unsigned)n);
	pthread_t th[n];
	wc_cache_stats st0, st;
	wc_cache_get_stats(c, &st0);
	atomic_store(&fb->gate, 1);
	for (int i = 0; i < n; i++) {
		g[i] = (getter){ .c = c, .s = s, .start = &start, .tile = tile };
		pthread_create(&th[i], NULL, getter_main, &g[i]);
	}
	do {
		usleep(1000);
		wc_cache_get_stats(c, &st);
	} while (st.hits + st.misses < st0.hits + st0.misses + (uint64_t)n);
	atomic_store(&fb->gate, 0);
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&start);
}

START_TEST(concurrent_getters_share_one_decode)
{
	fake_backend fb;
	fake_backend_init(&fb, 4, 2);
	fake_source s;
	fake_source_init(&s, 7, 99, 10, 128 * KIB, 128 * KIB);
	wc_cache *c = make_cache(&fb, 64ull << 20, 0);
	getter g[16];
	get_concurrently(c, &s, 5, g, 16, &fb);
	for (int i = 0; i < 16; i++) {
		ck_assert_int_eq(g[i].err, WC_OK);
		ck_assert_uint_eq(g[i].bad, 0);
	}
	ck_assert_uint_eq(atomic_load(&fb.decodes), 1);
	ck_assert_uint_eq(atomic_load(&s.reads), 1);
	wc_cache_stats st;
	wc_cache_get_stats(c, &st);
	ck_assert_uint_eq(st.hits, 0);
	ck_assert_uint_eq(st.misses, 16); /* all 16 waited for the one decode */
	ck_assert_uint_eq(st.decodes, 1);
	wc_cache_destroy(c);
	ck_assert_int_eq(atomic_load(&s.refs), 1);
}
END_TEST

typedef struct loader {
	wc_cache *c;
	fake_source *s;
	uint64_t budget;
	unsigned seed;
	int rounds;
	size_t bad;
	uint64_t max_bytes;
	wc_err err;
} loader;

static void *loader_main(void *arg)
{
	loader *l = arg;
	uint64_t x = l->seed;
	for (int i = 0; i < l->rounds; i++) {
		/* Mostly a sliding window with some random jumps: both hits and misses. */
		uint32_t t = (uint32_t)(fake_splitmix(&x) % l->s->ntiles);
		if (i % 3)
			t = (uint32_t)((i / 3 + l->seed) % l->s->ntiles);
		wc_tile_ref *r = NULL;
		wc_err e = wc_cache_get(l->c, &l->s->base, t, &r);
		if (e != WC_OK) {
			l->err = e;
			return NULL;
		}
		l->bad += fake_tile_check(l->s->seed, t, r->data, r->size) != 0;
		wc_cache_stats st;
		wc_cache_get_stats(l->c, &st);
		if (st.bytes_cached > l->max_bytes)
			l->max_bytes = st.bytes_cached;
		wc_cache_release(l->c, r);
	}
	return NULL;
}

START_TEST(budget_holds_under_concurrent_load)
{
	fake_backend fb;
	fake_backend_init(&fb, 3, 2);
	fake_source s;
	fake_source_init(&s, 3, 1234, 200, 64 * KIB, 64 * KIB);
	uint64_t budget = 10 * 64 * KIB;
	wc_cache *c = make_cache(&fb, budget, 0);
	enum { N = 4 };
	loader l[N];
	pthread_t th[N];
	for (int i = 0; i < N; i++) {
		l[i] = (loader){ .c = c, .s = &s, .budget = budget, .seed = 17u * (unsigned)i + 1,
				 .rounds = 600 };
		pthread_create(&th[i], NULL, loader_main, &l[i]);
	}
	for (int i = 0; i < N; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < N; i++) {
		ck_assert_int_eq(l[i].err, WC_OK);
		ck_assert_uint_eq(l[i].bad, 0);
		/* 4 readers hold or wait for at most 4 tiles < the 10-tile budget,
		 * so there is always something to evict: the budget is never exceeded. */
		ck_assert_uint_le(l[i].max_bytes, budget);
	}
	wc_cache_stats st;
	wc_cache_get_stats(c, &st);
	ck_assert_uint_gt(st.evictions, 0);
	ck_assert_uint_gt(st.hits, 0);
	ck_assert_uint_le(st.bytes_cached, budget);
	ck_assert_uint_eq(st.hits + st.misses, N * 600);
	wc_cache_destroy(c);
	ck_assert_int_eq(atomic_load(&s.refs), 1);
}
END_TEST

START_TEST(referenced_entries_survive_eviction)
{
	fake_backend fb;
	fake_backend_init(&fb, 2, 1);
	fake_source s;
	fake_source_init(&s, 4, 5, 40, 64 * KIB, 64 * KIB);
	uint64_t budget = 4 * 64 * KIB;
	wc_cache *c = make_cache(&fb, budget, 0);
	wc_tile_ref *held = NULL;
	ck_assert_int_eq(wc_cache_get(c, &s.base, 0, &held), WC_OK);
	for (uint32_t t = 1; t < 40; t++)
		get_check(c, &s, t);
	ck_assert_uint_eq(fake_tile_check(s.seed, 0, held->data, held->size), 0);
	wc_cache_stats st;
	wc_cache_get_stats(c, &st);
	ck_assert_uint_le(st.bytes_cached, budget);
	ck_assert_uint_ge(st.evictions, 35);
	/* Still cached: a hit, no new decode. */
	unsigned before = atomic_load(&fb.decodes);
	get_check(c, &s, 0);
	ck_assert_uint_eq(atomic_load(&fb.decodes), before);
	wc_cache_release(c, held);

	/* Readers holding more than the budget: all valid, trimmed on release. */
	wc_tile_ref *refs[8];
	for (uint32_t t = 0; t < 8; t++)
		ck_assert_int_eq(wc_cache_get(c, &s.base, 20 + t, &refs[t]), WC_OK);
	wc_cache_get_stats(c, &st);
	ck_assert_uint_eq(st.bytes_cached, 8 * 64 * KIB);
	for (uint32_t t = 0; t < 8; t++) {
		ck_assert_uint_eq(fake_tile_check(s.seed, 20 + t, refs[t]->data, refs[t]->size), 0);
		wc_cache_release(c, refs[t]);
	}
	wc_cache_get_stats(c, &st);
	ck_assert_uint_le(st.bytes_cached, budget);
	wc_cache_destroy(c);
	ck_assert_int_eq(atomic_load(&s.refs), 1);
}
END_TEST

START_TEST(errors_reach_every_waiter_and_are_not_cached)
{
	fake_backend fb;
	fake_backend_init(&fb, 4, 2);
	fb.fail_tile = 7;
	atomic_store(&fb.fail_times, 1);
	fake_source s;
	fake_source_init(&s, 9, 77, 16, 64 * KIB, 64 * KIB);
	wc_cache *c = make_cache(&fb, 64ull << 20, 0);
	log_errors = 0;
	wc_log_set_sink(capture, NULL);
	getter g[8];
	get_concurrently(c, &s, 7, g, 8, &fb);
	wc_log_set_sink(NULL, NULL);
	for (int i = 0; i < 8; i++) {
		ck_assert_int_eq(g[i].err, WC_E_CORRUPT);
		ck_assert_msg(strstr(g[i].detail, "injected failure on tile 7"), "detail: %s",
			      g[i].detail);
		ck_assert_msg(strstr(g[i].detail, "tile 7 of source 9"), "detail: %s", g[i].detail);
	}
	ck_assert_uint_eq(atomic_load(&fb.decodes), 1);
	ck_assert_int_eq(log_errors, 1); /* logged once, not once per waiter */
	ck_assert_msg(strstr(log_last, "tile 7") && strstr(log_last, "source 9") &&
		      strstr(log_last, "injected failure"), "log: %s", log_last);
	wc_cache_stats st;
	wc_cache_get_stats(c, &st);
	ck_assert_uint_eq(st.decode_errors, 1);
	ck_assert_uint_eq(st.bytes_cached, 0);
	/* Not cached: the next get decodes again, and now succeeds. */
	get_check(c, &s, 7);
	ck_assert_uint_eq(atomic_load(&fb.decodes), 2);

	/* A payload read error is reported the same way, and retried. */
	s.fail_read_tile = 3;
	wc_log_set_sink(capture, NULL);
	wc_tile_ref *r = NULL;
	ck_assert_int_eq(wc_cache_get(c, &s.base, 3, &r), WC_E_IO);
	wc_log_set_sink(NULL, NULL);
	ck_assert_ptr_null(r);
	ck_assert_msg(strstr(wc_last_detail(), "injected read error"), "%s", wc_last_detail());
	ck_assert_int_eq(log_errors, 2);
	s.fail_read_tile = -1;
	get_check(c, &s, 3);
	wc_cache_destroy(c);
	ck_assert_int_eq(atomic_load(&s.refs), 1);
}
END_TEST

/* With read threads, a batch's payloads are read in parallel: every tile
 * still has its own bytes, and a read failure on a pool thread reaches the
 * reader with its reason and is retried on the next get. */
START_TEST(parallel_payload_reads)
{
	fake_backend fb;
	fake_backend_init(&fb, 32, 1); /* batches of up to 32 tiles, one dispatcher */
	fake_source s;
	fake_source_init(&s, 4, 44, 40, 64 * KIB, 96 * KIB);
	wc_cache_opts o = { .budget_bytes = 64ull << 20, .backend = &fb.base, .max_prefetch = 64,
			    .read_threads = 3 };
	wc_cache *c = NULL;
	ck_assert_int_eq(wc_cache_create(&o, &c), WC_OK);
	s.fail_read_tile = 5;
	log_errors = 0;
	wc_log_set_sink(capture, NULL);
	wc_cache_prefetch(c, &s.base, 0, 40);
	wc_tile_ref *r = NULL;
	ck_assert_int_eq(wc_cache_get(c, &s.base, 5, &r), WC_E_IO);
	ck_assert_ptr_null(r);
	ck_assert_msg(strstr(wc_last_detail(), "injected read error"), "%s", wc_last_detail());
	for (uint32_t t = 0; t < 40; t++)
		if (t != 5)
			get_check(c, &s, t);
	wc_log_set_sink(NULL, NULL);
	ck_assert_int_ge(log_errors, 1);
	wc_cache_stats st;
	wc_cache_get_stats(c, &st);
	ck_assert_uint_lt(st.batches, st.batch_tiles); /* some batches held several tiles */
	s.fail_read_tile = -1;
	get_check(c, &s, 5);
	wc_cache_destroy(c);
	ck_assert_int_eq(atomic_load(&s.refs), 1);
}
END_TEST

START_TEST(prefetch_is_bounded_and_changes_no_bytes)
{
	fake_backend fb;
	fake_backend_init(&fb, 2, 2);
	atomic_store(&fb.gate, 1); /* nothing finishes during the prefetch calls */
	fake_source s;
	fake_source_init(&s, 11, 3, 100, 64 * KIB, 1000);
	wc_cache *c = make_cache(&fb, 64ull << 20, 4);
	wc_cache_prefetch(c, &s.base, 0, 100);
	wc_cache_prefetch(c, &s.base, 50, 100); /* past the end: clamped, still bounded */
	wc_cache_stats st;
	wc_cache_get_stats(c, &st);
	ck_assert_uint_eq(st.prefetches, 4);
	ck_assert_int_eq(atomic_load(&s.refs), 1 + 4); /* sources retained while queued */
	fb.delay_us = 1000;
	atomic_store(&fb.gate, 0);
	for (uint32_t t = 0; t < 100; t++) {
		get_check(c, &s, t);
		wc_cache_prefetch(c, &s.base, t + 1, 8);
	}
	wc_cache_get_stats(c, &st);
	ck_assert_uint_gt(st.prefetches, 4);
	ck_assert_uint_gt(st.hits, 0); /* readahead turned misses into hits */
	ck_assert_uint_eq(st.decodes, 100); /* each tile decoded once */
	ck_assert_uint_gt(st.batch_tiles, st.batches); /* queued tiles went out in batches */
	ck_assert_uint_eq(st.decode_errors, 0);
	wc_cache_destroy(c);
	ck_assert_int_eq(atomic_load(&s.refs), 1);
}
END_TEST

/* With max_prefetch_bytes, the in-flight limit is the tiles' bytes: a
 * source of 16 KiB tiles gets 16 tiles in flight where one of 256 KiB
 * tiles gets 1, under the same 256 KiB; the tile limit still holds. */
START_TEST(prefetch_bound_counts_bytes)
{
	fake_backend fb;
	fake_backend_init(&fb, 2, 2);
	atomic_store(&fb.gate, 1); /* nothing finishes during the prefetch calls */
	fake_source small, large;
	fake_source_init(&small, 31, 3, 100, 16 * KIB, 16 * KIB);
	fake_source_init(&large, 32, 4, 100, 256 * KIB, 256 * KIB);
	wc_cache_opts o = { .budget_bytes = 64ull << 20, .backend = &fb.base, .max_prefetch = 64,
			    .max_prefetch_bytes = 256 * KIB };
	wc_cache *c;
	ck_assert_int_eq(wc_cache_create(&o, &c), WC_OK);
	wc_cache_prefetch(c, &small.base, 0, 100);
	wc_cache_stats st;
	wc_cache_get_stats(c, &st);
	ck_assert_uint_eq(st.prefetches, 16);
	wc_cache_prefetch(c, &large.base, 0, 100); /* the bytes are taken: nothing more */
	wc_cache_get_stats(c, &st);
	ck_assert_uint_eq(st.prefetches, 16);
	atomic_store(&fb.gate, 0);
	for (uint32_t t = 0; t < 16; t++)
		get_check(c, &small, t);
	/* all 16 decoded: the bytes are free again, one large tile fits */
	wc_cache_prefetch(c, &large.base, 0, 100);
	wc_cache_get_stats(c, &st);
	ck_assert_uint_eq(st.prefetches, 17);
	get_check(c, &large, 0);
	wc_cache_destroy(c);
	/* the tile limit holds under a byte limit that would allow more */
	o.max_prefetch = 4;
	o.max_prefetch_bytes = 64ull << 20;
	ck_assert_int_eq(wc_cache_create(&o, &c), WC_OK);
	atomic_store(&fb.gate, 1);
	wc_cache_prefetch(c, &small.base, 20, 64);
	wc_cache_get_stats(c, &st);
	ck_assert_uint_eq(st.prefetches, 4);
	atomic_store(&fb.gate, 0);
	wc_cache_destroy(c);
}
END_TEST

/* Memory charged from outside (an open container's tables) shrinks the room
 * for tiles at once, and given back, makes it again. */
START_TEST(external_charges_count_against_the_budget)
{
	fake_backend fb;
	fake_backend_init(&fb, 2, 2);
	fake_source s;
	fake_source_init(&s, 41, 5, 64, 64 * KIB, 64 * KIB);
	wc_cache *c = make_cache(&fb, 1024 * KIB, 4);
	for (uint32_t t = 0; t < 16; t++)
		get_check(c, &s, t);
	wc_cache_stats st;
	wc_cache_get_stats(c, &st);
	ck_assert_uint_gt(st.bytes_cached, 768 * KIB);
	wc_cache_charge(c, 512 * KIB);
	wc_cache_get_stats(c, &st);
	ck_assert_uint_le(st.bytes_cached, 512 * KIB);
	for (uint32_t t = 16; t < 32; t++) /* still within the smaller room */
		get_check(c, &s, t);
	wc_cache_get_stats(c, &st);
	ck_assert_uint_le(st.bytes_cached, 512 * KIB);
	wc_cache_charge(c, -512 * (int64_t)KIB);
	for (uint32_t t = 32; t < 48; t++)
		get_check(c, &s, t);
	wc_cache_get_stats(c, &st);
	ck_assert_uint_gt(st.bytes_cached, 768 * KIB);
	wc_cache_destroy(c);
}
END_TEST

START_TEST(prefetch_never_evicts_referenced_entries)
{
	fake_backend fb;
	fake_backend_init(&fb, 4, 1);
	fake_source s;
	fake_source_init(&s, 12, 8, 20, 64 * KIB, 64 * KIB);
	uint64_t budget = 2 * 64 * KIB;
	wc_cache *c = make_cache(&fb, budget, 8);
	wc_tile_ref *a, *b;
	ck_assert_int_eq(wc_cache_get(c, &s.base, 0, &a), WC_OK);
	ck_assert_int_eq(wc_cache_get(c, &s.base, 1, &b), WC_OK);
	wc_cache_prefetch(c, &s.base, 2, 8);
	/* A get after the prefetches were queued: the dispatcher has passed them. */
	wc_tile_ref *x;
	ck_assert_int_eq(wc_cache_get(c, &s.base, 15, &x), WC_OK);
	wc_cache_release(c, x);
	ck_assert_uint_eq(fake_tile_check(s.seed, 0, a->data, a->size), 0);
	ck_assert_uint_eq(fake_tile_check(s.seed, 1, b->data, b->size), 0);
	wc_cache_stats st;
	wc_cache_get_stats(c, &st);
	ck_assert_uint_eq(st.decodes, 3); /* the prefetches were dropped, not decoded */
	ck_assert_uint_le(st.bytes_cached, budget);
	wc_cache_release(c, a);
	wc_cache_release(c, b);
	wc_cache_destroy(c);
	ck_assert_int_eq(atomic_load(&s.refs), 1);
}
END_TEST

/* Poll c's statistics (up to 5 s) until the counter at byte offset `field`
 * of wc_cache_stats reaches n; *st holds the last ones. Returns whether it
 * did. */
static bool poll_stat(wc_cache *c, size_t field, uint64_t n, wc_cache_stats *st)
{
	for (int i = 0; i < 5000; i++) {
		wc_cache_get_stats(c, st);
		uint64_t v;
		memcpy(&v, (const char *)st + field, sizeof v);
		if (v >= n)
			return true;
		usleep(1000);
	}
	return false;
}

static void wait_decodes(wc_cache *c, uint64_t n)
{
	wc_cache_stats st;
	if (!poll_stat(c, offsetof(wc_cache_stats, decodes), n, &st))
		ck_abort_msg("decodes stuck at %llu, want %llu", (unsigned long long)st.decodes,
			     (unsigned long long)n);
}

START_TEST(unused_prefetches_are_cold_but_survive_streaming)
{
	fake_backend fb;
	fake_backend_init(&fb, 1, 1);
	fake_source s;
	fake_source_init(&s, 13, 6, 64, 64 * KIB, 64 * KIB);
	wc_cache *c = make_cache(&fb, 10 * 64 * KIB, 1); /* 10 tiles; spares 4 unused prefetches */
	for (uint32_t t = 0; t < 10; t++)
		get_check(c, &s, t);
	wc_cache_prefetch(c, &s.base, 20, 1);
	wait_decodes(c, 11);
	/* Five misses evict five used tiles, not the unused prefetch. */
	for (uint32_t t = 10; t < 15; t++)
		get_check(c, &s, t);
	unsigned before = atomic_load(&fb.decodes);
	get_check(c, &s, 20);
	ck_assert_uint_eq(atomic_load(&fb.decodes), before); /* a hit */
	get_check(c, &s, 5); /* evicted: decoded again */
	ck_assert_uint_eq(atomic_load(&fb.decodes), before + 1);

	/* More unused prefetches than are spared: the oldest goes first. */
	for (uint32_t t = 30; t < 36; t++) {
		wc_cache_prefetch(c, &s.base, t, 1);
		wait_decodes(c, before + 2 + (t - 30));
	}
	before = atomic_load(&fb.decodes);
	get_check(c, &s, 35);
	get_check(c, &s, 34);
	ck_assert_uint_eq(atomic_load(&fb.decodes), before);
	get_check(c, &s, 30);
	ck_assert_uint_eq(atomic_load(&fb.decodes), before + 1);
	wc_cache_stats st;
	wc_cache_get_stats(c, &st);
	ck_assert_uint_le(st.bytes_cached, 10 * 64 * KIB);
	wc_cache_destroy(c);
	ck_assert_int_eq(atomic_load(&s.refs), 1);
}
END_TEST

START_TEST(drop_source_drops_only_that_source)
{
	fake_backend fb;
	fake_backend_init(&fb, 4, 2);
	fake_source a, b;
	fake_source_init(&a, 21, 1, 8, 64 * KIB, 64 * KIB);
	fake_source_init(&b, 22, 2, 8, 64 * KIB, 64 * KIB);
	wc_cache *c = make_cache(&fb, 64ull << 20, 0);
	for (uint32_t t = 0; t < 8; t++) {
		get_check(c, &a, t);
		get_check(c, &b, t);
	}
	wc_tile_ref *held;
	ck_assert_int_eq(wc_cache_get(c, &a.base, 2, &held), WC_OK);
	wc_cache_drop_source(c, 21);
	wc_cache_stats st;
	wc_cache_get_stats(c, &st);
	ck_assert_uint_eq(st.bytes_cached, 9 * 64 * KIB); /* b's 8 + a's held one */
	ck_assert_uint_eq(fake_tile_check(a.seed, 2, held->data, held->size), 0);
	wc_cache_release(c, held);
	unsigned before = atomic_load(&fb.decodes);
	for (uint32_t t = 0; t < 8; t++)
		get_check(c, &b, t); /* hits */
	ck_assert_uint_eq(atomic_load(&fb.decodes), before);
	get_check(c, &a, 5); /* dropped: decoded again */
	ck_assert_uint_eq(atomic_load(&fb.decodes), before + 1);
	get_check(c, &a, 2); /* was held during the drop: still cached */
	ck_assert_uint_eq(atomic_load(&fb.decodes), before + 1);

	/* Tiles of a dropped source still decoding or queued are not kept. */
	wc_cache_get_stats(c, &st);
	uint64_t bytes = st.bytes_cached, decodes = st.decodes;
	atomic_store(&fb.gate, 1);
	fake_source d;
	fake_source_init(&d, 23, 3, 8, 64 * KIB, 64 * KIB);
	wc_cache_prefetch(c, &d.base, 0, 8);
	while (atomic_load(&fb.in_flight) == 0)
		usleep(1000); /* a batch of d's tiles is decoding (held at the gate) */
	wc_cache_drop_source(c, 23);
	atomic_store(&fb.gate, 0);
	for (int i = 0; i < 5000 && atomic_load(&d.refs) != 1; i++)
		usleep(1000); /* the cache releases d once its last decode is published */
	wc_cache_get_stats(c, &st);
	ck_assert_uint_le(st.decodes - decodes, 8);
	ck_assert_uint_eq(st.bytes_cached, bytes); /* none of d's tiles stayed */
	ck_assert_int_eq(atomic_load(&d.refs), 1);
	wc_cache_destroy(c);
	ck_assert_int_eq(atomic_load(&a.refs), 1);
	ck_assert_int_eq(atomic_load(&b.refs), 1);
}
END_TEST

START_TEST(destroy_with_work_queued_releases_everything)
{
	fake_backend fb;
	fake_backend_init(&fb, 2, 2);
	fb.delay_us = 20000;
	fake_source s;
	fake_source_init(&s, 31, 4, 64, 100 * KIB, 3 * KIB);
	wc_cache *c = make_cache(&fb, 1ull << 20, 32);
	for (uint32_t t = 60; t < 64; t++)
		get_check(c, &s, t);
	wc_cache_prefetch(c, &s.base, 0, 64);
	ck_assert_int_gt(atomic_load(&s.refs), 1);
	wc_cache_destroy(c); /* with prefetches queued and in flight */
	ck_assert_int_eq(atomic_load(&s.refs), 1);
	ck_assert_uint_eq(atomic_load(&fb.in_flight), 0);
}
END_TEST

/* ---- memory: freed tiles leave the RSS ------------------------------------ */

typedef struct rss_reader {
	wc_cache *c;
	fake_source *s;
	uint32_t first;
	long max_rss_kib;
	size_t bad;
} rss_reader;

static void *rss_reader_main(void *arg)
{
	rss_reader *r = arg;
	for (uint32_t k = 0; k < r->s->ntiles; k++) {
		uint32_t t = (r->first + k) % r->s->ntiles;
		wc_cache_prefetch(r->c, &r->s->base, t + 1, 4);
		wc_tile_ref *ref;
		if (wc_cache_get(r->c, &r->s->base, t, &ref) != WC_OK) {
			r->bad++;
			continue;
		}
		uint8_t want[64];
		fake_tile_bytes(r->s->seed, t, want, sizeof want); /* the stream's first bytes */
		r->bad += memcmp(ref->data, want, sizeof want) != 0;
		long rss = rss_kib();
		if (rss > r->max_rss_kib)
			r->max_rss_kib = rss;
		wc_cache_release(r->c, ref);
	}
	return NULL;
}

/* Four streaming readers through a cache much smaller than the file: the
 * process's RSS stays within the budget plus a little (tile buffers are
 * mmap()ed, so evicted ones leave the RSS at once). Skipped under ASan,
 * whose allocator quarantine keeps freed memory resident on purpose. */
START_TEST(rss_stays_within_budget_while_streaming)
{
#if defined(__SANITIZE_ADDRESS__)
	return;
#endif
	fake_backend fb;
	fake_backend_init(&fb, 4, 2);
	fake_source s;
	fake_source_init(&s, 41, 9, 192, 1u << 20, 1u << 20); /* 192 MiB */
	uint64_t budget = 24ull << 20;
	long base = rss_kib();
	wc_cache *c = make_cache(&fb, budget, 8);
	rss_reader r[4];
	pthread_t th[4];
	for (int i = 0; i < 4; i++) {
		r[i] = (rss_reader){ .c = c, .s = &s, .first = (uint32_t)(48 * i) };
		pthread_create(&th[i], NULL, rss_reader_main, &r[i]);
	}
	long peak = 0;
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		ck_assert_uint_eq(r[i].bad, 0);
		if (r[i].max_rss_kib > peak)
			peak = r[i].max_rss_kib;
	}
	wc_cache_stats st;
	wc_cache_get_stats(c, &st);
	ck_assert_uint_gt(st.evictions, 100);
	ck_assert_uint_le(st.bytes_cached, budget);
	/* Allowance over the budget: payload buffers, thread stacks, malloc arenas. */
	ck_assert_msg(peak - base <= (long)(budget >> 10) + 16 * 1024,
		      "RSS grew by %ld KiB for a budget of %llu KiB", peak - base,
		      (unsigned long long)(budget >> 10));
	wc_cache_destroy(c);
	ck_assert_msg(rss_kib() - base <= 8 * 1024, "RSS after destroy: +%ld KiB", rss_kib() - base);
	ck_assert_int_eq(atomic_load(&s.refs), 1);
}
END_TEST

/* A streaming reader releasing its tiles as consumed: every byte is right
 * (later tiles decode into the buffers of earlier ones), only a few MiB of
 * consumed tiles stay cached, the latest of them still hit, and consumed
 * tiles are evicted before tiles released normally. */
START_TEST(consumed_tiles_recycle_their_buffers)
{
	fake_backend fb;
	fake_backend_init(&fb, 4, 2);
	fake_source s;
	fake_source_init(&s, 1, 9, 200, 256 * KIB, 100 * KIB);
	wc_cache *c = make_cache(&fb, 64ull << 20, 0);
	wc_tile_ref *keep = NULL;
	ck_assert_int_eq(wc_cache_get(c, &s.base, 0, &keep), WC_OK);
	wc_cache_release(c, keep); /* a normally released tile */
	stream_consumed(c, &s, 1, s.ntiles);
	wc_cache_stats st;
	wc_cache_get_stats(c, &st);
	ck_assert_uint_eq(st.decodes, 200);
	ck_assert_uint_eq(st.evictions, 0);
	/* tile 0 (released normally) + at most 1 MiB of consumed tiles (the
	 * window is kept short so that reused buffers are still in the CPU's
	 * caches: cache.c, CONSUMED_KEEP_BYTES) */
	ck_assert_uint_le(st.bytes_cached, 256 * KIB + (1u << 20));
	get_check(c, &s, 0);           /* still cached */
	get_check(c, &s, s.ntiles - 1); /* the latest consumed tile too */
	get_check(c, &s, 1);           /* long dropped: decoded again */
	wc_cache_get_stats(c, &st);
	ck_assert_uint_eq(st.hits, 2);
	ck_assert_uint_eq(st.decodes, 201);
	/* Bigger tiles than any pooled buffer: buffers grow (mremap), bytes
	 * stay right, and the budget still holds. */
	fake_source big;
	fake_source_init(&big, 2, 11, 40, 900 * KIB, 70 * KIB);
	stream_consumed(c, &big, 0, big.ntiles);
	wc_cache_get_stats(c, &st);
	ck_assert_uint_le(st.bytes_cached, 2 * 256 * KIB + (1u << 20) + 2 * 900 * KIB);
	wc_cache_destroy(c);
	ck_assert_int_eq(atomic_load(&s.refs), 1);
	ck_assert_int_eq(atomic_load(&big.refs), 1);
}
END_TEST

/* A stream through tensors of many tile sizes (a model file: 1 MiB tiles of
 * big tensors, smaller ones of small tensors), each tile prefetched ahead of
 * the reader and released as consumed, three times over under a 64 MiB
 * budget: after the first pass the stream decodes into pooled buffers and
 * maps almost none (with a pool of an eighth of the budget it mapped a
 * fresh buffer for about one tile in three, pass after pass). Then tiles
 * released normally fill the budget: the pool gives up only the room they
 * need, and the budget holds throughout. */
START_TEST(a_stream_of_mixed_tile_sizes_reuses_its_buffers)
{
	fake_backend fb;
	fake_backend_init(&fb, 4, 2);
	enum { NSRC = 6 };
	static const uint32_t dsize[NSRC] = { 1024 * KIB, 96 * KIB, 512 * KIB, 200 * KIB, 1024 * KIB, 300 * KIB };
	static const uint32_t ntiles[NSRC] = { 12, 20, 6, 10, 8, 9 };
	fake_source src[NSRC];
	for (int i = 0; i < NSRC; i++)
		fake_source_init(&src[i], (uint64_t)(10 + i), (uint64_t)(70 + i), ntiles[i], dsize[i], dsize[i]);
	const uint64_t budget = 64ull << 20;
	wc_cache *c = make_cache(&fb, budget, 8);
	wc_cache_stats st;
	uint64_t allocs_after[3];
	for (int pass = 0; pass < 3; pass++) {
		for (int k = 0; k < 4 * NSRC; k++) { /* the sources in turn, four times a pass */
			fake_source *f = &src[k % NSRC];
			for (uint32_t t = 0; t < f->ntiles; t++) {
				wc_cache_prefetch(c, &f->base, t + 1, 8);
				wc_tile_ref *r = NULL;
				ck_assert_int_eq(wc_cache_get(c, &f->base, t, &r), WC_OK);
				ck_assert_uint_eq(fake_tile_check(f->seed, t, r->data, r->size), 0);
				wc_cache_release_consumed(c, r);
			}
		}
		wc_cache_get_stats(c, &st);
		allocs_after[pass] = st.buf_allocs;
		ck_assert_uint_le(st.bytes_cached, budget);
	}
	ck_assert_msg(allocs_after[2] - allocs_after[0] <= 8, "passes 2 and 3 mapped %llu buffers (%llu in pass 1)",
		      (unsigned long long)(allocs_after[2] - allocs_after[0]), (unsigned long long)allocs_after[0]);
	/* 56 tiles of 1 MiB held by readers, released normally: the budget
	 * holds, the pool gives up buffers only as they are needed, and every
	 * byte is right. */
	fake_source lru;
	fake_source_init(&lru, 30, 80, 56, 1024 * KIB, 1024 * KIB);
	const uint64_t frees_before = st.buf_frees;
	for (uint32_t t = 0; t < lru.ntiles; t++) {
		get_check(c, &lru, t);
		wc_cache_get_stats(c, &st);
		ck_assert_uint_le(st.bytes_cached, budget);
	}
	ck_assert_msg(st.buf_frees - frees_before <= 40, "%llu buffers freed",
		      (unsigned long long)(st.buf_frees - frees_before));
	for (uint32_t t = 0; t < lru.ntiles; t++) /* all still cached */
		get_check(c, &lru, t);
	wc_cache_destroy(c);
	for (int i = 0; i < NSRC; i++)
		ck_assert_int_eq(atomic_load(&src[i].refs), 1);
	ck_assert_int_eq(atomic_load(&lru.refs), 1);
}
END_TEST

/* Two FUSE threads hold one tile (two requests of one stream); the one that
 * read the tile's end releases it as consumed first, the other lets go of it
 * last with a plain release: the tile is still filed as consumed, so the
 * stream's tiles do not pile up on the LRU (they did: every fresh mount
 * faulted in cache_size bytes of buffers). */
START_TEST(consumed_hint_survives_a_later_plain_release)
{
	fake_backend fb;
	fake_backend_init(&fb, 4, 2);
	fake_source s;
	fake_source_init(&s, 1, 5, 64, 256 * KIB, 100 * KIB);
	wc_cache *c = make_cache(&fb, 64ull << 20, 0);
	for (uint32_t t = 0; t < s.ntiles; t++) {
		wc_tile_ref *a = NULL, *b = NULL;
		ck_assert_int_eq(wc_cache_get(c, &s.base, t, &a), WC_OK);
		ck_assert_int_eq(wc_cache_get(c, &s.base, t, &b), WC_OK);
		ck_assert_ptr_eq(a, b);
		ck_assert_uint_eq(fake_tile_check(s.seed, t, a->data, a->size), 0);
		wc_cache_release_consumed(c, a);
		wc_cache_release(c, b);
	}
	wc_cache_stats st;
	wc_cache_get_stats(c, &st);
	ck_assert_uint_eq(st.decodes, 64);
	ck_assert_uint_le(st.bytes_cached, 4u << 20); /* 16 MiB went through */
	get_check(c, &s, 0); /* dropped: decoded again */
	wc_cache_get_stats(c, &st);
	ck_assert_uint_eq(st.decodes, 65);
	wc_cache_destroy(c);
	ck_assert_int_eq(atomic_load(&s.refs), 1);
}
END_TEST

/* Position of (seed, tile) in the fake backend's decode log; -1 if absent. */
static int decoded_at(fake_backend *fb, const fake_source *s, uint32_t tile)
{
	unsigned n = atomic_load(&fb->nlog);
	for (unsigned i = 0; i < n && i < FAKE_LOG; i++)
		if (fb->log_src[i] == s->seed && fb->log_tile[i] == tile)
			return (int)i;
	return -1;
}

/* Two streams' readahead queued one after the other: their near tiles are
 * decoded before either stream's far ones. */
START_TEST(prefetch_queue_puts_near_tiles_first)
{
	fake_backend fb;
	fake_backend_init(&fb, 1, 1);
	fake_source a, b;
	fake_source_init(&a, 1, 101, 16, 64 * KIB, 64 * KIB);
	fake_source_init(&b, 2, 202, 16, 64 * KIB, 64 * KIB);
	wc_cache *c = make_cache(&fb, 64u << 20, 32);
	atomic_store(&fb.gate, 1);
	wc_cache_prefetch(c, &a.base, 0, 1); /* holds the one dispatcher at the gate */
	ck_assert_uint_eq(fake_wait_in_flight(&fb, 1), 1);
	wc_cache_prefetch(c, &a.base, 1, 8);
	wc_cache_prefetch(c, &b.base, 1, 8);
	atomic_store(&fb.gate, 0);
	wait_decodes(c, 17);
	/* Queued by due time: b's tile 1 was asked for a moment after a's
	 * tile 1 and is due long before a's tile 4 (1.5 ms later). */
	int a1 = decoded_at(&fb, &a, 1), b1 = decoded_at(&fb, &b, 1), a4 = decoded_at(&fb, &a, 4);
	ck_assert_int_eq(a1, 1);
	ck_assert_msg(b1 >= 0 && b1 < a4, "b's tile 1 decoded at %d, a's tile 4 at %d", b1, a4);
	ck_assert_int_lt(decoded_at(&fb, &b, 2), decoded_at(&fb, &a, 8));
	for (uint32_t t = 0; t < 9; t++)
		get_check(c, &a, t);
	for (uint32_t t = 1; t < 9; t++)
		get_check(c, &b, t);
	wc_cache_destroy(c);
}
END_TEST

/* A dispatcher takes at most its share of the queue: the others get the
 * rest rather than idle while its batch holds every queued tile. */
START_TEST(dispatchers_share_the_queue)
{
	fake_backend fb;
	fake_backend_init(&fb, 16, 2);
	fake_source s;
	fake_source_init(&s, 3, 303, 32, 64 * KIB, 64 * KIB);
	wc_cache *c = make_cache(&fb, 64u << 20, 32);
	atomic_store(&fb.gate, 1);
	wc_cache_prefetch(c, &s.base, 0, 1);
	ck_assert_uint_eq(fake_wait_in_flight(&fb, 1), 1);
	wc_cache_prefetch(c, &s.base, 1, 1);
	ck_assert_uint_eq(fake_wait_in_flight(&fb, 2), 2); /* both dispatchers busy */
	wc_cache_prefetch(c, &s.base, 2, 8);
	atomic_store(&fb.gate, 0);
	wait_decodes(c, 10);
	ck_assert_uint_eq(atomic_load(&fb.max_batch_seen), 4); /* 8 queued, 2 dispatchers */
	for (uint32_t t = 0; t < 10; t++)
		get_check(c, &s, t);
	wc_cache_destroy(c);
}
END_TEST

/* Make fb a backend with its own host allocator (as the CUDA backend's
 * page-locked memory): its ops copied into *ops, which must outlive it. */
static void give_host_allocator(fake_backend *fb, wc_backend_ops *ops, void *(*alloc)(size_t),
				void (*release)(void *, size_t))
{
	*ops = *fb->base.ops;
	ops->host_alloc = alloc;
	ops->host_free = release;
	fb->base.ops = ops;
}

/* A backend with its own host allocator: page-aligned heap memory here,
 * counted, standing in for the CUDA backend's page-locked buffers. */
static atomic_uint host_allocs;
static void *counting_host_alloc(size_t bytes)
{
	void *p = NULL;
	atomic_fetch_add(&host_allocs, 1);
	return posix_memalign(&p, 4096, bytes) == 0 ? p : NULL;
}
static void counting_host_free(void *p, size_t bytes)
{
	(void)bytes;
	free(p);
}

/* Wait (up to 5 s) until the cache's background prefill has made `allocs`
 * buffers, then 20 ms more, by when it would have gone on if it were not
 * done; the statistics then. */
static wc_cache_stats wait_for_prefill(wc_cache *c, uint64_t allocs)
{
	wc_cache_stats st;
	poll_stat(c, offsetof(wc_cache_stats, buf_allocs), allocs, &st);
	usleep(20000);
	wc_cache_get_stats(c, &st);
	return st;
}

/* The options of the prefill tests: a 4 MiB budget over backend b, so a
 * pool of budget / 2 = 2 MiB, eight 256 KiB tile buffers. */
static wc_cache_opts prefill_opts(wc_backend *b, unsigned max_prefetch)
{
	return (wc_cache_opts){ .budget_bytes = 4u << 20, .backend = b,
				.max_prefetch = max_prefetch, .prefill_tile_bytes = 256 * KIB };
}

/* A cache made with o once its prefill has made nine buffers (eight tile
 * buffers and the first dispatcher's payload buffer); its statistics then
 * in *st. */
static wc_cache *prefilled_cache(const wc_cache_opts *o, wc_cache_stats *st)
{
	wc_cache *c = NULL;
	ck_assert_int_eq(wc_cache_create(o, &c), WC_OK);
	*st = wait_for_prefill(c, 9);
	return c;
}

/* prefill_tile_bytes: the pool is filled before the first read (with the
 * backend's memory, the dispatcher also has its payload buffer), and the
 * first tiles decode into those buffers without allocating any. */
START_TEST(prefill_gives_the_first_tiles_their_buffers)
{
	fake_backend fb;
	fake_backend_init(&fb, 4, 1);
	wc_backend_ops ops;
	give_host_allocator(&fb, &ops, counting_host_alloc, counting_host_free);
	atomic_store(&host_allocs, 0);
	fake_source s;
	fake_source_init(&s, 4, 404, 64, 256 * KIB, 256 * KIB);
	const wc_cache_opts o = prefill_opts(&fb.base, 8);
	/* eight pooled tile buffers and one payload buffer of 4 x 256 KiB */
	wc_cache_stats st;
	wc_cache *c = prefilled_cache(&o, &st);
	ck_assert_uint_eq(st.buf_allocs, 9);
	ck_assert_uint_eq(st.buf_frees, 0);
	const unsigned before = atomic_load(&host_allocs);
	/* Eight tiles held at once: each takes a pooled buffer, and their
	 * payloads fit the dispatcher's buffer: the reads allocate nothing. */
	wc_tile_ref *refs[8];
	for (uint32_t t = 0; t < 8; t++) {
		ck_assert_int_eq(wc_cache_get(c, &s.base, t, &refs[t]), WC_OK);
		ck_assert_uint_eq(fake_tile_check(s.seed, t, refs[t]->data, refs[t]->size), 0);
	}
	ck_assert_uint_eq(atomic_load(&host_allocs) - before, 0);
	for (uint32_t t = 0; t < 8; t++)
		wc_cache_release(c, refs[t]);
	wc_cache_destroy(c);

	/* Without a host allocator the pool and the payload buffer are made of
	 * ordinary memory, faulted in before the first read, and the first
	 * tiles decode into them too. */
	fake_backend_init(&fb, 4, 1);
	c = NULL;
	ck_assert_int_eq(wc_cache_create(&o, &c), WC_OK);
	st = wait_for_prefill(c, 9);
	ck_assert_uint_eq(st.buf_allocs, 9);
	for (uint32_t t = 0; t < 8; t++) {
		ck_assert_int_eq(wc_cache_get(c, &s.base, t, &refs[t]), WC_OK);
		ck_assert_uint_eq(fake_tile_check(s.seed, t, refs[t]->data, refs[t]->size), 0);
	}
	wc_cache_get_stats(c, &st);
	ck_assert_uint_eq(st.buf_allocs, 9);
	for (uint32_t t = 0; t < 8; t++)
		wc_cache_release(c, refs[t]);
	wc_cache_destroy(c);
}
END_TEST

/* With the backend's own buffers (the CUDA backend's page-locked memory,
 * written by the device) a stream's consumed tiles stay a 4 MiB window deep,
 * not the 1 MiB of ordinary buffers (cache.c, CONSUMED_KEEP_BACKEND_BYTES),
 * and every byte is still right. */
START_TEST(consumed_window_of_backend_buffers)
{
	fake_backend fb;
	fake_backend_init(&fb, 4, 2);
	wc_backend_ops ops;
	give_host_allocator(&fb, &ops, counting_host_alloc, counting_host_free);
	fake_source s;
	fake_source_init(&s, 1, 19, 60, 256 * KIB, 256 * KIB);
	wc_cache *c = make_cache(&fb, 64ull << 20, 0);
	stream_consumed(c, &s, 0, s.ntiles);
	wc_cache_stats st;
	wc_cache_get_stats(c, &st);
	ck_assert_uint_eq(st.decodes, 60);
	ck_assert_uint_gt(st.bytes_cached, 2u << 20);
	ck_assert_uint_le(st.bytes_cached, 4u << 20);
	get_check(c, &s, s.ntiles - 12); /* inside the 4 MiB window: a hit */
	wc_cache_get_stats(c, &st);
	ck_assert_uint_eq(st.hits, 1);
	ck_assert_uint_eq(st.decodes, 60);
	wc_cache_destroy(c);
	ck_assert_int_eq(atomic_load(&s.refs), 1);
}
END_TEST

/* A host allocator that remembers what it handed out, so a free of memory
 * it did not allocate (a tile's ordinary buffer sent to the backend) is
 * caught rather than passed on to free(). */
#define TRACKED_MAX 64
static pthread_mutex_t tracked_lock = PTHREAD_MUTEX_INITIALIZER;
static void *tracked[TRACKED_MAX];
static unsigned tracked_live, tracked_foreign_frees;
static void *tracking_host_alloc(size_t bytes)
{
	void *p = NULL;
	if (posix_memalign(&p, 4096, bytes) != 0)
		return NULL;
	pthread_mutex_lock(&tracked_lock);
	for (int i = 0; i < TRACKED_MAX; i++)
		if (!tracked[i]) {
			tracked[i] = p;
			tracked_live++;
			pthread_mutex_unlock(&tracked_lock);
			return p;
		}
	pthread_mutex_unlock(&tracked_lock);
	free(p);
	return NULL;
}
static void tracking_host_free(void *p, size_t bytes)
{
	(void)bytes;
	pthread_mutex_lock(&tracked_lock);
	for (int i = 0; i < TRACKED_MAX; i++)
		if (tracked[i] == p) {
			tracked[i] = NULL;
			tracked_live--;
			pthread_mutex_unlock(&tracked_lock);
			free(p);
			return;
		}
	tracked_foreign_frees++; /* not ours: leaked rather than freed wrongly */
	pthread_mutex_unlock(&tracked_lock);
}

/* With a backend allocator, tiles beyond the prefilled pool get ordinary
 * buffers without calling it (page-locked memory is too slow to allocate
 * while readers wait); both kinds are recycled through the pool, every
 * byte is right, and each buffer is freed by the allocator that made it. */
START_TEST(tiles_beyond_the_pool_never_wait_for_backend_memory)
{
	fake_backend fb;
	fake_backend_init(&fb, 4, 2);
	wc_backend_ops ops;
	give_host_allocator(&fb, &ops, tracking_host_alloc, tracking_host_free);
	pthread_mutex_lock(&tracked_lock);
	tracked_live = tracked_foreign_frees = 0;
	pthread_mutex_unlock(&tracked_lock);
	fake_source s;
	fake_source_init(&s, 5, 505, 240, 256 * KIB, 256 * KIB);
	const wc_cache_opts o = prefill_opts(&fb.base, 4);
	wc_cache_stats st;
	wc_cache *c = prefilled_cache(&o, &st);
	pthread_mutex_lock(&tracked_lock);
	const unsigned prefilled = tracked_live;
	pthread_mutex_unlock(&tracked_lock);
	ck_assert_uint_ge(prefilled, 9); /* eight tile buffers, a payload buffer per dispatcher */
	/* 24 tiles held at once: 8 from the pool, 16 in ordinary buffers. */
	wc_tile_ref *refs[24];
	for (uint32_t t = 0; t < 24; t++) {
		ck_assert_int_eq(wc_cache_get(c, &s.base, t, &refs[t]), WC_OK);
		ck_assert_uint_eq(fake_tile_check(s.seed, t, refs[t]->data, refs[t]->size), 0);
	}
	pthread_mutex_lock(&tracked_lock);
	ck_assert_uint_eq(tracked_live, prefilled);
	pthread_mutex_unlock(&tracked_lock);
	for (uint32_t t = 0; t < 24; t++)
		wc_cache_release_consumed(c, refs[t]);
	/* A stream through the rest: both kinds of buffer go round the pool. */
	stream_consumed(c, &s, 24, s.ntiles);
	get_check(c, &s, 3); /* long dropped: decoded again, right */
	wc_cache_destroy(c);
	pthread_mutex_lock(&tracked_lock);
	ck_assert_uint_eq(tracked_foreign_frees, 0);
	ck_assert_uint_eq(tracked_live, 0);
	pthread_mutex_unlock(&tracked_lock);
	ck_assert_int_eq(atomic_load(&s.refs), 1);
}
END_TEST

/* Tiles decoded into buffers mapped for them (a cache with room for all, so
 * nothing is recycled) find their pages in memory when the decode starts:
 * the thread that reads the payload faults them in first, one call per
 * buffer, both for lone misses and for batches whose payloads several
 * threads read. The fake backend checks with mincore(2). */
START_TEST(fresh_buffers_are_faulted_in_before_the_decode)
{
	fake_backend fb;
	fake_backend_init(&fb, 8, 1);
	fb.check_resident = 1;
	fake_source s;
	fake_source_init(&s, 1, 5, 48, 256 * KIB, 200 * KIB);
	wc_cache_opts o = { .budget_bytes = 64ull << 20, .backend = &fb.base, .max_prefetch = 32,
			    .read_threads = 2 };
	wc_cache *c = NULL;
	ck_assert_int_eq(wc_cache_create(&o, &c), WC_OK);
	for (uint32_t t = 0; t < 16; t++) /* lone misses */
		get_check(c, &s, t);
	wc_cache_prefetch(c, &s.base, 16, 32); /* batches of up to 8 */
	for (uint32_t t = 16; t < s.ntiles; t++)
		get_check(c, &s, t);
	wc_cache_stats st;
	wc_cache_get_stats(c, &st);
	ck_assert_uint_eq(st.decodes, s.ntiles);
	ck_assert_uint_ge(st.buf_allocs, s.ntiles); /* every tile in a buffer of its own */
	ck_assert_uint_gt(atomic_load(&fb.max_batch_seen), 1);
	unsigned cold = atomic_load(&fb.cold_outputs);
	ck_assert_msg(cold == 0, "%u of %u tile buffers not in memory when their decode began", cold, s.ntiles);
	wc_cache_destroy(c);
	ck_assert_int_eq(atomic_load(&s.refs), 1);
}
END_TEST

START_TEST(create_rejects_missing_backend)
{
	wc_cache_opts o = { 0 };
	wc_cache *c = (wc_cache *)1;
	ck_assert_int_eq(wc_cache_create(&o, &c), WC_E_INVAL);
	ck_assert_ptr_null(c);
}
END_TEST

int main(void)
{
	Suite *su = suite_create("cache");
	TCase *tc = tcase_create("cache");
	tcase_add_test(tc, hits_and_misses_give_the_right_bytes);
	tcase_add_test(tc, concurrent_getters_share_one_decode);
	tcase_add_test(tc, budget_holds_under_concurrent_load);
	tcase_add_test(tc, referenced_entries_survive_eviction);
	tcase_add_test(tc, errors_reach_every_waiter_and_are_not_cached);
	tcase_add_test(tc, parallel_payload_reads);
	tcase_add_test(tc, prefetch_is_bounded_and_changes_no_bytes);
	tcase_add_test(tc, prefetch_bound_counts_bytes);
	tcase_add_test(tc, external_charges_count_against_the_budget);
	tcase_add_test(tc, prefetch_never_evicts_referenced_entries);
	tcase_add_test(tc, unused_prefetches_are_cold_but_survive_streaming);
	tcase_add_test(tc, drop_source_drops_only_that_source);
	tcase_add_test(tc, destroy_with_work_queued_releases_everything);
	tcase_add_test(tc, rss_stays_within_budget_while_streaming);
	tcase_add_test(tc, consumed_tiles_recycle_their_buffers);
	tcase_add_test(tc, consumed_hint_survives_a_later_plain_release);
	tcase_add_test(tc, consumed_window_of_backend_buffers);
	tcase_add_test(tc, prefetch_queue_puts_near_tiles_first);
	tcase_add_test(tc, dispatchers_share_the_queue);
	tcase_add_test(tc, prefill_gives_the_first_tiles_their_buffers);
	tcase_add_test(tc, tiles_beyond_the_pool_never_wait_for_backend_memory);
	tcase_add_test(tc, a_stream_of_mixed_tile_sizes_reuses_its_buffers);
	tcase_add_test(tc, fresh_buffers_are_faulted_in_before_the_decode);
	tcase_add_test(tc, create_rejects_missing_backend);
	suite_add_tcase(su, tc);
	return check_run(su);
}
