/*
 * fake_tiles.h - a tile source and a decode backend for engine tests that
 * need no codec: the source's payload of tile t names (seed, t), and the
 * backend "decodes" it into a deterministic byte stream of the tile's size
 * (splitmix64 of seed and tile), so any byte a cache hands out can be checked.
 * The backend counts decodes, can be slowed down or held at a gate, fail
 * chosen tiles a given number of times, or fail as a whole (WC_E_BACKEND).
 */
#ifndef WC_TESTS_FAKE_TILES_H
#define WC_TESTS_FAKE_TILES_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine/backend.h"
#include "engine/tile_source.h"

#define FAKE_PAYLOAD_BYTES 24u
#define FAKE_LOG 256u /* tiles the fake backend logs in decode order */
#define FAKE_MAGIC 0x54494c45u /* "TILE" */

/* Resident set size of this process in KiB (VmRSS of /proc/self/status),
 * or -1 if unreadable: how the cache tests and bench see freed tiles leave. */
static inline long rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kib = -1;
	while (f && fgets(line, sizeof line, f))
		if (strncmp(line, "VmRSS:", 6) == 0)
			kib = atol(line + 6);
	if (f)
		fclose(f);
	return kib;
}

static inline uint64_t fake_splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* The bytes tile `tile` of a source seeded `seed` decodes to. */
static inline void fake_tile_bytes(uint64_t seed, uint32_t tile, uint8_t *out, size_t n)
{
	uint64_t s = seed * 0x100000001b3ull + tile;
	for (size_t i = 0; i < n; i += 8) {
		uint64_t v = fake_splitmix(&s);
		size_t k = n - i < 8 ? n - i : 8;
		memcpy(out + i, &v, k);
	}
}

/* 0 if data equals the expected bytes of the tile, else 1 + the first bad offset. */
static inline size_t fake_tile_check(uint64_t seed, uint32_t tile, const uint8_t *data, size_t n)
{
	uint8_t *want = malloc(n ? n : 1);
	fake_tile_bytes(seed, tile, want, n);
	size_t bad = 0;
	for (size_t i = 0; i < n; i++)
		if (data[i] != want[i]) {
			bad = i + 1;
			break;
		}
	free(want);
	return bad;
}

/* ---- the source ---------------------------------------------------------- */

typedef struct fake_source {
	wc_tile_source base;
	uint64_t seed;
	uint32_t ntiles;
	uint32_t dsize;            /* bytes of every tile but the last */
	uint32_t last_dsize;       /* bytes of the last tile */
	atomic_int refs;           /* 1 + the cache's retains */
	atomic_int max_refs;
	atomic_uint reads;
	int fail_read_tile;        /* read_payload of this tile fails with WC_E_IO; -1 none */
} fake_source;

static uint32_t fake_ntiles(const wc_tile_source *s) { return ((const fake_source *)s)->ntiles; }

static uint32_t fake_dsize(const wc_tile_source *s, uint32_t t)
{
	const fake_source *f = (const fake_source *)s;
	return t + 1 == f->ntiles ? f->last_dsize : f->dsize;
}

static uint32_t fake_csize(const wc_tile_source *s, uint32_t t)
{
	(void)s;
	(void)t;
	return FAKE_PAYLOAD_BYTES;
}

static wc_err fake_read(const wc_tile_source *s, uint32_t t, uint8_t *buf)
{
	fake_source *f = (fake_source *)s;
	atomic_fetch_add(&f->reads, 1);
	if ((int)t == f->fail_read_tile)
		return wc_fail(WC_E_IO, "injected read error on tile %u", t);
	uint32_t magic = FAKE_MAGIC;
	memcpy(buf, &f->seed, 8);
	memcpy(buf + 8, &t, 4);
	memcpy(buf + 12, &magic, 4);
	uint64_t size = fake_dsize(s, t);
	memcpy(buf + 16, &size, 8);
	return WC_OK;
}

static void fake_describe(const wc_tile_source *s, uint32_t t, wc_tile_job *job)
{
	(void)t;
	job->kind = WC_JOB_PLANES;
	job->table_key = s->id;
}

static void fake_retain(wc_tile_source *s)
{
	fake_source *f = (fake_source *)s;
	int n = atomic_fetch_add(&f->refs, 1) + 1;
	int m = atomic_load(&f->max_refs);
	while (n > m && !atomic_compare_exchange_weak(&f->max_refs, &m, n))
		;
}

static void fake_release(wc_tile_source *s)
{
	atomic_fetch_sub(&((fake_source *)s)->refs, 1);
}

static const wc_tile_source_ops fake_source_ops = {
	.ntiles = fake_ntiles,
	.tile_dsize = fake_dsize,
	.tile_csize = fake_csize,
	.read_payload = fake_read,
	.describe_job = fake_describe,
	.retain = fake_retain,
	.release = fake_release,
};

static inline void fake_source_init(fake_source *f, uint64_t id, uint64_t seed, uint32_t ntiles,
				    uint32_t dsize, uint32_t last_dsize)
{
	memset(f, 0, sizeof *f);
	f->base.ops = &fake_source_ops;
	f->base.id = id;
	f->seed = seed;
	f->ntiles = ntiles;
	f->dsize = dsize;
	f->last_dsize = last_dsize;
	atomic_init(&f->refs, 1);
	atomic_init(&f->max_refs, 1);
	f->fail_read_tile = -1;
}

/* ---- the backend --------------------------------------------------------- */

