/*
 * wcc_device.c - the GPU decode context and batch pipeline (wcc_device.h):
 * the context, submitting and completing lanes, and decode calls; what a job
 * needs and how it fills a lane is wcc_lane.c's (wcc_impl.h).
 */
#include "wcc_device.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "codec/tile_codec.h"
#include "core/clock.h"
#include "core/hash.h"
#include "engine/threadpool.h"
#include "container/lossy_job.h"
#include "wcc_impl.h"
#include "wcc_kernels.h"

wc_err wcc_cuda_fail(wcc_ctx *ctx, const char *what, cudaError_t e)
{
	if (ctx && !ctx->dead) {
		ctx->dead = 1;
		wc_log(WC_LOG_ERR, "cuda: %s failed on GPU %d: %s; GPU decoding disabled",
		       what, ctx->gpu, cudaGetErrorString(e));
	}
	return wc_fail(WC_E_BACKEND, "cuda: %s: %s", what, cudaGetErrorString(e));
}

/* ---- context ---------------------------------------------------------- */

static void lane_free_all(wcc_lane *ln)
{
	if (ln->stream)
		cudaStreamDestroy(ln->stream);
	if (ln->done)
		cudaEventDestroy(ln->done);
	if (ln->k0)
		cudaEventDestroy(ln->k0);
	if (ln->k1)
		cudaEventDestroy(ln->k1);
	cudaFreeHost(ln->h_in);
	cudaFreeHost(ln->h_out);
	cudaFreeHost(ln->h_status);
	cudaFree(ln->d_in);
	cudaFree(ln->d_out);
	cudaFree(ln->d_scr);
	free(ln->jobs);
	free(ln->chunks);
	free(ln->chunk_table);
	free(ln->tiles);
	free(ln->segs);
	free(ln->cnt);
}

static wc_err lane_init(wcc_lane *ln, size_t bytes, int device_only)
{
	cudaError_t e;
	ln->cap_out = device_only ? 0 : bytes;
	ln->cap_scr = bytes;
	ln->cap_in = bytes + bytes / 4 + MIB;
	if ((e = cudaStreamCreateWithFlags(&ln->stream, cudaStreamNonBlocking)) != cudaSuccess ||
	    /* Blocking sync: the waiting dispatcher sleeps instead of spinning
	     * on a core for the whole GPU round trip (the runtime's default
	     * with fewer contexts than cores), which cost the daemon more CPU
	     * than the CPU backend's decoding for a single reader. */
	    (e = cudaEventCreateWithFlags(&ln->done, cudaEventDisableTiming | cudaEventBlockingSync)) != cudaSuccess ||
	    (e = cudaEventCreate(&ln->k0)) != cudaSuccess || (e = cudaEventCreate(&ln->k1)) != cudaSuccess ||
	    (e = cudaHostAlloc((void **)&ln->h_in, ln->cap_in, cudaHostAllocDefault)) != cudaSuccess ||
	    (ln->cap_out && (e = cudaHostAlloc((void **)&ln->h_out, ln->cap_out, cudaHostAllocDefault)) != cudaSuccess) ||
	    (e = cudaHostAlloc((void **)&ln->h_status, LANE_MAX_JOBS * 4u, cudaHostAllocDefault)) != cudaSuccess ||
	    (e = cudaMalloc((void **)&ln->d_in, ln->cap_in)) != cudaSuccess ||
	    (ln->cap_out && (e = cudaMalloc((void **)&ln->d_out, ln->cap_out)) != cudaSuccess) ||
	    (e = cudaMalloc((void **)&ln->d_scr, ln->cap_scr)) != cudaSuccess)
		return wc_fail(WC_E_BACKEND, "cuda: allocating %zu MiB lane buffers: %s", bytes / MIB,
			       cudaGetErrorString(e));
	/* The download copies whole runs of d_out, alignment gaps between tiles
	 * included: give them defined contents once (compute-sanitizer initcheck). */
	if (ln->cap_out && (e = cudaMemset(ln->d_out, 0, ln->cap_out)) != cudaSuccess)
		return wc_fail(WC_E_BACKEND, "cuda: clearing lane buffers: %s", cudaGetErrorString(e));
	ln->jobs = calloc(LANE_MAX_JOBS, sizeof(*ln->jobs));
	ln->cnt = calloc(TABLE_SLOTS + 1u, sizeof(*ln->cnt));
	if (!ln->jobs || !ln->cnt)
		return wc_fail(WC_E_NOMEM, "cuda: lane tables");
	return WC_OK;
}

