/*
 * backend_cpu.c - the CPU decode backend: a batch of tile jobs spread over a
 * thread pool, each decoded by the reference decoder wc_decode_job_cpu().
 */
#include <stdlib.h>
#include <unistd.h>

#include "engine/backend.h"
#include "engine/threadpool.h"

typedef struct cpu_backend {
	wc_backend base;
	wc_threadpool *pool;
} cpu_backend;

static void decode_one(void *ctx, size_t i)
{
	wc_tile_job *jobs = ctx;
	wc_decode_job_cpu(&jobs[i]);
}

static wc_err cpu_decode(wc_backend *be, wc_tile_job *jobs, size_t n)
{
	cpu_backend *cb = (cpu_backend *)be;
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
	if (threads == 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		threads = n > 0 ? (unsigned)n : 1;
	}
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
