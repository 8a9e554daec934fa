/*
 * wcc_device.c - the GPU decode context and batch pipeline (wcc_device.h).
 */
#include "wcc_device.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "codec/tile_codec.h"
#include "core/clock.h"
#include "core/hash.h"
#include "engine/threadpool.h"
#include "wcc_kernels.h"

#define ALIGN16(x) (((size_t)(x) + 15u) & ~(size_t)15u)
#define MIB ((size_t)1 << 20)
#define TABLE_SLOTS 8192u          /* frequency tables resident on the device */
#define LANE_MAX_JOBS 4096u        /* tiles per lane (size of the status array) */
#define DEFAULT_LIMIT (320u * MIB) /* device bytes when the caller gives none */

typedef struct lane_job {
	wc_tile_job *job;
	size_t payload_off; /* in h_in / d_in */
	size_t out_off;     /* host target: in h_out / d_out */
	uint8_t *dev_out;   /* device target: the caller's address */
	int pin_in;         /* job->payload is page-locked: DMA it directly */
	int pin_out;        /* job->out is page-locked: DMA into it directly */
	int recheck;        /* set by completion: decode again on the CPU */
} lane_job;

typedef struct wcc_lane {
	cudaStream_t stream;
	cudaEvent_t done;
	cudaEvent_t k0, k1; /* around the kernels, for wcc_ctx_kernel_ms() */
	uint8_t *h_in, *h_out;
	uint32_t *h_status;
	uint8_t *d_in, *d_out, *d_scr;
	size_t cap_in, cap_out, cap_scr;
	int busy;
	int host_target;
	/* the batch being filled or in flight */
	size_t used_in, used_out, used_scr;
	lane_job *jobs;
	size_t njobs;
	size_t nstaged; /* jobs whose payload is copied into h_in (not page-locked) */
	wcc_chunk *chunks;
	uint32_t *chunk_table;
	size_t nchunks, cap_chunks;
	wcc_merge_tile *tiles;
	size_t ntiles, cap_tiles;
	wcc_merge_seg *segs;
	size_t nsegs, cap_segs;
	uint32_t *cnt;   /* counting-sort scratch, TABLE_SLOTS + 1 */
	uint64_t t_submit, prep_ns; /* when the batch went to the GPU, host time preparing it */
} wcc_lane;

typedef struct table_entry {
	uint64_t key;
	uint32_t base, count;
} table_entry;

struct wcc_ctx {
	int gpu;
	pthread_mutex_t mu;
	pthread_cond_t lane_free;
	wcc_lane *lanes;
	unsigned nlanes;
	size_t lane_bytes;
	cudaStream_t upload;
	uint16_t *d_freqs; /* TABLE_SLOTS x 256 */
	uint8_t table_ok[TABLE_SLOTS];
	uint32_t table_used;
	table_entry *tcache;
	size_t ntc, cap_tc;
	int full_logged;
	int timing;       /* record kernel times (benchmarks) */
	double kernel_ms; /* sum over completed lanes while timing */
	int dead;
	int device_only;  /* lanes without output buffers (wcc_ctx_opts) */
	int fault_inject; /* tests: WCODEC_CUDA_FAULT_INJECT=1 makes every batch fault */
	wc_threadpool *pool;
	/* Batch timings (under mu), logged by wcc_ctx_destroy: where a decode
	 * call's time goes, for tuning the read path. */
	uint64_t st_batches, st_tiles, st_prep_ns, st_gpu_ns, st_wait_ns, st_check_ns;
};

static int is_pinned(const void *p, size_t n);
static void stream_copy(uint8_t *d, const uint8_t *s, size_t n);

static wc_err cuda_fail(wcc_ctx *ctx, const char *what, cudaError_t e)
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
	const char *fi = getenv("WCODEC_CUDA_FAULT_INJECT");
	ctx->fault_inject = fi && *fi == '1';
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