wc_err wcc_ctx_create(const wcc_ctx_opts *opts, wcc_ctx **out)
{
	int count = 0;
	cudaError_t e = cudaGetDeviceCount(&count);
	if (e != cudaSuccess)
		return wc_fail(WC_E_BACKEND, "cuda: no usable GPU: %s", cudaGetErrorString(e));
	if (opts->gpu < 0 || opts->gpu >= count)
		return wc_fail(WC_E_BACKEND, "cuda: GPU %d requested, %d present", opts->gpu, count);
	struct cudaDeviceProp prop;
	if ((e = cudaGetDeviceProperties(&prop, opts->gpu)) != cudaSuccess)
		return wc_fail(WC_E_BACKEND, "cuda: GPU %d: %s", opts->gpu, cudaGetErrorString(e));
	if (prop.major * 10 + prop.minor < 75)
		return wc_fail(WC_E_BACKEND, "cuda: GPU %d (%s) has compute capability %d.%d; 7.5 or newer needed",
			       opts->gpu, prop.name, prop.major, prop.minor);
	int prev = 0;
	cudaGetDevice(&prev);
	if ((e = cudaSetDevice(opts->gpu)) != cudaSuccess)
		return wc_fail(WC_E_BACKEND, "cuda: GPU %d: %s", opts->gpu, cudaGetErrorString(e));
	/* Every kernel's code on the device now, not at its first launch
	 * (wcc_preload_kernels says why). Not CUDA_MODULE_LOADING=EAGER: setenv
	 * is not thread-safe in a library, and it must precede the runtime's
	 * first call in the process. */
	uint64_t t_load = wc_mono_ns();
	int pe = wcc_preload_kernels();
	if (pe != 0) {
		cudaSetDevice(prev);
		return wc_fail(WC_E_BACKEND, "cuda: GPU %d: loading the kernels: %s", opts->gpu,
			       cudaGetErrorString((cudaError_t)pe));
	}
	wc_log(WC_LOG_DEBUG, "cuda: GPU %d: kernels loaded in %.1f ms", opts->gpu, (wc_mono_ns() - t_load) / 1e6);

	wcc_ctx *ctx = calloc(1, sizeof(*ctx));
	if (!ctx) {
		cudaSetDevice(prev);
		return wc_fail(WC_E_NOMEM, "cuda: context");
	}
	ctx->gpu = opts->gpu;
	ctx->device_only = opts->device_only != 0;
	ctx->fault_inject = opts->fault_every_batch != 0;
	ctx->nlanes = opts->lanes ? opts->lanes : 3u;
	pthread_mutex_init(&ctx->mu, NULL);
	pthread_cond_init(&ctx->lane_free, NULL);
	uint64_t limit = opts->memory_limit ? opts->memory_limit : DEFAULT_LIMIT;
	uint64_t table_bytes = (uint64_t)TABLE_SLOTS * 512u;
	/* per lane: in (1.25 B + 1 MiB) + out (B) + scratch (B) */
	uint64_t per_lane = limit > table_bytes ? (limit - table_bytes) / ctx->nlanes : 0;
	size_t bytes = (size_t)((per_lane > MIB ? per_lane - MIB : 0) * 4u / 13u) & ~(MIB - 1u);
	if (bytes < 2u * MIB)
		bytes = 2u * MIB;
	if (bytes > 4096u * MIB)
		bytes = 4096u * MIB;
	ctx->lane_bytes = bytes;

	wc_err err = WC_OK;
	ctx->lanes = calloc(ctx->nlanes, sizeof(*ctx->lanes));
	if (!ctx->lanes)
		err = wc_fail(WC_E_NOMEM, "cuda: lanes");
	for (unsigned i = 0; err == WC_OK && i < ctx->nlanes; i++)
		err = lane_init(&ctx->lanes[i], bytes, ctx->device_only);
	if (err == WC_OK && ((e = cudaStreamCreateWithFlags(&ctx->upload, cudaStreamNonBlocking)) != cudaSuccess ||
			     (e = cudaMalloc((void **)&ctx->d_freqs, table_bytes)) != cudaSuccess))
		err = wc_fail(WC_E_BACKEND, "cuda: table buffer: %s", cudaGetErrorString(e));
	if (err == WC_OK)
		err = wc_threadpool_create(opts->host_threads ? opts->host_threads : 3u, &ctx->pool);
	if (err != WC_OK) {
		wcc_ctx_destroy(ctx);
		cudaSetDevice(prev);
		return err;
	}
	wc_log(WC_LOG_INFO, "cuda: GPU %d %s (cc %d.%d, %d SMs): %u lanes of %zu MiB", ctx->gpu, prop.name,
	       prop.major, prop.minor, prop.multiProcessorCount, ctx->nlanes, bytes / MIB);
	cudaSetDevice(prev);
	*out = ctx;
	return WC_OK;
}

