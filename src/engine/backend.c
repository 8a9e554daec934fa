/*
 * backend.c - choosing a decode backend (CPU, or the CUDA plugin loaded with
 * dlopen), the CPU fallback of wc_backend_decode(), and the reference
 * per-job CPU decoder.
 */
#include "engine/backend.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "codec/tile_codec.h"
#include "core/hash.h"

#ifndef WC_PLUGIN_DIR
#define WC_PLUGIN_DIR "/usr/local/lib/wcodecfs"
#endif

wc_err wc_job_fail(wc_tile_job *job, wc_err e, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(job->detail, sizeof job->detail, fmt, ap);
	va_end(ap);
	job->status = e;
	return e;
}

/* ---- reference CPU decoders, one per job kind ---------------------------- */

static wc_err decode_planes(wc_tile_job *job)
{
	wc_clear_detail();
	wc_err e = wc_tile_decode_dict(job->layout, job->payload, job->payload_size, job->tables, job->ntables,
				       job->chunk_symbols, job->dict, job->dict_entries, job->out, job->out_size);
	if (e != WC_OK)
		return wc_job_fail(job, e, "%s", *wc_last_detail() ? wc_last_detail() : wc_strerror(e));
	return wc_job_check_hash(job);
}

wc_err wc_job_check_hash(wc_tile_job *job)
{
	uint64_t h = wc_xxh3_64(job->out, job->out_size);
	if (h != job->dhash)
		return wc_job_fail(job, WC_E_CORRUPT,
				   "decoded %u bytes hash to %016llx, the index says %016llx",
				   job->out_size, (unsigned long long)h,
				   (unsigned long long)job->dhash);
	return WC_OK;
}

/* Kinds of formats, registered by them (wc_job_kind_register). */
static const wc_job_kind_ops *_Atomic job_kinds[WC_JOB_KINDS];

wc_err wc_job_kind_register(uint32_t kind, const wc_job_kind_ops *ops)
{
	if (kind == WC_JOB_PLANES || kind >= WC_JOB_KINDS || !ops || !ops->cpu_decode)
		return wc_fail(WC_E_INVAL, "job kind %u: not a kind a format may register", kind);
	const wc_job_kind_ops *none = NULL;
	if (atomic_compare_exchange_strong(&job_kinds[kind], &none, ops) || none == ops)
		return WC_OK;
	return wc_fail(WC_E_INVAL, "job kind %u is \"%s\"'s, not \"%s\"'s", kind, none->name, ops->name);
}

wc_err wc_decode_job_cpu(wc_tile_job *job)
{
	job->status = WC_OK;
	job->detail[0] = '\0';
	const wc_job_kind_ops *k = job->kind < WC_JOB_KINDS ? atomic_load(&job_kinds[job->kind]) : NULL;
	wc_err e;
	if (job->kind == WC_JOB_PLANES)
		e = decode_planes(job);
	else if (k)
		e = k->cpu_decode(job);
	else
		e = wc_job_fail(job, WC_E_UNSUPPORTED, "decode job kind %u: no format registered it", job->kind);
	job->status = e;
	if (e != WC_OK)
		wc_fail(e, "%s", job->detail); /* also for a caller on this thread */
	return e;
}

/* ---- decoding with CPU fallback ------------------------------------------ */

/* The CPU backend batches fall back to, started on the first fallback (one
 * thread per online CPU) and kept for the life of the process: a GPU that
 * failed once tends to fail again, and its batches should then be decoded
 * at the CPU backend's speed, not one dispatcher thread's. Readers of a GPU
 * backend decode their lone misses on it too (wc_decode_jobs_cpu). */
static pthread_once_t fallback_once = PTHREAD_ONCE_INIT;
static wc_backend *fallback_cpu;

static void fallback_start(void)
{
	if (wc_backend_cpu_create(0, &fallback_cpu) != WC_OK) {
		wc_log(WC_LOG_WARN, "CPU fallback pool: %s; decoding on the calling thread",
		       wc_last_detail());
		fallback_cpu = NULL;
	}
}

