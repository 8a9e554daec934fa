/* load_host.c - reading ranges of checkpoints into host memory on every
 * CPU (wc_load_host, loader.h). */
#include "loader/loader.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/threadpool.h"

#define PLAIN_PIECE ((uint64_t)8 << 20) /* bytes of a plain file per task */
/* A plain file's ranges under PLAIN_SMALL bytes (tensors of a model with
 * many small ones) are read together where they lie within PLAIN_GAP of
 * each other: one read (one request to an object store) for many, into a
 * buffer, then copied; larger ranges are read straight into place. */
#define PLAIN_SMALL ((uint64_t)1 << 20)
#define PLAIN_GAP ((uint64_t)64 << 10)

/* Payload bytes one task reads at most: a run of consecutive tiles read at
 * once (one request to an object store, whose latency would otherwise be
 * paid per tile). */
#define RUN_BYTES ((uint64_t)8 << 20)

/* A tile some range needs: the plan sorts these by (file, tile, range), so
 * a tile several ranges need (tensors sharing a tile) is read and decoded
 * once for all of them. */
typedef struct tile_use {
	uint32_t file, tile, range;
} tile_use;

/* A small plain range, with the keys it is sorted by. */
typedef struct small_range {
	uint32_t file, range;
	uint64_t offset;
} small_range;

/* One task: a run of consecutive tiles of one .wcodec file (uses[first,
 * first + n)); up to PLAIN_PIECE bytes of a plain file for one range; or
 * the small ranges small[first, first + n) of a plain file read at once. */
enum { TASK_TILES, TASK_PLAIN, TASK_PLAIN_SMALL };
typedef struct load_task {
	int kind;
	size_t first, n;        /* TASK_TILES: its uses; TASK_PLAIN_SMALL: its ranges in small[] */
	const uint8_t *payload; /* TASK_TILES from payload runs: the tile's payload (one tile a task) */
	uint32_t range;         /* TASK_PLAIN: the range */
	uint64_t off, len;      /* plain: data-section bytes read */
} load_task;

typedef struct load_job {
	wc_tensor_file *const *files;
	const wc_load_range *ranges;
	tile_use *uses;
	small_range *small; /* small plain ranges, by file and offset */
	load_task *tasks;
	atomic_int failed;
	pthread_mutex_t mu;
	wc_err err;
	char why[600];
} load_job;

/* Tasks of a load from an object store run on at least this many threads:
 * a task waits on its GET before it decodes, so as many CPUs as tasks
 * leave the link idle while they decode (on 2 cores: 0.76 of a 100 MB/s
 * link with 2 threads). At most REMOTE_THREADS * RUN_BYTES of payloads are
 * held at once. */
#define REMOTE_THREADS 8

static pthread_once_t g_once = PTHREAD_ONCE_INIT, g_remote_once = PTHREAD_ONCE_INIT;
static wc_threadpool *g_pool, *g_remote_pool;

static unsigned cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1u : n > 256 ? 256u : (unsigned)n;
}

/* The caller of wc_threadpool_run is the last thread; without a pool
 * every load runs on its caller. */
static void start_pool(void)
{
	if (wc_threadpool_create(cpus() - 1u, &g_pool) != WC_OK)
		g_pool = NULL;
}

static void start_remote_pool(void)
{
	unsigned n = cpus() > REMOTE_THREADS ? cpus() : REMOTE_THREADS;
	if (wc_threadpool_create(n - 1u, &g_remote_pool) != WC_OK)
		g_remote_pool = NULL;
}

static void fail_task(load_job *j, wc_err e, const wc_tensor_file *f, const char *tensor)
{
	pthread_mutex_lock(&j->mu);
	if (j->err == WC_OK) {
		j->err = e;
		if (tensor)
			snprintf(j->why, sizeof j->why, "%s: tensor '%s': %s", wc_tensor_file_path(f), tensor,
				 wc_last_detail());
		else
			snprintf(j->why, sizeof j->why, "%s: %s", wc_tensor_file_path(f), wc_last_detail());
	}
	pthread_mutex_unlock(&j->mu);
	atomic_store(&j->failed, 1);
}

/* Tile k, needed by the uses u[0..n) (all of tile k), decoded from payload
 * into their ranges: straight into the destination when one range takes
 * the whole tile, else once into *tmp and copied to each. */