wc_err wcc_ctx_once(wcc_ctx **slots, const wcc_ctx_opts *o, wcc_ctx **out)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	if (o->gpu < 0 || o->gpu >= WCC_MAX_GPUS)
		return wc_fail(WC_E_BACKEND, "cuda: GPU ordinal %d out of range", o->gpu);
	wc_err e = WC_OK;
	pthread_mutex_lock(&mu);
	if (!slots[o->gpu])
		e = wcc_ctx_create(o, &slots[o->gpu]);
	*out = slots[o->gpu];
	pthread_mutex_unlock(&mu);
	return e;
}

void wcc_ctx_destroy(wcc_ctx *ctx)
{
	if (!ctx)
		return;
	if (ctx->st_batches) {
		double b = (double)ctx->st_batches;
		wc_log(WC_LOG_DEBUG, "cuda: %llu batches of %llu tiles; per batch %.3f ms preparing on the host, "
		       "%.3f ms from submission to completion, %.3f ms of it waited for, %.3f ms of checks",
		       (unsigned long long)ctx->st_batches, (unsigned long long)ctx->st_tiles,
		       1e-6 * (double)ctx->st_prep_ns / b, 1e-6 * (double)ctx->st_gpu_ns / b,
		       1e-6 * (double)ctx->st_wait_ns / b, 1e-6 * (double)ctx->st_check_ns / b);
	}
	int prev = 0;
	cudaGetDevice(&prev);
	cudaSetDevice(ctx->gpu);
	for (unsigned i = 0; ctx->lanes && i < ctx->nlanes; i++)
		lane_free_all(&ctx->lanes[i]);
	free(ctx->lanes);
	if (ctx->upload)
		cudaStreamDestroy(ctx->upload);
	cudaFree(ctx->d_freqs);
	free(ctx->tcache);
	wc_threadpool_destroy(ctx->pool);
	pthread_cond_destroy(&ctx->lane_free);
	pthread_mutex_destroy(&ctx->mu);
	cudaSetDevice(prev);
	free(ctx);
}

size_t wcc_ctx_lane_bytes(const wcc_ctx *ctx)
{
	return ctx->lane_bytes;
}

size_t wcc_ctx_pinned_bytes(const wcc_ctx *ctx)
{
	size_t n = 0;
	for (unsigned i = 0; i < ctx->nlanes; i++)
		n += ctx->lanes[i].cap_in + ctx->lanes[i].cap_out + LANE_MAX_JOBS * 4u;
	return n;
}

size_t wcc_ctx_device_bytes(const wcc_ctx *ctx)
{
	size_t n = (size_t)TABLE_SLOTS * 512u;
	for (unsigned i = 0; i < ctx->nlanes; i++)
		n += ctx->lanes[i].cap_in + ctx->lanes[i].cap_out + ctx->lanes[i].cap_scr;
	return n;
}

void wcc_ctx_set_timing(wcc_ctx *ctx, int on)
{
	pthread_mutex_lock(&ctx->mu);
	ctx->timing = on;
	ctx->kernel_ms = 0;
	pthread_mutex_unlock(&ctx->mu);
}

double wcc_ctx_kernel_ms(wcc_ctx *ctx)
{
	pthread_mutex_lock(&ctx->mu);
	double ms = ctx->kernel_ms;
	pthread_mutex_unlock(&ctx->mu);
	return ms;
}

/* ---- submit and complete ------------------------------------------------ */

static void copy_payload(void *arg, size_t i)
{
	wcc_lane *ln = arg;
	const lane_job *lj = &ln->jobs[i];
	if (!lj->pin_in)
		wcc_stream_copy(ln->h_in + lj->payload_off, lj->job->payload, lj->job->payload_size);
	if (lj->lossy)
		wcc_scale_copy(lj->lossy->p.scales, lj->lossy->p.channels, &lj->span, ln->h_in + lj->scale_off);
}