wc_err wc_backend_decode(wc_backend *be, wc_tile_job *jobs, size_t n)
{
	if (n == 0)
		return WC_OK;
	wc_clear_detail();
	wc_err e = be->ops->decode(be, jobs, n);
	if (e == WC_OK)
		return WC_OK;
	if (e != WC_E_BACKEND) { /* the contract allows only OK or BACKEND; be safe */
		const char *why = *wc_last_detail() ? wc_last_detail() : wc_strerror(e);
		for (size_t i = 0; i < n; i++)
			if (jobs[i].status == WC_OK)
				wc_job_fail(&jobs[i], e, "%s backend: %s", be->ops->name, why);
		return WC_OK;
	}
	wc_log(WC_LOG_WARN, "%s backend failed (%s); decoding %zu tile%s on the CPU",
	       be->ops->name, *wc_last_detail() ? wc_last_detail() : "no reason given", n,
	       n == 1 ? "" : "s");
	return wc_decode_jobs_cpu(jobs, n);
}

wc_err wc_decode_jobs_cpu(wc_tile_job *jobs, size_t n)
{
	pthread_once(&fallback_once, fallback_start);
	if (fallback_cpu)
		return fallback_cpu->ops->decode(fallback_cpu, jobs, n);
	for (size_t i = 0; i < n; i++) /* no pool: this thread alone */
		wc_decode_job_cpu(&jobs[i]);
	return WC_OK;
}

/* ---- the CUDA plugin ----------------------------------------------------- */

/* The plugin's backend wrapped so that destroying it also drops the library
 * handle. RTLD_NODELETE keeps the code mapped after dlclose(): the CUDA
 * runtime registers exit handlers that must still find it. */
typedef struct plugin_backend {
	wc_backend base;
	wc_backend *inner;
	void *dl;
	wc_backend_ops ops; /* plugin_ops plus the inner backend's host allocator,
			     * where it has one */
} plugin_backend;

static wc_err plugin_decode(wc_backend *be, wc_tile_job *jobs, size_t n)
{
	plugin_backend *pb = (plugin_backend *)be;
	return pb->inner->ops->decode(pb->inner, jobs, n);
}

static void plugin_destroy(wc_backend *be)
{
	plugin_backend *pb = (plugin_backend *)be;
	pb->inner->ops->destroy(pb->inner);
	dlclose(pb->dl);
	free(pb);
}

static const wc_backend_ops plugin_ops = {
	.name = "cuda",
	.decode = plugin_decode,
	.destroy = plugin_destroy,
};

/* dlopen the plugin and find its entry point; *dl and *create on success. */
static wc_err plugin_open(char *path, size_t cap, void **dl, wc_backend_create_fn *create)
{
	const char *dir = getenv("WCODEC_PLUGIN_DIR");
	if (!dir || !*dir)
		dir = WC_PLUGIN_DIR;
	if ((size_t)snprintf(path, cap, "%s/%s", dir, WC_CUDA_PLUGIN_NAME) >= cap)
		return wc_fail(WC_E_INVAL, "plugin directory path too long: %s", dir);
	if (access(path, R_OK) != 0)
		return wc_fail(errno == ENOENT ? WC_E_NOTFOUND : WC_E_BACKEND,
			       "CUDA plugin %s: %s (built with --with-cuda?)", path, strerror(errno));
	dlerror();
	*dl = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	if (!*dl)
		return wc_fail(WC_E_BACKEND, "cannot load CUDA plugin: %s", dlerror());
	*create = (wc_backend_create_fn)(uintptr_t)dlsym(*dl, WC_CUDA_PLUGIN_SYMBOL);
	if (!*create) {
		wc_err e = wc_fail(WC_E_BACKEND, "CUDA plugin %s lacks %s (built with another version?)", path,
				   WC_CUDA_PLUGIN_SYMBOL);
		dlclose(*dl);
		return e;
	}
	return WC_OK;
}

wc_err wc_backend_plugin_probe(char *path, size_t cap)
{
	void *dl;
	wc_backend_create_fn create;
	wc_err e = plugin_open(path, cap, &dl, &create);
	if (!e)
		dlclose(dl);
	return e;
}