int wcc_ctx_gpu(const wcc_ctx *ctx)
{
	return ctx->gpu;
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

/* ---- frequency tables ------------------------------------------------- */

/* Slot of table 0 of the job's table set, uploading the set on first use
 * (keyed by job->table_key). Returns 0 and sets *base, or -1 if the set
 * cannot be placed (then the job is decoded on the CPU). */
static int table_base(wcc_ctx *ctx, const wc_tile_job *job, uint32_t *base)
{
	int rc = -1;
	pthread_mutex_lock(&ctx->mu);
	for (size_t i = 0; i < ctx->ntc; i++) {
		if (ctx->tcache[i].key == job->table_key && ctx->tcache[i].count == job->ntables) {
			*base = ctx->tcache[i].base;
			rc = 0;
			goto out;
		}
	}
	if (ctx->dead || job->ntables == 0 || job->ntables > TABLE_SLOTS - ctx->table_used) {
		if (!ctx->dead && !ctx->full_logged) {
			ctx->full_logged = 1;
			wc_log(WC_LOG_WARN, "cuda: frequency-table cache full (%u slots): new files decode on the CPU",
			       TABLE_SLOTS);
		}
		goto out;
	}
	if (ctx->ntc == ctx->cap_tc) {
		size_t cap = ctx->cap_tc ? 2 * ctx->cap_tc : 16;
		table_entry *t = realloc(ctx->tcache, cap * sizeof(*t));
		if (!t)
			goto out;
		ctx->tcache = t;
		ctx->cap_tc = cap;
	}
	uint32_t b = ctx->table_used;
	for (uint32_t i = 0; i < job->ntables; i++)
		ctx->table_ok[b + i] = wc_freq_validate(&job->tables[i]) == WC_OK;
	cudaError_t e = cudaMemcpyAsync(ctx->d_freqs + (size_t)b * 256u, job->tables,
					(size_t)job->ntables * sizeof(wc_freqtab), cudaMemcpyHostToDevice,
					ctx->upload);
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(ctx->upload);
	if (e != cudaSuccess) {
		cuda_fail(ctx, "uploading frequency tables", e);
		goto out;
	}
	ctx->table_used += job->ntables;
	ctx->tcache[ctx->ntc++] = (table_entry){ .key = job->table_key, .base = b, .count = job->ntables };
	*base = b;
	rc = 0;
out:
	pthread_mutex_unlock(&ctx->mu);
	return rc;
}

/* ---- planning one job --------------------------------------------------- */

typedef struct job_plan {
	wc_plane_view v[WC_MAX_PLANES];
	uint32_t nchunks[WC_MAX_PLANES];
	size_t total_chunks;
	uint32_t base; /* table slot of the job's table 0 */
	size_t n;      /* elements */
	size_t scr;    /* scratch bytes */
	int direct;    /* single rANS plane decoded straight into the output */
	int fused;     /* index of the one rANS plane merged by its warps, or -1 */
	size_t nsegs;
} job_plan;

static uint32_t rd32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

/* Check a rANS body's chunk_end array (FORMAT.md 4): strictly increasing
 * ends, chunks >= 128 bytes and multiples of 4, the last ending at the body's
 * end. The device checks what is inside each chunk. */
static int chunks_ok(const wc_plane_view *v, uint32_t nchunks)
{
	if (nchunks == 0 || (uint64_t)v->size < 4ull * nchunks)
		return 0;
	uint32_t data = v->size - 4u * nchunks, prev = 0;
	for (uint32_t k = 0; k < nchunks; k++) {
		uint32_t end = rd32(v->body + 4u * k);
		if (end <= prev || end - prev < 128u || ((end - prev) & 3u) || end > data)
			return 0;
		prev = end;
	}
	return prev == data;
}

/* Can the GPU decode this job? Fills *pl. Jobs it cannot (zstd planes,
 * dictionary tensors, other kinds, anything malformed) go to the CPU, which
 * reports errors; for a device target the CPU's bytes are copied up. */
static int plan_job(wcc_ctx *ctx, const wc_tile_job *job, const uint8_t *dev_out, job_plan *pl)
{
	const wc_layout l = job->layout;
	const uint32_t C = job->chunk_symbols;
	if (job->kind != WC_JOB_PLANES || job->out_size == 0 || l.nplanes == 0 || l.nplanes > WC_MAX_PLANES ||
	    l.elem_size == 0 || C < WC_RANS_CHUNK_MIN || C > WC_RANS_CHUNK_MAX || C % 32u)
		return 0;
	if (l.kind == WC_LAYOUT_DICT || job->dict) /* no GPU gather yet */
		return 0;
	if (wc_tile_parse(l, job->payload, job->payload_size, job->out_size, job->ntables, pl->v) != WC_OK)
		return 0;
	pl->n = job->out_size / l.elem_size;
	pl->total_chunks = 0;
	pl->scr = 0;
	pl->direct = 0;
	int have_base = 0;
	for (unsigned k = 0; k < l.nplanes; k++) {
		const wc_plane_view *v = &pl->v[k];
		pl->nchunks[k] = 0;
		if (v->mode == WC_PLANE_ZSTD)
			return 0;
		if (v->mode != WC_PLANE_RANS)
			continue;
		if (!have_base) {
			if (table_base(ctx, job, &pl->base) != 0)
				return 0;
			have_base = 1;
		}
		if (v->table >= job->ntables || !ctx->table_ok[pl->base + v->table])
			return 0;
		uint32_t nc = (uint32_t)((pl->n + C - 1u) / C);
		if (!chunks_ok(v, nc))
			return 0;
		pl->nchunks[k] = nc;
		pl->total_chunks += nc;
	}
	/* dev_out is NULL (an aligned lane buffer) or the caller's address */
	const int aligned = ((uintptr_t)dev_out & 15u) == 0;
	unsigned nrans = 0, npack = 0;
	pl->fused = -1;
	for (unsigned k = 0; k < l.nplanes; k++) {
		npack += pl->v[k].mode == WC_PLANE_PACK;
		if (pl->v[k].mode == WC_PLANE_RANS) {
			nrans++;
			pl->fused = (int)k;
		}
	}
	/* The fused decode reads the other plane a word at a time as bytes:
	 * a PACK plane is unpacked by the merge instead. */
	if (nrans != 1 || !aligned || npack)
		pl->fused = -1;
	if (l.nplanes == 1 && pl->fused == 0) {
		pl->direct = 1; /* one plane: the symbols are the bytes */
		pl->fused = -1;
	} else if (pl->fused < 0) {
		for (unsigned k = 0; k < l.nplanes; k++)
			if (pl->v[k].mode == WC_PLANE_RANS)
				pl->scr += ALIGN16(pl->n);
	}
	pl->nsegs = pl->direct || pl->fused >= 0 ? 0 : (pl->n + WCC_MERGE_SEG - 1u) / WCC_MERGE_SEG;
	return 1;
}

/* ---- filling a lane ----------------------------------------------------- */

/* Bytes of h_in the descriptors of the batch take, in submit order. */
static size_t desc_bytes(size_t njobs, size_t nchunks, size_t ntiles, size_t nsegs)
{
	return ALIGN16(4u * njobs) + ALIGN16(sizeof(wcc_chunk) * nchunks) +
	       ALIGN16(sizeof(wcc_rans_block) * nchunks) + ALIGN16(sizeof(wcc_merge_tile) * ntiles) +
	       ALIGN16(sizeof(wcc_merge_seg) * nsegs);
}

static int lane_fits(const wcc_lane *ln, const wc_tile_job *job, const job_plan *pl)
{
	if (ln->njobs >= LANE_MAX_JOBS)
		return 0;
	size_t in = ln->used_in + ALIGN16(job->payload_size) +
		    desc_bytes(ln->njobs + 1, ln->nchunks + pl->total_chunks, ln->ntiles + 1, ln->nsegs + pl->nsegs);
	size_t out = ln->host_target ? ln->used_out + ALIGN16(job->out_size) : 0;
	return in <= ln->cap_in && out <= ln->cap_out && ln->used_scr + pl->scr <= ln->cap_scr;
}

static int grow(void **arr, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t c = *cap ? *cap : 256;
	while (c < need)
		c *= 2;
	void *p = realloc(*arr, c * elem);
	if (!p)
		return -1;
	*arr = p;
	*cap = c;
	return 0;
}

static wc_err lane_add(wcc_lane *ln, wc_tile_job *job, uint8_t *dev_out, const job_plan *pl)
{
	const size_t need = ln->nchunks + pl->total_chunks;
	if (need > ln->cap_chunks) {
		size_t c = ln->cap_chunks ? ln->cap_chunks : 1024;
		while (c < need)
			c *= 2;
		wcc_chunk *ch = realloc(ln->chunks, c * sizeof(*ch));
		if (ch)
			ln->chunks = ch;
		uint32_t *ct = realloc(ln->chunk_table, c * sizeof(*ct));
		if (ct)
			ln->chunk_table = ct;
		if (!ch || !ct)
			return wc_fail(WC_E_NOMEM, "cuda: batch descriptors");
		ln->cap_chunks = c;
	}
	if (grow((void **)&ln->tiles, &ln->cap_tiles, ln->ntiles + 1, sizeof(wcc_merge_tile)) ||
	    grow((void **)&ln->segs, &ln->cap_segs, ln->nsegs + pl->nsegs, sizeof(wcc_merge_seg)))
		return wc_fail(WC_E_NOMEM, "cuda: batch descriptors");
	const uint32_t j = (uint32_t)ln->njobs;
	lane_job *lj = &ln->jobs[j];
	memset(lj, 0, sizeof(*lj));
	lj->job = job;
	lj->pin_in = is_pinned(job->payload, job->payload_size);
	ln->nstaged += !lj->pin_in;
	lj->pin_out = ln->host_target && is_pinned(job->out, job->out_size);
	lj->payload_off = ln->used_in;
	ln->used_in += ALIGN16(job->payload_size);
	uint8_t *out;
	if (ln->host_target) {
		lj->out_off = ln->used_out;
		ln->used_out += ALIGN16(job->out_size);
		out = ln->d_out + lj->out_off;
	} else {
		lj->dev_out = dev_out;
		out = dev_out;
	}
	const uint8_t *d_payload = ln->d_in + lj->payload_off;
	const uint32_t C = job->chunk_symbols;
	wcc_merge_tile t;
	memset(&t, 0, sizeof(t));
	for (unsigned k = 0; k < job->layout.nplanes; k++) {
		const wc_plane_view *v = &pl->v[k];
		const uint8_t *d_body = d_payload + (v->body - job->payload);
		if (v->mode == WC_PLANE_RAW) {
			t.src[k] = d_body;
		} else if (v->mode == WC_PLANE_CONST) {
			t.src[k] = NULL;
			t.value[k] = v->value;
		} else if (v->mode == WC_PLANE_PACK) { /* unpacked by the merge kernel */
			t.src[k] = d_body;
			t.bits[k] = v->value;
		} else { /* RANS */
			uint8_t *dst = out;
			const int fused = (int)k == pl->fused;
			if (!pl->direct && !fused) {
				dst = ln->d_scr + ln->used_scr;
				ln->used_scr += ALIGN16(pl->n);
			}
			t.src[k] = fused ? NULL : dst; /* fused: never read */
			const uint32_t nc = pl->nchunks[k];
			const uint8_t *d_data = d_body + 4u * nc;
			uint32_t start = 0;
			for (uint32_t c = 0; c < nc; c++) {
				uint32_t end = rd32(v->body + 4u * c);
				size_t first = (size_t)c * C;
				wcc_chunk *ch = &ln->chunks[ln->nchunks];
				ch->in = d_data + start;
				ch->out = fused ? out + first * job->layout.elem_size : dst + first;
				ch->in_bytes = end - start;
				ch->nsym = (uint32_t)(pl->n - first < C ? pl->n - first : C);
				ch->job = j;
				ch->fuse = fused ? WCC_FUSE(ln->ntiles, k) : 0;
				ln->chunk_table[ln->nchunks] = pl->base + v->table;
				ln->nchunks++;
				start = end;
			}
		}
	}
	if (!pl->direct) {
		t.out = out;
		t.n = (uint32_t)pl->n;
		t.kind = job->layout.kind;
		t.elem_size = job->layout.elem_size;
		t.nplanes = job->layout.nplanes;
		const uint32_t ti = (uint32_t)ln->ntiles++;
		ln->tiles[ti] = t;
		for (size_t b = 0; pl->fused < 0 && b < pl->n; b += WCC_MERGE_SEG) {
			wcc_merge_seg *s = &ln->segs[ln->nsegs++];
			s->tile = ti;
			s->begin = (uint32_t)b;
			s->count = (uint32_t)(pl->n - b < WCC_MERGE_SEG ? pl->n - b : WCC_MERGE_SEG);
			s->pad = 0;
		}
	}
	ln->njobs++;
	return WC_OK;
}

static void lane_reset(wcc_lane *ln)
{
	ln->used_in = ln->used_out = ln->used_scr = 0;
	ln->njobs = ln->nstaged = ln->nchunks = ln->ntiles = ln->nsegs = 0;
}

/* ---- submit and complete ------------------------------------------------ */

static void copy_payload(void *arg, size_t i)
{
	wcc_lane *ln = arg;
	const lane_job *lj = &ln->jobs[i];
	if (!lj->pin_in)
		stream_copy(ln->h_in + lj->payload_off, lj->job->payload, lj->job->payload_size);
}

/* Is [p, p + n) page-locked host memory the GPU can DMA to and from? */
static int is_pinned(const void *p, size_t n)
{
	struct cudaPointerAttributes a;
	if (!p || n == 0)
		return 0;
	for (int end = 0; end < 2; end++) {
		const void *q = end ? (const uint8_t *)p + n - 1 : p;
		if (cudaPointerGetAttributes(&a, q) != cudaSuccess) {
			cudaGetLastError();
			return 0;
		}
		if (a.type != cudaMemoryTypeHost)
			return 0;
	}
	return 1;
}

/* Upload the batch: runs of staged payloads and the descriptors from h_in,
 * page-locked payloads straight from the caller's memory. */
static cudaError_t upload(wcc_lane *ln, size_t total)
{
	cudaError_t e = cudaSuccess;
	size_t run = 0; /* start of the current run of staged bytes */
	for (size_t i = 0; i < ln->njobs && e == cudaSuccess; i++) {
		const lane_job *lj = &ln->jobs[i];
		if (!lj->pin_in)
			continue;
		if (lj->payload_off > run)
			e = cudaMemcpyAsync(ln->d_in + run, ln->h_in + run, lj->payload_off - run,
					    cudaMemcpyHostToDevice, ln->stream);
		if (e == cudaSuccess)
			e = cudaMemcpyAsync(ln->d_in + lj->payload_off, lj->job->payload, lj->job->payload_size,
					    cudaMemcpyHostToDevice, ln->stream);
		run = lj->payload_off + ALIGN16(lj->job->payload_size);
	}
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
	/* descriptors after the payloads, in desc_bytes() order */
	size_t off = ln->used_in;
	const size_t status_off = off;
	off += ALIGN16(4u * ln->njobs);
	const size_t chunks_off = off;
	off += ALIGN16(sizeof(wcc_chunk) * ln->nchunks);
	const size_t blocks_off = off;
	off += ALIGN16(sizeof(wcc_rans_block) * ln->nchunks);
	const size_t tiles_off = off;
	off += ALIGN16(sizeof(wcc_merge_tile) * ln->ntiles);
	const size_t segs_off = off;
	off += ALIGN16(sizeof(wcc_merge_seg) * ln->nsegs);

	memset(ln->h_in + status_off, 0, 4u * ln->njobs);
	/* chunks sorted by table slot (counting sort, stable), cut into blocks
	 * of up to WCC_RANS_WARPS chunks that share a table */
	memset(ln->cnt, 0, (TABLE_SLOTS + 1u) * sizeof(uint32_t));
	for (size_t i = 0; i < ln->nchunks; i++)
		ln->cnt[ln->chunk_table[i] + 1u]++;
	for (uint32_t s = 0; s < TABLE_SLOTS; s++)
		ln->cnt[s + 1u] += ln->cnt[s];
	wcc_chunk *hc = (wcc_chunk *)(ln->h_in + chunks_off);
	for (size_t i = 0; i < ln->nchunks; i++)
		hc[ln->cnt[ln->chunk_table[i]]++] = ln->chunks[i];
	/* cnt[s] is now the end of table s's run */
	wcc_rans_block *hb = (wcc_rans_block *)(ln->h_in + blocks_off);
	uint32_t nblocks = 0, start = 0;
	for (uint32_t s = 0; s < TABLE_SLOTS && start < ln->nchunks; s++) {
		uint32_t end = ln->cnt[s];
		for (uint32_t c = start; c < end; c += WCC_RANS_WARPS) {
			hb[nblocks].first = c;
			hb[nblocks].count = end - c < WCC_RANS_WARPS ? end - c : WCC_RANS_WARPS;
			hb[nblocks].table = s;
			hb[nblocks].pad = 0;
			nblocks++;
		}
		if (end > start)
			start = end;
	}
	if (ctx->fault_inject && ln->nchunks)
		hc[0].in = (const uint8_t *)(uintptr_t)64; /* an illegal address: the kernel faults */
	memcpy(ln->h_in + tiles_off, ln->tiles, sizeof(wcc_merge_tile) * ln->ntiles);
	memcpy(ln->h_in + segs_off, ln->segs, sizeof(wcc_merge_seg) * ln->nsegs);
	if (ln->nstaged) /* the mount's payloads are page-locked: nothing to copy */
		wc_threadpool_run(ctx->pool, copy_payload, ln, ln->njobs);

	cudaError_t e = upload(ln, off);
	if (e != cudaSuccess)
		return cuda_fail(ctx, "copy to device", e);
	uint32_t *d_status = (uint32_t *)(ln->d_in + status_off);
	if (ctx->timing)
		cudaEventRecord(ln->k0, ln->stream);
	int le = wcc_launch_rans((const wcc_rans_block *)(ln->d_in + blocks_off), nblocks,
				 (const wcc_chunk *)(ln->d_in + chunks_off), ctx->d_freqs,
				 (const wcc_merge_tile *)(ln->d_in + tiles_off), d_status, ln->stream);
	if (le)
		return cuda_fail(ctx, "rANS kernel launch", (cudaError_t)le);
	le = wcc_launch_merge((const wcc_merge_seg *)(ln->d_in + segs_off), (uint32_t)ln->nsegs,
			      (const wcc_merge_tile *)(ln->d_in + tiles_off), ln->stream);
	if (le)
		return cuda_fail(ctx, "merge kernel launch", (cudaError_t)le);
	if (ctx->timing)
		cudaEventRecord(ln->k1, ln->stream);
	e = cudaMemcpyAsync(ln->h_status, d_status, 4u * ln->njobs, cudaMemcpyDeviceToHost, ln->stream);
	if (e == cudaSuccess && ln->host_target && ln->used_out)
		e = download(ln);
	if (e == cudaSuccess)
		e = cudaEventRecord(ln->done, ln->stream);
	if (e != cudaSuccess)
		return cuda_fail(ctx, "copy from device", e);
	ln->t_submit = wc_mono_ns();
	ln->prep_ns = ln->t_submit - t0;
	return WC_OK;
}

/* Copy with non-temporal 16-byte stores: the destination is not read back
 * soon, and skipping its read-for-ownership saves a third of the memory
 * traffic of a plain memcpy. */
static void stream_copy(uint8_t *d, const uint8_t *s, size_t n)
{
#ifdef __SSE2__
	size_t head = (16u - ((uintptr_t)d & 15u)) & 15u;
	if (head > n)
		head = n;
	memcpy(d, s, head);
	d += head;
	s += head;
	n -= head;
	for (; n >= 64; n -= 64, d += 64, s += 64) {
		__m128i a = _mm_loadu_si128((const __m128i *)s), b = _mm_loadu_si128((const __m128i *)(s + 16)),
			c = _mm_loadu_si128((const __m128i *)(s + 32)), e = _mm_loadu_si128((const __m128i *)(s + 48));
		_mm_stream_si128((__m128i *)d, a);
		_mm_stream_si128((__m128i *)(d + 16), b);
		_mm_stream_si128((__m128i *)(d + 32), c);
		_mm_stream_si128((__m128i *)(d + 48), e);
	}
	memcpy(d, s, n);
	_mm_sfence();
#else
	memcpy(d, s, n);
#endif
}

/* XXH3-64 of src[0..n) while copying it to dst, block by block so each
 * block is read from memory once (hashed, then copied from L1). */
static uint64_t copy_and_hash(uint8_t *dst, const uint8_t *src, size_t n)
{
	enum { BLOCK = 16384 };
	XXH3_state_t *st = XXH3_createState();
	if (!st || XXH3_64bits_reset(st) != XXH_OK) {
		XXH3_freeState(st);
		memcpy(dst, src, n);
		return wc_xxh3_64(dst, n);
	}
	for (size_t o = 0; o < n; o += BLOCK) {
		size_t k = n - o < BLOCK ? n - o : BLOCK;
		XXH3_64bits_update(st, src + o, k);
		stream_copy(dst + o, src + o, k);
	}
	uint64_t h = XXH3_64bits_digest(st);
	XXH3_freeState(st);
	return h;
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
					 : copy_and_hash(job->out, ln->h_out + lj->out_off, job->out_size);
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
			*dev_err = cuda_fail(ctx, "copy of a CPU-decoded tile to the device", e);
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
		err = cuda_fail(ctx, "decode batch", e);
	} else {
		if (ctx->timing) {
			float ms = 0;
			if (cudaEventElapsedTime(&ms, ln->k0, ln->k1) == cudaSuccess) {
				pthread_mutex_lock(&ctx->mu);
				ctx->kernel_ms += ms;
				pthread_mutex_unlock(&ctx->mu);
			}
		}
		wc_threadpool_run(ctx->pool, finish_job, ln, ln->njobs);
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
	lane_reset(ln);
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
				lane_reset(ln);
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
	lane_reset(ln);
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
		return cuda_fail(ctx, "selecting the device", ce);

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
	for (size_t i = 0; i < n && cl.err == WC_OK; i++) {
		wc_tile_job *job = &jobs[i];
		uint8_t *dout = dev_out ? dev_out[i] : NULL;
		job->status = WC_E_BACKEND;
		job->detail[0] = '\0';
		if (!plan_job(ctx, job, dout, &pl)) {
			cpu_idx[ncpu++] = i;
			continue;
		}
		if (!ln)
			ln = acquire(&cl, host_target);
		if (!lane_fits(ln, job, &pl)) {
			if (ln->njobs == 0) { /* larger than a whole lane */
				cpu_idx[ncpu++] = i;
				continue;
			}
			submit(&cl, ln);
			ln = acquire(&cl, host_target);
			if (!lane_fits(ln, job, &pl)) {
				cpu_idx[ncpu++] = i;
				continue;
			}
		}
		wc_err e = lane_add(ln, job, dout, &pl);
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
						cl.err = cuda_fail(ctx, "copy of a CPU-decoded tile to the device", ce);
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