/* Upload the batch: runs of staged payloads and the descriptors from h_in,
 * page-locked payloads straight from the caller's memory, consecutive ones
 * that lie as they will on the device (the image reader's) in one copy: a
 * copy per 16 KB payload cost more than the payloads' transfer. */
static cudaError_t upload(wcc_lane *ln, size_t total)
{
	cudaError_t e = cudaSuccess;
	size_t run = 0; /* start of the current run of staged bytes */
	const uint8_t *src = NULL; /* the current run of page-locked payloads */
	size_t src_off = 0, src_len = 0, last = 0; /* last: the run's last job */
	for (size_t i = 0; i < ln->njobs && e == cudaSuccess; i++) {
		const lane_job *lj = &ln->jobs[i];
		if (!lj->pin_in)
			continue;
		/* (a lossy tile's staged scales after the run's last payload end it) */
		if (src && last + 1 == i && !ln->jobs[last].lossy && lj->job->payload == src + (lj->payload_off - src_off)) {
			last = i;
			src_len = lj->payload_off + lj->job->payload_size - src_off;
			run = lj->payload_off + ALIGN16(lj->job->payload_size);
			continue;
		}
		if (src)
			e = cudaMemcpyAsync(ln->d_in + src_off, src, src_len, cudaMemcpyHostToDevice, ln->stream);
		if (e == cudaSuccess && lj->payload_off > run)
			e = cudaMemcpyAsync(ln->d_in + run, ln->h_in + run, lj->payload_off - run,
					    cudaMemcpyHostToDevice, ln->stream);
		src = lj->job->payload;
		last = i;
		src_off = lj->payload_off;
		src_len = lj->job->payload_size;
		run = lj->payload_off + ALIGN16(lj->job->payload_size);
	}
	if (e == cudaSuccess && src)
		e = cudaMemcpyAsync(ln->d_in + src_off, src, src_len, cudaMemcpyHostToDevice, ln->stream);
	if (e == cudaSuccess && total > run)
		e = cudaMemcpyAsync(ln->d_in + run, ln->h_in + run, total - run, cudaMemcpyHostToDevice, ln->stream);
	return e;
}

/* Download decoded tiles: runs into h_out, page-locked outputs directly. */
static cudaError_t download(wcc_lane *ln)
{
	cudaError_t e = cudaSuccess;
	size_t run = 0;
	for (size_t i = 0; i < ln->njobs && e == cudaSuccess; i++) {
		const lane_job *lj = &ln->jobs[i];
		if (!lj->pin_out)
			continue;
		if (lj->out_off > run)
			e = cudaMemcpyAsync(ln->h_out + run, ln->d_out + run, lj->out_off - run,
					    cudaMemcpyDeviceToHost, ln->stream);
		if (e == cudaSuccess)
			e = cudaMemcpyAsync(lj->job->out, ln->d_out + lj->out_off, lj->job->out_size,
					    cudaMemcpyDeviceToHost, ln->stream);
		run = lj->out_off + ALIGN16(lj->job->out_size);
	}
	if (e == cudaSuccess && ln->used_out > run)
		e = cudaMemcpyAsync(ln->h_out + run, ln->d_out + run, ln->used_out - run, cudaMemcpyDeviceToHost,
				    ln->stream);
	return e;
}