static wc_err cuda_create(const wc_backend_opts *opts, wc_backend **out)
{
	char path[4096];
	void *dl;
	wc_backend_create_fn create;
	wc_err e = plugin_open(path, sizeof path, &dl, &create);
	if (e)
		return e;
	plugin_backend *pb = calloc(1, sizeof *pb);
	if (!pb) {
		dlclose(dl);
		return wc_fail(WC_E_NOMEM, "CUDA backend");
	}
	wc_clear_detail();
	e = create(opts, &pb->inner);
	if (e != WC_OK || !pb->inner) {
		if (e == WC_OK)
			e = wc_fail(WC_E_BACKEND, "CUDA plugin returned no backend");
		else if (!*wc_last_detail())
			wc_fail(e, "CUDA plugin: %s", wc_strerror(e));
		free(pb);
		dlclose(dl);
		return e;
	}
	pb->ops = plugin_ops;
	if (pb->inner->ops->host_alloc && pb->inner->ops->host_free) {
		pb->ops.host_alloc = pb->inner->ops->host_alloc;
		pb->ops.host_free = pb->inner->ops->host_free;
	}
	/* Every property the plugin states (a field added to wc_backend comes
	 * along), then the wrapper's ops and the floors the cache relies on. */
	pb->base = *pb->inner;
	pb->base.ops = &pb->ops;
	if (!pb->base.max_batch)
		pb->base.max_batch = 1;
	if (!pb->base.concurrency)
		pb->base.concurrency = 1;
	pb->dl = dl;
	*out = &pb->base;
	return WC_OK;
}

void *wc_backend_symbol(const wc_backend *be, const char *name)
{
	if (!be || be->ops->destroy != plugin_destroy)
		return NULL;
	return dlsym(((const plugin_backend *)be)->dl, name);
}

wc_backend *wc_backend_plugin_backend(wc_backend *be)
{
	if (!be || be->ops->destroy != plugin_destroy)
		return NULL;
	return ((plugin_backend *)be)->inner;
}

/* ---- choosing a backend -------------------------------------------------- */

wc_err wc_backend_create(const char *name, const wc_backend_opts *opts, wc_backend **out)
{
	static const wc_backend_opts defaults = { 0 };
	if (!opts)
		opts = &defaults;
	*out = NULL;
	if (!name)
		name = "auto";
	if (strcmp(name, "cpu") == 0)
		return wc_backend_cpu_create(opts->threads, out);
	if (strcmp(name, "cuda") == 0)
		return cuda_create(opts, out);
	if (strcmp(name, "auto") != 0)
		return wc_fail(WC_E_INVAL, "unknown decode backend \"%s\" (auto, cpu, cuda)", name);

	wc_err e = cuda_create(opts, out);
	if (e == WC_OK) {
		wc_log(WC_LOG_INFO, "decode backend: cuda (batches of %u, %u at once)",
		       (*out)->max_batch, (*out)->concurrency);
		return WC_OK;
	}
	char why[512];
	snprintf(why, sizeof why, "%s", *wc_last_detail() ? wc_last_detail() : wc_strerror(e));
	e = wc_backend_cpu_create(opts->threads, out);
	if (e != WC_OK)
		return e;
	wc_log(WC_LOG_INFO, "decode backend: cpu (CUDA unusable: %s)", why);
	return WC_OK;
}

void wc_backend_destroy(wc_backend *be)
{
	if (be)
		be->ops->destroy(be);
}

bool wc_backend_buf_is_backend_memory(const wc_backend *be)
{
	return be->ops->host_alloc && be->ops->host_free;
}

size_t wc_backend_buf_size(size_t bytes) { return bytes ? (bytes + 4095) & ~(size_t)4095 : 4096; }

void *wc_host_buf_alloc(size_t bytes)
{
	/* No MAP_POPULATE: the cache faults a tile buffer in on the thread
	 * that reads its payload, in parallel across a batch (cache.c,
	 * fault_in_fresh), not on the one thread that maps them all. */
	void *p = mmap(NULL, wc_backend_buf_size(bytes), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

void wc_host_buf_free(void *p, size_t bytes)
{
	if (p)
		munmap(p, wc_backend_buf_size(bytes));
}

void *wc_backend_buf_alloc(const wc_backend *be, size_t bytes)
{
	if (wc_backend_buf_is_backend_memory(be))
		return be->ops->host_alloc(wc_backend_buf_size(bytes));
	return wc_host_buf_alloc(bytes);
}

void wc_backend_buf_free(const wc_backend *be, void *p, size_t bytes)
{
	if (!p)
		return;
	if (wc_backend_buf_is_backend_memory(be))
		be->ops->host_free(p, wc_backend_buf_size(bytes));
	else
		wc_host_buf_free(p, bytes);
}