static wc_err decode_tile(load_job *j, wc_container *c, uint32_t k, const tile_use *u, size_t n, const uint8_t *payload,
			  uint8_t **tmp)
{
	const wc_tile_info *ti = wc_container_tile(c, k);
	size_t plen;
	wc_container_prefix(c, &plen);
	const uint64_t tbeg = ti->voff - plen, tend = tbeg + ti->dsize;
	const wc_load_range *r0 = &j->ranges[u[0].range];
	if (n == 1 && r0->offset <= tbeg && r0->offset + r0->length >= tend)
		return wc_container_decode_tile(c, k, payload, (uint8_t *)r0->dst + (tbeg - r0->offset));
	if (!*tmp && !(*tmp = malloc(wc_container_tile_size(c))))
		return wc_fail(WC_E_NOMEM, "tile %u: a buffer of %u bytes", k, ti->dsize);
	wc_err e = wc_container_decode_tile(c, k, payload, *tmp);
	for (size_t i = 0; e == WC_OK && i < n; i++) {
		const wc_load_range *r = &j->ranges[u[i].range];
		const uint64_t beg = r->offset > tbeg ? r->offset : tbeg;
		const uint64_t end = r->offset + r->length < tend ? r->offset + r->length : tend;
		memcpy((uint8_t *)r->dst + (beg - r->offset), *tmp + (beg - tbeg), (size_t)(end - beg));
	}
	return e;
}

static void run_tiles(load_job *j, const load_task *t)
{
	const tile_use *u = &j->uses[t->first], *last = &u[t->n - 1];
	wc_tensor_file *f = j->files[u->file];
	wc_container *c = wc_tensor_file_container(f);
	const wc_tile_info *a = wc_container_tile(c, u->tile), *b = wc_container_tile(c, last->tile);
	uint8_t *payloads = t->payload ? NULL : malloc((size_t)(b->coff + b->csize - a->coff) + 1);
	uint8_t *tmp = NULL;
	uint32_t k = u->tile;
	wc_err e;
	if (!t->payload && !payloads)
		e = wc_fail(WC_E_NOMEM, "tiles %u..%u: a buffer of %llu bytes", u->tile, last->tile,
			    (unsigned long long)(b->coff + b->csize - a->coff));
	else if (t->payload)
		e = wc_container_check_payload(c, k, t->payload);
	else
		e = wc_container_read_payloads(c, u->tile, last->tile, payloads, &k);
	for (size_t i = 0; e == WC_OK && i < t->n;) {
		size_t m = 1;
		k = u[i].tile;
		while (i + m < t->n && u[i + m].tile == k)
			m++;
		e = decode_tile(j, c, k, &u[i], m,
				t->payload ? t->payload : payloads + (wc_container_tile(c, k)->coff - a->coff), &tmp);
		i += m;
	}
	if (e != WC_OK)
		fail_task(j, e, f, wc_container_tensor(c, wc_container_tile(c, k)->tensor)->name);
	free(payloads);
	free(tmp);
}

static void run_small(load_job *j, const load_task *t)
{
	wc_tensor_file *f = j->files[j->small[t->first].file];
	uint8_t *buf = malloc((size_t)t->len + 1);
	wc_err e = buf ? wc_tensor_file_read_data(f, buf, (size_t)t->len, t->off)
		       : wc_fail(WC_E_NOMEM, "a buffer of %llu bytes", (unsigned long long)t->len);
	for (size_t i = 0; e == WC_OK && i < t->n; i++) {
		const wc_load_range *r = &j->ranges[j->small[t->first + i].range];
		memcpy(r->dst, buf + (r->offset - t->off), (size_t)r->length);
	}
	if (e != WC_OK)
		fail_task(j, e, f, NULL);
	free(buf);
}

static void run_task(void *arg, size_t i)
{
	load_job *j = arg;
	if (atomic_load_explicit(&j->failed, memory_order_relaxed))
		return;
	const load_task *t = &j->tasks[i];
	if (t->kind == TASK_TILES) {
		run_tiles(j, t);
		return;
	}
	if (t->kind == TASK_PLAIN_SMALL) {
		run_small(j, t);
		return;
	}
	const wc_load_range *r = &j->ranges[t->range];
	wc_tensor_file *f = j->files[r->file];
	wc_err e = wc_tensor_file_read_data(f, (uint8_t *)r->dst + (t->off - r->offset), (size_t)t->len, t->off);
	if (e != WC_OK)
		fail_task(j, e, f, NULL);
}