static wc_err lane_submit(wcc_ctx *ctx, wcc_lane *ln)
{
	const uint64_t t0 = wc_mono_ns();
	/* descriptors after the payloads, in desc_bytes() order: the status
	 * words, then the batch's descriptors */
	const size_t status_off = ln->used_in;
	memset(ln->h_in + status_off, 0, 4u * ln->njobs);
	wcc_desc_offsets d;
	wcc_lane_write_descs(ln, ln->h_in, status_off + ALIGN16(4u * ln->njobs), ln->cnt, &d);
	if (ctx->fault_inject && ln->nchunks) /* an illegal address: the kernel faults */
		((wcc_chunk *)(ln->h_in + d.chunks))[0].in = (const uint8_t *)(uintptr_t)64;
	if (ln->nstaged) /* the mount's payloads are page-locked: nothing to copy */
		wc_threadpool_run(ctx->pool, copy_payload, ln, ln->njobs);

	cudaError_t e = upload(ln, d.end);
	if (e != cudaSuccess)
		return wcc_cuda_fail(ctx, "copy to device", e);
	uint32_t *d_status = (uint32_t *)(ln->d_in + status_off);
	if (ctx->timing)
		cudaEventRecord(ln->k0, ln->stream);
	int le = wcc_launch_rans((const wcc_rans_block *)(ln->d_in + d.blocks), d.nblocks,
				 (const wcc_chunk *)(ln->d_in + d.chunks), ctx->d_freqs,
				 (const wcc_merge_tile *)(ln->d_in + d.tiles), d_status, ln->stream);
	if (le)
		return wcc_cuda_fail(ctx, "rANS kernel launch", (cudaError_t)le);
	le = wcc_launch_merge((const wcc_merge_seg *)(ln->d_in + d.segs), (uint32_t)ln->nsegs,
			      (const wcc_merge_tile *)(ln->d_in + d.tiles), ln->stream);
	if (le)
		return wcc_cuda_fail(ctx, "merge kernel launch", (cudaError_t)le);
	if (ctx->timing)
		cudaEventRecord(ln->k1, ln->stream);
	e = cudaMemcpyAsync(ln->h_status, d_status, 4u * ln->njobs, cudaMemcpyDeviceToHost, ln->stream);
	if (e == cudaSuccess && ln->host_target && ln->used_out)
		e = download(ln);
	if (e == cudaSuccess)
		e = cudaEventRecord(ln->done, ln->stream);
	if (e != cudaSuccess)
		return wcc_cuda_fail(ctx, "copy from device", e);
	ln->t_submit = wc_mono_ns();
	ln->prep_ns = ln->t_submit - t0;
	return WC_OK;
}

static void finish_job(void *arg, size_t i)
{
	wcc_lane *ln = arg;
	lane_job *lj = &ln->jobs[i];
	wc_tile_job *job = lj->job;
	if (ln->h_status[i] != 0) {
		lj->recheck = 1;
		return;
	}
	if (ln->host_target) {
		uint64_t h = lj->pin_out ? wc_xxh3_64(job->out, job->out_size)
					 : wcc_copy_and_hash(job->out, ln->h_out + lj->out_off, job->out_size);
		if (h != job->dhash) {
			lj->recheck = 1;
			return;
		}
	}
	job->status = WC_OK;
	job->detail[0] = '\0';
}

/* Decode job on the CPU into host memory; for a device target copy it up. */
static void cpu_decode(wcc_ctx *ctx, wc_tile_job *job, uint8_t *dev_out, wc_err *dev_err)
{
	if (!dev_out) {
		wc_decode_job_cpu(job);
		return;
	}
	uint8_t *tmp = malloc(job->out_size ? job->out_size : 1);
	if (!tmp) {
		wc_job_fail(job, WC_E_NOMEM, "cuda: CPU fallback buffer of %u bytes", job->out_size);
		return;
	}
	uint8_t *saved = job->out;
	job->out = tmp;
	if (wc_decode_job_cpu(job) == WC_OK) {
		cudaError_t e = cudaMemcpy(dev_out, tmp, job->out_size, cudaMemcpyHostToDevice);
		if (e != cudaSuccess)
			*dev_err = wcc_cuda_fail(ctx, "copy of a CPU-decoded tile to the device", e);
	}
	job->out = saved;
	free(tmp);
}

static wc_err lane_complete(wcc_ctx *ctx, wcc_lane *ln)
{
	wc_err err = WC_OK;
	const uint64_t t_wait = wc_mono_ns();
	cudaError_t e = cudaEventSynchronize(ln->done);
	const uint64_t t_done = wc_mono_ns();
	if (e != cudaSuccess) {
		err = wcc_cuda_fail(ctx, "decode batch", e);
	} else {
		if (ctx->timing) {
			float ms = 0;
			if (cudaEventElapsedTime(&ms, ln->k0, ln->k1) == cudaSuccess) {
				pthread_mutex_lock(&ctx->mu);
				ctx->kernel_ms += ms;
				pthread_mutex_unlock(&ctx->mu);
			}
		}
		if (ln->host_target) /* hashing: on the pool */
			wc_threadpool_run(ctx->pool, finish_job, ln, ln->njobs);
		else /* a status word each: waking the pool cost more */
			for (size_t i = 0; i < ln->njobs; i++)
				finish_job(ln, i);
		for (size_t i = 0; i < ln->njobs; i++) {
			lane_job *lj = &ln->jobs[i];
			if (!lj->recheck)
				continue;
			cpu_decode(ctx, lj->job, ln->host_target ? NULL : lj->dev_out, &err);
			if (lj->job->status == WC_OK)
				wc_log(WC_LOG_WARN, "cuda: GPU %d decoded a tile (%u bytes) differently from the CPU "
				       "decoder; the CPU's bytes are used", ctx->gpu, lj->job->out_size);
		}
	}
	const uint64_t t_end = wc_mono_ns();
	const size_t njobs = ln->njobs;
	wcc_lane_reset(ln);
	pthread_mutex_lock(&ctx->mu);
	ln->busy = 0;
	ctx->st_batches++;
	ctx->st_tiles += njobs;
	ctx->st_prep_ns += ln->prep_ns;
	ctx->st_gpu_ns += t_done - ln->t_submit;
	ctx->st_wait_ns += t_done - t_wait;
	ctx->st_check_ns += t_end - t_done;
	pthread_cond_broadcast(&ctx->lane_free);
	pthread_mutex_unlock(&ctx->mu);
	return err;
}