typedef struct fake_backend {
	wc_backend base;
	atomic_uint calls;       /* decode() calls */
	atomic_uint decodes;     /* jobs decoded (or failed) */
	atomic_uint in_flight;   /* jobs inside decode() now */
	atomic_uint max_in_flight;
	atomic_uint delay_us;    /* sleep per decode() call */
	atomic_int gate;         /* while non-zero, decode() waits */
	uint32_t fail_tile;      /* this tile fails fail_times times; UINT32_MAX none */
	atomic_int fail_times;
	int whole_fails;         /* decode() scribbles over outputs, returns WC_E_BACKEND */
	atomic_uint max_batch_seen; /* most jobs in one decode() call */
	int check_resident;      /* set: count in cold_outputs the outputs of 64 KiB or more */
	atomic_uint cold_outputs; /* with a page not in memory when decode() began */
	atomic_uint nlog;        /* tiles logged in decode order, up to FAKE_LOG */
	uint64_t log_src[FAKE_LOG]; /* their payloads' seeds and tile numbers */
	uint32_t log_tile[FAKE_LOG];
} fake_backend;

/* Whether any page of [p, p + n) (p page-aligned) is not in memory
 * (mincore(2)): a fresh anonymous mapping's pages are not until written. */
static inline int fake_pages_missing(const uint8_t *p, size_t n)
{
	long pg = sysconf(_SC_PAGESIZE);
	size_t np = (n + (size_t)pg - 1) / (size_t)pg;
	unsigned char *v = malloc(np);
	int missing = !v || mincore((void *)(uintptr_t)p, n, v) != 0;
	for (size_t i = 0; !missing && i < np; i++)
		missing = !(v[i] & 1);
	free(v);
	return missing;
}

static wc_err fake_decode(wc_backend *be, wc_tile_job *jobs, size_t n)
{
	fake_backend *fb = (fake_backend *)be;
	atomic_fetch_add(&fb->calls, 1);
	unsigned now = atomic_fetch_add(&fb->in_flight, (unsigned)n) + (unsigned)n;
	unsigned m = atomic_load(&fb->max_in_flight);
	while (now > m && !atomic_compare_exchange_weak(&fb->max_in_flight, &m, now))
		;
	unsigned mb = atomic_load(&fb->max_batch_seen);
	while (n > mb && !atomic_compare_exchange_weak(&fb->max_batch_seen, &mb, (unsigned)n))
		;
	while (atomic_load(&fb->gate))
		usleep(200);
	unsigned delay = atomic_load(&fb->delay_us);
	if (delay)
		usleep(delay);
	wc_err ret = WC_OK;
	for (size_t i = 0; i < n; i++) {
		wc_tile_job *j = &jobs[i];
		atomic_fetch_add(&fb->decodes, 1);
		if (fb->whole_fails) {
			memset(j->out, 0xA5, j->out_size);
			j->status = WC_OK;
			ret = wc_fail(WC_E_BACKEND, "injected device failure");
			continue;
		}
		uint64_t seed, size;
		uint32_t tile, magic;
		if (j->payload_size != FAKE_PAYLOAD_BYTES) {
			wc_job_fail(j, WC_E_CORRUPT, "payload of %u bytes", j->payload_size);
			continue;
		}
		memcpy(&seed, j->payload, 8);
		memcpy(&tile, j->payload + 8, 4);
		memcpy(&magic, j->payload + 12, 4);
		memcpy(&size, j->payload + 16, 8);
		if (magic != FAKE_MAGIC || size != j->out_size) {
			wc_job_fail(j, WC_E_CORRUPT, "payload does not match the job");
			continue;
		}
		if (tile == fb->fail_tile && atomic_fetch_sub(&fb->fail_times, 1) > 0) {
			wc_job_fail(j, WC_E_CORRUPT, "injected failure on tile %u", tile);
			continue;
		}
		if (fb->check_resident && j->out_size >= (64u << 10) && fake_pages_missing(j->out, j->out_size))
			atomic_fetch_add(&fb->cold_outputs, 1);
		fake_tile_bytes(seed, tile, j->out, j->out_size);
		j->status = WC_OK;
		unsigned k = atomic_fetch_add(&fb->nlog, 1);
		if (k < FAKE_LOG) {
			fb->log_src[k] = seed;
			fb->log_tile[k] = tile;
		}
	}
	atomic_fetch_sub(&fb->in_flight, (unsigned)n);
	return ret;
}

static void fake_backend_destroy(wc_backend *be) { (void)be; }

static const wc_backend_ops fake_backend_ops = {
	.name = "fake",
	.decode = fake_decode,
	.destroy = fake_backend_destroy,
};

static inline void fake_backend_init(fake_backend *fb, uint32_t max_batch, uint32_t concurrency)
{
	memset(fb, 0, sizeof *fb);
	fb->base.ops = &fake_backend_ops;
	fb->base.max_batch = max_batch;
	fb->base.concurrency = concurrency;
	fb->fail_tile = UINT32_MAX;
}

/* Wait up to 5 s until n jobs are inside the fake backend's decode() (held
 * at its gate); returns how many are. */
static inline unsigned fake_wait_in_flight(fake_backend *fb, unsigned n)
{
	for (int i = 0; i < 5000 && atomic_load(&fb->in_flight) < n; i++)
		usleep(1000);
	return atomic_load(&fb->in_flight);
}

#endif /* WC_TESTS_FAKE_TILES_H */
