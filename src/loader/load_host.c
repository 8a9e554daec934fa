/* load_host.c - reading ranges of checkpoints into host memory on every
 * CPU (wc_load_host, loader.h). */
#include "loader/loader.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fileio.h"
#include "engine/threadpool.h"

#define PLAIN_PIECE ((uint64_t)8 << 20) /* bytes of a plain file per task */

/* One task: one tile of a .wcodec file, or up to PLAIN_PIECE bytes of a
 * plain one, for one range. */
typedef struct load_task {
	uint32_t range;
	uint32_t tile;    /* .wcodec: the tile */
	uint64_t off;     /* plain: data-section offset of the piece */
	uint64_t len;     /* plain: bytes */
	const uint8_t *payload; /* the tile's payload in a caller's run, or NULL: read it */
} load_task;

typedef struct load_job {
	wc_tensor_file *const *files;
	const wc_load_range *ranges;
	load_task *tasks;
	atomic_int failed;
	pthread_mutex_t mu;
	wc_err err;
	char why[600];
} load_job;

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static wc_threadpool *g_pool;

static void start_pool(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	if (n < 1)
		n = 1;
	if (n > 256)
		n = 256;
	/* the caller of wc_threadpool_run is the last thread */
	if (wc_threadpool_create((unsigned)n - 1u, &g_pool) != WC_OK)
		g_pool = NULL; /* every load then runs on its caller */
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

static void run_tile(load_job *j, const load_task *t)
{
	const wc_load_range *r = &j->ranges[t->range];
	wc_tensor_file *f = j->files[r->file];
	wc_container *c = wc_tensor_file_container(f);
	const wc_tile_info *ti = wc_container_tile(c, t->tile);
	size_t plen;
	wc_container_prefix(c, &plen);
	const uint64_t tbeg = ti->voff - plen, tend = tbeg + ti->dsize;
	const uint64_t beg = r->offset > tbeg ? r->offset : tbeg;
	const uint64_t end = r->offset + r->length < tend ? r->offset + r->length : tend;
	const int whole = beg == tbeg && end == tend;
	uint8_t *payload = t->payload ? NULL : malloc(ti->csize ? ti->csize : 1);
	uint8_t *tmp = whole ? NULL : malloc(ti->dsize ? ti->dsize : 1);
	wc_err e;
	if ((!t->payload && !payload) || (!whole && !tmp)) {
		e = wc_fail(WC_E_NOMEM, "tile %u: buffers of %u and %u bytes", t->tile, ti->csize, ti->dsize);
	} else if ((e = t->payload ? wc_container_check_payload(c, t->tile, t->payload)
				   : wc_container_read_payload(c, t->tile, payload)) == WC_OK) {
		uint8_t *out = whole ? (uint8_t *)r->dst + (tbeg - r->offset) : tmp;
		e = wc_container_decode_tile(c, t->tile, t->payload ? t->payload : payload, out);
		if (e == WC_OK && !whole)
			memcpy((uint8_t *)r->dst + (beg - r->offset), tmp + (beg - tbeg), (size_t)(end - beg));
	}
	if (e != WC_OK)
		fail_task(j, e, f, wc_container_tensor(c, ti->tensor)->name);
	free(payload);
	free(tmp);
}

static void run_task(void *arg, size_t i)
{
	load_job *j = arg;
	if (atomic_load_explicit(&j->failed, memory_order_relaxed))
		return;
	const load_task *t = &j->tasks[i];
	const wc_load_range *r = &j->ranges[t->range];
	wc_tensor_file *f = j->files[r->file];
	if (wc_tensor_file_container(f)) {
		run_tile(j, t);
		return;
	}
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

/* Check the ranges and count (tasks NULL) or fill the tasks; with runs,
 * every tile's payload must be in one. */
static wc_err plan(wc_tensor_file *const *files, size_t nfiles, const wc_payload_run *runs, size_t nruns,
		   int from_runs, const wc_load_range *ranges, size_t n, load_task *tasks, size_t *ntasks)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		const wc_load_range *r = &ranges[i];
		wc_err e = wc_load_range_check(files, nfiles, ranges, i);
		if (e != WC_OK)
			return e;
		const wc_tensor_file *f = files[r->file];
		if (r->length == 0)
			continue;
		wc_container *c = wc_tensor_file_container(f);
		if (!c) {
			for (uint64_t o = r->offset; o < r->offset + r->length; o += PLAIN_PIECE, k++) {
				if (!tasks)
					continue;
				uint64_t left = r->offset + r->length - o;
				tasks[k] = (load_task){ .range = (uint32_t)i, .off = o,
							.len = left < PLAIN_PIECE ? left : PLAIN_PIECE };
			}
			continue;
		}
		uint32_t first, last;
		if ((e = wc_tensor_file_tiles(f, r->offset, r->length, &first, &last)) != WC_OK)
			return e;
		for (uint32_t t = first; t <= last; t++, k++) {
			const uint8_t *p = from_runs ? wc_payload_run_find(files, runs, nruns, r->file, t) : NULL;
			if (from_runs && !p)
				return wc_fail(WC_E_INVAL, "%s: tile %u (range %zu) is in none of the %zu payload runs",
					       wc_tensor_file_path(f), t, i, nruns);
			if (tasks)
				tasks[k] = (load_task){ .range = (uint32_t)i, .tile = t, .payload = p };
		}
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
	size_t ntasks;
	wc_err e = wc_payload_runs_check(files, nfiles, runs, nruns);
	if (e == WC_OK)
		e = plan(files, nfiles, runs, nruns, from_runs, ranges, n, NULL, &ntasks);
	if (e != WC_OK || ntasks == 0)
		return e;
	load_job j = { .files = files, .ranges = ranges };
	j.tasks = malloc(ntasks * sizeof *j.tasks);
	if (!j.tasks)
		return wc_fail(WC_E_NOMEM, "load: %zu tasks", ntasks);
	plan(files, nfiles, runs, nruns, from_runs, ranges, n, j.tasks, &ntasks);
	atomic_init(&j.failed, 0);
	pthread_mutex_init(&j.mu, NULL);
	pthread_once(&g_once, start_pool);
	if (g_pool)
		wc_threadpool_run(g_pool, run_task, &j, ntasks);
	else
		for (size_t i = 0; i < ntasks; i++)
			run_task(&j, i);
	pthread_mutex_destroy(&j.mu);
	free(j.tasks);
	if (j.err != WC_OK)
		return wc_fail(j.err, "%s", j.why);
	return WC_OK;
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