/* ---- one decode call ---------------------------------------------------- */

typedef struct call {
	wcc_ctx *ctx;
	wcc_lane *fifo[16]; /* this call's lanes in flight, oldest first */
	unsigned nfifo;
	wc_err err;
} call;

static void complete_oldest(call *cl)
{
	wcc_lane *ln = cl->fifo[0];
	memmove(cl->fifo, cl->fifo + 1, (cl->nfifo - 1) * sizeof(cl->fifo[0]));
	cl->nfifo--;
	wc_err e = lane_complete(cl->ctx, ln);
	if (e != WC_OK && cl->err == WC_OK)
		cl->err = e;
}

/* A free lane for this call: if none is free and the call has lanes in
 * flight, complete its oldest (never wait while holding work others could
 * be waiting for). */
static wcc_lane *acquire(call *cl, int host_target)
{
	wcc_ctx *ctx = cl->ctx;
	pthread_mutex_lock(&ctx->mu);
	for (;;) {
		for (unsigned i = 0; i < ctx->nlanes; i++) {
			wcc_lane *ln = &ctx->lanes[i];
			if (!ln->busy) {
				ln->busy = 1;
				pthread_mutex_unlock(&ctx->mu);
				wcc_lane_reset(ln);
				ln->host_target = host_target;
				return ln;
			}
		}
		if (cl->nfifo) {
			pthread_mutex_unlock(&ctx->mu);
			complete_oldest(cl);
			pthread_mutex_lock(&ctx->mu);
			continue;
		}
		pthread_cond_wait(&ctx->lane_free, &ctx->mu);
	}
}

static void release(wcc_ctx *ctx, wcc_lane *ln)
{
	wcc_lane_reset(ln);
	pthread_mutex_lock(&ctx->mu);
	ln->busy = 0;
	pthread_cond_broadcast(&ctx->lane_free);
	pthread_mutex_unlock(&ctx->mu);
}

static void submit(call *cl, wcc_lane *ln)
{
	if (ln->njobs == 0) {
		release(cl->ctx, ln);
		return;
	}
	wc_err e = lane_submit(cl->ctx, ln);
	if (e != WC_OK) {
		if (cl->err == WC_OK)
			cl->err = e;
		release(cl->ctx, ln);
		return;
	}
	cl->fifo[cl->nfifo++] = ln;
	if (cl->nfifo == sizeof(cl->fifo) / sizeof(cl->fifo[0]))
		complete_oldest(cl);
}

typedef struct cpu_list {
	wcc_ctx *ctx;
	wc_tile_job *jobs;
	uint8_t *const *dev_out;
	size_t *idx;
	uint8_t **tmp; /* device target: host copies to upload */
} cpu_list;

static void cpu_one(void *arg, size_t i)
{
	cpu_list *cl = arg;
	wc_tile_job *job = &cl->jobs[cl->idx[i]];
	if (!cl->dev_out) {
		wc_decode_job_cpu(job);
		return;
	}
	uint8_t *saved = job->out;
	cl->tmp[i] = malloc(job->out_size ? job->out_size : 1);
	if (!cl->tmp[i]) {
		wc_job_fail(job, WC_E_NOMEM, "cuda: CPU fallback buffer of %u bytes", job->out_size);
		return;
	}
	job->out = cl->tmp[i];
	wc_decode_job_cpu(job);
	job->out = saved;
}