const void *wc_payload_run_find(wc_tensor_file *const *files, const wc_payload_run *runs, size_t nruns,
				uint32_t file, uint32_t tile)
{
	for (size_t i = 0; i < nruns; i++) {
		const wc_payload_run *r = &runs[i];
		if (r->file != file || tile < r->first_tile || tile > r->last_tile)
			continue;
		const wc_container *c = wc_tensor_file_container(files[file]);
		return (const uint8_t *)r->bytes +
		       (wc_container_tile(c, tile)->coff - wc_container_tile(c, r->first_tile)->coff);
	}
	return NULL;
}

static int small_order(const void *x, const void *y)
{
	const small_range *a = x, *b = y;
	if (a->file != b->file)
		return a->file < b->file ? -1 : 1;
	return a->offset < b->offset ? -1 : a->offset > b->offset;
}

static int use_order(const void *x, const void *y)
{
	const tile_use *a = x, *b = y;
	if (a->file != b->file)
		return a->file < b->file ? -1 : 1;
	if (a->tile != b->tile)
		return a->tile < b->tile ? -1 : 1;
	return a->range < b->range ? -1 : a->range > b->range;
}

/* Check the ranges and plan j's tasks (j->uses, j->tasks, *ntasks): plain
 * pieces, and runs of the tiles the ranges need, each tile once; with runs,
 * every tile's payload must be in one and a task is one tile. */
static wc_err plan(load_job *j, size_t nfiles, const wc_payload_run *runs, size_t nruns, int from_runs, size_t n,
		   size_t *ntasks)
{
	wc_tensor_file *const *files = j->files;
	const wc_load_range *ranges = j->ranges;
	size_t nuses = 0, npieces = 0;
	for (size_t i = 0; i < n; i++) {
		const wc_load_range *r = &ranges[i];
		wc_err e = wc_load_range_check(files, nfiles, ranges, i);
		if (e != WC_OK)
			return e;
		if (r->length == 0)
			continue;
		uint32_t first, last;
		if (!wc_tensor_file_container(files[r->file]))
			npieces += r->length < PLAIN_SMALL ? 1 : (size_t)((r->length + PLAIN_PIECE - 1) / PLAIN_PIECE);
		else if ((e = wc_tensor_file_tiles(files[r->file], r->offset, r->length, &first, &last)) != WC_OK)
			return e;
		else
			nuses += last - first + 1u;
	}
	j->uses = malloc((nuses ? nuses : 1) * sizeof *j->uses);
	j->small = malloc((npieces ? npieces : 1) * sizeof *j->small);
	j->tasks = malloc((nuses + npieces ? nuses + npieces : 1) * sizeof *j->tasks);
	if (!j->uses || !j->small || !j->tasks)
		return wc_fail(WC_E_NOMEM, "load: %zu tiles and %zu pieces to read", nuses, npieces);
	size_t u = 0, k = 0, nsmall = 0;
	for (size_t i = 0; i < n; i++) {
		const wc_load_range *r = &ranges[i];
		if (r->length == 0)
			continue;
		if (!wc_tensor_file_container(files[r->file])) {
			if (r->length < PLAIN_SMALL) {
				j->small[nsmall++] = (small_range){ .file = r->file, .range = (uint32_t)i, .offset = r->offset };
				continue;
			}
			for (uint64_t o = r->offset; o < r->offset + r->length; o += PLAIN_PIECE) {
				uint64_t left = r->offset + r->length - o;
				j->tasks[k++] = (load_task){ .kind = TASK_PLAIN, .range = (uint32_t)i, .off = o,
							     .len = left < PLAIN_PIECE ? left : PLAIN_PIECE };
			}
			continue;
		}
		uint32_t first, last;
		wc_tensor_file_tiles(files[r->file], r->offset, r->length, &first, &last);
		for (uint32_t t = first; t <= last; t++)
			j->uses[u++] = (tile_use){ .file = r->file, .tile = t, .range = (uint32_t)i };
	}
	qsort(j->small, nsmall, sizeof *j->small, small_order);
	for (size_t i = 0; i < nsmall;) { /* small ranges within PLAIN_GAP of each other, up to PLAIN_PIECE */
		const wc_load_range *a = &ranges[j->small[i].range];
		uint64_t end = a->offset + a->length;
		size_t m = 1;
		for (; i + m < nsmall; m++) {
			const wc_load_range *b = &ranges[j->small[i + m].range];
			uint64_t e2 = b->offset + b->length > end ? b->offset + b->length : end;
			if (b->file != a->file || b->offset > end + PLAIN_GAP || e2 - a->offset > PLAIN_PIECE)
				break;
			end = e2;
		}
		j->tasks[k++] = (load_task){ .kind = TASK_PLAIN_SMALL, .first = i, .n = m, .off = a->offset,
					     .len = end - a->offset };
		i += m;
	}
	qsort(j->uses, nuses, sizeof *j->uses, use_order);
	for (size_t i = 0; i < nuses;) {
		const tile_use *a = &j->uses[i];
		const wc_container *c = wc_tensor_file_container(files[a->file]);
		const uint8_t *p = from_runs ? wc_payload_run_find(files, runs, nruns, a->file, a->tile) : NULL;
		if (from_runs && !p)
			return wc_fail(WC_E_INVAL, "%s: tile %u (range %u) is in none of the %zu payload runs",
				       wc_tensor_file_path(files[a->file]), a->tile, a->range, nruns);
		size_t m = 1; /* this tile's uses, then the next tiles' while they follow it in the file */
		for (; i + m < nuses; m++) {
			const tile_use *b = &j->uses[i + m], *prev = b - 1;
			if (b->file != a->file)
				break;
			if (b->tile == prev->tile)
				continue;
			const wc_tile_info *ta = wc_container_tile(c, a->tile), *tb = wc_container_tile(c, b->tile);
			if (from_runs || b->tile != prev->tile + 1 || tb->coff + tb->csize - ta->coff > RUN_BYTES)
				break;
		}
		j->tasks[k++] = (load_task){ .kind = TASK_TILES, .first = i, .n = m, .payload = p };
		i += m;
	}
	*ntasks = k;
	return WC_OK;
}

