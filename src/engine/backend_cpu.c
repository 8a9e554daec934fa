/*
 * backend_cpu.c - the CPU decode backend: a batch of tile jobs spread over a
 * thread pool, each decoded by the reference decoder wc_decode_job_cpu().
 * In a batch of fewer tiles than threads, the tiles a reader waits for are
 * decoded in parts, one run of chunks per thread (wc_tile_decode_part), then
 * hashed whole.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "codec/tile_codec.h"
#include "core/limits.h"
#include "core/wc_error.h"
#include "engine/backend.h"
#include "engine/threadpool.h"

/* The least output a part is worth: below it the per-part work (parsing the
 * payload's header, a decoding table per thread, waking a worker) outweighs
 * what a second thread saves. 4 chunks of a BF16 plane at the default
 * chunk size. */
#define PART_MIN_BYTES (128u << 10)

typedef struct cpu_backend {
	wc_backend base;
	wc_threadpool *pool;
} cpu_backend;

static void decode_one(void *ctx, size_t i)
{
	wc_tile_job *jobs = ctx;
	wc_decode_job_cpu(&jobs[i]);
}

/* One part of a split batch: part `part` of job `job`'s nparts, and how it
 * ended (a job of one part is decoded whole, status in the job). */
typedef struct job_part {
	wc_tile_job *job;
	unsigned part, nparts;
	wc_err err;
	char detail[sizeof ((wc_tile_job *)0)->detail];
} job_part;

static void decode_part(void *ctx, size_t i)
{
	job_part *jp = &((job_part *)ctx)[i];
	if (jp->nparts == 1) { /* a whole job: decoded and checked as usual */
		wc_decode_job_cpu(jp->job);
		return;
	}
	const wc_tile_job *j = jp->job;
	wc_clear_detail();
	jp->err = wc_tile_decode_part(j->layout, j->payload, j->payload_size, j->tables, j->ntables,
				      j->chunk_symbols, j->dict, j->dict_entries, j->out, j->out_size,
				      jp->part, jp->nparts);
	if (jp->err != WC_OK)
		snprintf(jp->detail, sizeof jp->detail, "%s",
			 *wc_last_detail() ? wc_last_detail() : wc_strerror(jp->err));
}

/* Parts for job j when `share` threads are its share of the pool: tiles a
 * reader waits for only (prefetches keep the stream's threads busy already:
 * cutting them made 5 times the context switches), tensor tiles only (an
 * image tile decodes whole), and no part smaller than PART_MIN_BYTES. */
static unsigned parts_for(const wc_tile_job *j, unsigned share)
{
	if (!j->reader_waits || j->kind != WC_JOB_PLANES)
		return 1;
	size_t by_size = j->out_size / PART_MIN_BYTES;
	return by_size < 1 ? 1 : by_size < share ? (unsigned)by_size : share;
}

/* Decode jobs[0..n), n below the thread count, in parts spread over every
 * thread; then each job whose parts all decoded is checked against its
 * hash, and a job with a failed part takes the first failure's reason.
 * False, with nothing decoded, if no job is worth cutting or the parts'
 * table cannot be allocated. */
static bool decode_split(cpu_backend *cb, wc_tile_job *jobs, size_t n, unsigned threads)
{
	const unsigned share = (unsigned)((threads + n - 1) / n);
	size_t nparts = 0;
	for (size_t i = 0; i < n; i++)
		nparts += parts_for(&jobs[i], share);
	if (nparts == n)
		return false; /* nothing to cut */
	job_part *parts = malloc(nparts * sizeof *parts);
	if (!parts)
		return false;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned np = parts_for(&jobs[i], share);
		for (unsigned p = 0; p < np; p++)
			parts[k++] = (job_part){.job = &jobs[i], .part = p, .nparts = np};
	}
	wc_threadpool_run(cb->pool, decode_part, parts, nparts);
	k = 0;
	for (size_t i = 0; i < n; i++) {
		wc_tile_job *j = &jobs[i];
		const unsigned np = parts[k].nparts;
		const job_part *failed = NULL;
		for (unsigned p = 0; p < np; p++)
			if (!failed && parts[k + p].err != WC_OK)
				failed = &parts[k + p];
		k += np;
		if (np == 1)
			continue; /* wc_decode_job_cpu set its status */
		j->status = WC_OK;
		j->detail[0] = '\0';
		if (failed)
			wc_job_fail(j, failed->err, "%s", failed->detail);
		else
			wc_job_check_hash(j);
	}
	free(parts);
	return true;
}

static wc_err cpu_decode(wc_backend *be, wc_tile_job *jobs, size_t n)
{
	cpu_backend *cb = (cpu_backend *)be;
	const unsigned threads = wc_threadpool_threads(cb->pool) + 1;
	if (n < threads && decode_split(cb, jobs, n, threads))
		return WC_OK;
	wc_threadpool_run(cb->pool, decode_one, jobs, n);
	return WC_OK; /* per-job errors are in each job's status */
}

static void cpu_destroy(wc_backend *be)
{
	cpu_backend *cb = (cpu_backend *)be;
	wc_threadpool_destroy(cb->pool);
	free(cb);
}

static const wc_backend_ops cpu_ops = {
	.name = "cpu",
	.decode = cpu_decode,
	.destroy = cpu_destroy,
};

wc_err wc_backend_cpu_create(unsigned threads, wc_backend **out)
{
	*out = NULL;
	if (threads == 0)
		threads = wc_cpu_count();
	if (threads > 1024)
		return wc_fail(WC_E_RANGE, "%u decode threads (at most 1024)", threads);
	cpu_backend *cb = calloc(1, sizeof *cb);
	if (!cb)
		return wc_fail(WC_E_NOMEM, "CPU backend");
	/* The thread calling decode works on its own batch too, so threads - 1
	 * workers make `threads` decoding threads for one caller. */
	wc_err e = wc_threadpool_create(threads - 1, &cb->pool);
	if (e != WC_OK) {
		free(cb);
		return e;
	}
	cb->base.ops = &cpu_ops;
	/* Two dispatchers, each handing the pool two tiles per thread: while one
	 * dispatcher reads payloads and publishes results, the other's batch keeps
	 * every core busy, and a batch is still small enough that a reader's miss
	 * does not wait behind much prefetch work. */
	cb->base.max_batch = 2 * threads;
	cb->base.concurrency = 2;
	*out = &cb->base;
	return WC_OK;
}