wc_err wcc_decode(wcc_ctx *ctx, wc_tile_job *jobs, size_t n, uint8_t *const *dev_out)
{
	if (!dev_out && ctx->device_only) {
		for (size_t i = 0; i < n; i++)
			wc_job_fail(&jobs[i], WC_E_INVAL, "cuda: a device-only context decodes into device memory only");
		return wc_fail(WC_E_INVAL, "cuda: a device-only context decodes into device memory only");
	}
	if (ctx->dead) {
		for (size_t i = 0; i < n; i++)
			wc_job_fail(&jobs[i], WC_E_BACKEND, "cuda: GPU %d disabled after an earlier fault", ctx->gpu);
		return wc_fail(WC_E_BACKEND, "cuda: GPU %d disabled after an earlier fault", ctx->gpu);
	}
	int prev = 0;
	cudaGetDevice(&prev);
	cudaError_t ce = cudaSetDevice(ctx->gpu);
	if (ce != cudaSuccess)
		return wcc_cuda_fail(ctx, "selecting the device", ce);

	size_t *cpu_idx = malloc((n ? n : 1) * sizeof(size_t));
	if (!cpu_idx) {
		cudaSetDevice(prev);
		return wc_fail(WC_E_NOMEM, "cuda: job list");
	}
	size_t ncpu = 0;
	call cl = { .ctx = ctx };
	const int host_target = dev_out == NULL;
	wcc_lane *ln = NULL;
	job_plan pl;
	pl.memo = 0;
	for (size_t i = 0; i < n && cl.err == WC_OK; i++) {
		wc_tile_job *job = &jobs[i];
		uint8_t *dout = dev_out ? dev_out[i] : NULL;
		job->status = WC_E_BACKEND;
		job->detail[0] = '\0';
		if (!wcc_plan_job(ctx, job, dout, &pl)) {
			cpu_idx[ncpu++] = i;
			continue;
		}
		if (!ln)
			ln = acquire(&cl, host_target);
		if (!wcc_lane_fits(ln, job, &pl)) {
			if (ln->njobs == 0) { /* larger than a whole lane */
				cpu_idx[ncpu++] = i;
				continue;
			}
			submit(&cl, ln);
			ln = acquire(&cl, host_target);
			if (!wcc_lane_fits(ln, job, &pl)) {
				cpu_idx[ncpu++] = i;
				continue;
			}
		}
		wc_err e = wcc_lane_add(ln, job, dout, &pl);
		if (e != WC_OK)
			cl.err = e;
	}
	if (ln) {
		if (cl.err == WC_OK)
			submit(&cl, ln);
		else
			release(ctx, ln);
	}
	/* CPU jobs run while the last lanes are on the GPU */
	if (cl.err == WC_OK && ncpu) {
		cpu_list cp = { .ctx = ctx, .jobs = jobs, .dev_out = dev_out, .idx = cpu_idx };
		if (dev_out)
			cp.tmp = calloc(ncpu, sizeof(uint8_t *));
		if (dev_out && !cp.tmp) {
			cl.err = wc_fail(WC_E_NOMEM, "cuda: job list");
		} else {
			wc_threadpool_run(ctx->pool, cpu_one, &cp, ncpu);
			for (size_t i = 0; dev_out && i < ncpu; i++) {
				wc_tile_job *job = &jobs[cpu_idx[i]];
				if (cp.tmp[i] && job->status == WC_OK) {
					ce = cudaMemcpy(dev_out[cpu_idx[i]], cp.tmp[i], job->out_size,
							cudaMemcpyHostToDevice);
					if (ce != cudaSuccess && cl.err == WC_OK)
						cl.err = wcc_cuda_fail(ctx, "copy of a CPU-decoded tile to the device", ce);
				}
				free(cp.tmp[i]);
			}
			free(cp.tmp);
		}
	}
	while (cl.nfifo)
		complete_oldest(&cl);
	free(cpu_idx);
	cudaSetDevice(prev);
	if (cl.err != WC_OK) {
		const wc_err e = cl.err == WC_E_NOMEM ? WC_E_NOMEM : WC_E_BACKEND;
		char why[256];
		snprintf(why, sizeof why, "%s", wc_last_detail());
		for (size_t i = 0; i < n; i++)
			wc_job_fail(&jobs[i], e, "%s", why);
		return wc_fail(e, "%s", why);
	}
	return WC_OK;
}