wc_err wc_payload_runs_check(wc_tensor_file *const *files, size_t nfiles, const wc_payload_run *runs, size_t nruns)
{
	for (size_t i = 0; i < nruns; i++) {
		const wc_payload_run *r = &runs[i];
		const wc_container *c = r->file < nfiles && files[r->file] ? wc_tensor_file_container(files[r->file])
									     : NULL;
		if (!c || r->reserved || !r->bytes || r->first_tile > r->last_tile || r->last_tile >= wc_container_ntiles(c))
			return wc_fail(WC_E_INVAL, "payload run %zu: file %u of %zu (%s), tiles %u..%u, reserved %u", i,
				       r->file, nfiles, c ? ".wcodec" : "none or plain", r->first_tile, r->last_tile,
				       r->reserved);
	}
	return WC_OK;
}

static wc_err load(wc_tensor_file *const *files, size_t nfiles, const wc_payload_run *runs, size_t nruns,
		   int from_runs, const wc_load_range *ranges, size_t n)
{
	size_t ntasks = 0;
	load_job j = { .files = files, .ranges = ranges };
	wc_err e = wc_payload_runs_check(files, nfiles, runs, nruns);
	if (e == WC_OK)
		e = plan(&j, nfiles, runs, nruns, from_runs, n, &ntasks);
	if (e == WC_OK && ntasks) {
		atomic_init(&j.failed, 0);
		pthread_mutex_init(&j.mu, NULL);
		int remote = 0;
		for (size_t i = 0; i < nfiles && !remote && !from_runs; i++)
			remote = files[i] && wc_tensor_file_remote(files[i]);
		pthread_once(&g_once, start_pool);
		if (remote)
			pthread_once(&g_remote_once, start_remote_pool);
		wc_threadpool *pool = remote && g_remote_pool ? g_remote_pool : g_pool;
		if (pool)
			wc_threadpool_run(pool, run_task, &j, ntasks);
		else
			for (size_t i = 0; i < ntasks; i++)
				run_task(&j, i);
		pthread_mutex_destroy(&j.mu);
		if (j.err != WC_OK)
			e = wc_fail(j.err, "%s", j.why);
	}
	free(j.uses);
	free(j.small);
	free(j.tasks);
	return e;
}

wc_err wc_load_host(wc_tensor_file *const *files, size_t nfiles, const wc_load_range *ranges, size_t n)
{
	return load(files, nfiles, NULL, 0, 0, ranges, n);
}

wc_err wc_load_host_payloads(wc_tensor_file *const *files, size_t nfiles, const wc_payload_run *runs, size_t nruns,
			     const wc_load_range *ranges, size_t n)
{
	return load(files, nfiles, runs, runs ? nruns : 0, 1, ranges, n);
}
