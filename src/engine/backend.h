/*
 * backend.h - decode backends: where tile payloads become tensor bytes.
 *
 * Two implementations behind this one interface: the CPU backend (a thread
 * pool; backend_cpu.c) and the CUDA backend (cuda/, a plugin dlopen()ed at
 * run time so one binary runs with or without a GPU). On the same payload
 * both produce the same bytes; every job's output is checked against its
 * dhash before the backend reports WC_OK for it.
 */
#ifndef WC_BACKEND_H
#define WC_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codec/planes.h"
#include "codec/rans.h"
#include "core/wc_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a job decodes. Kind WC_JOB_PLANES (0) is the engine's own: a tile
 * payload (tile_codec.h) to tensor bytes. A format with tiles of another
 * kind registers it (wc_job_kind_register) with its reference CPU decoder;
 * its jobs carry the format's own data in kind_data (the format's header
 * says what it points to). The engine knows no more of them; a backend
 * that cannot decode a kind hands the job to wc_decode_job_cpu(). */
#define WC_JOB_PLANES 0u
#define WC_JOB_KINDS 8u /* kinds 1..7 are for formats */

/* One tile to decode. Everything the decode needs, nothing of the container. */
typedef struct wc_tile_job {
	uint32_t kind;            /* WC_JOB_PLANES or a registered kind */
	wc_layout layout;
	uint32_t chunk_symbols;
	const uint8_t *payload;   /* host memory, payload_size bytes, chash checked */
	uint32_t payload_size;
	const wc_freqtab *tables; /* the file's tables (stable while the container lives) */
	uint32_t ntables;
	uint64_t table_key;       /* identifies `tables` for backends that cache them: the container id */
	uint8_t *out;             /* host memory, out_size bytes */
	uint32_t out_size;
	uint64_t dhash;           /* expected XXH3-64 of the decoded bytes */
	wc_err status;            /* set by the backend for this job */
	/* Why status is not WC_OK, set by the backend with status ("" if it has
	 * no reason to give). wc_fail() reasons are per thread and a backend
	 * decodes on threads of its own, so the reason travels with the job. */
	char detail[256];
	/* A registered kind's own data (NULL for WC_JOB_PLANES), stable while
	 * the tile source that described the job lives. */
	const void *kind_data;
	/* WC_JOB_PLANES of a layout "dict" tensor (docs/FORMAT.md 2.1): its
	 * dict_entries sorted values of layout.elem_size bytes (host memory,
	 * stable while the container lives), gathered by the decoded index
	 * planes; NULL and 0 for other layouts. */
	const uint8_t *dict;
	uint32_t dict_entries;
	/* A reader waits for this tile now (its miss, not a prefetch): a
	 * backend with idle threads may put several on it. The CPU backend
	 * cuts such a tile into parts when its batch has fewer tiles than
	 * threads; cutting prefetches too cost a streaming reader 6-15% on 16
	 * cores (docs/BENCHMARKS.md, "GPU backend through the mount"). */
	bool reader_waits;
} wc_tile_job;

/* Set job->status = e and job->detail from a printf-style reason; returns e.
 * For backends (the CPU one, the CUDA plugin) reporting a failed job. */
wc_err wc_job_fail(wc_tile_job *job, wc_err e, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

typedef struct wc_backend wc_backend;

typedef struct wc_backend_ops {
	const char *name; /* "cpu", "cuda" */
	/* Decode jobs[0..n) synchronously; safe to call from several threads.
	 * Sets every job's status. Returns WC_OK if each job was attempted;
	 * WC_E_BACKEND if the device failed as a whole (then no job's output
	 * may be trusted and the caller decodes the batch on the CPU). */
	wc_err (*decode)(wc_backend *be, wc_tile_job *jobs, size_t n);
	void (*destroy)(wc_backend *be);
	/* Optional (NULL: the cache mmap()s): allocate `bytes` bytes (a multiple
	 * of 4096) of host memory this backend decodes from and into fastest, for
	 * the cache's tile and payload buffers; the CUDA backend gives page-locked
	 * memory so the GPU copies straight into and out of them (no staging
	 * copy). NULL if out of memory. Thread-safe. host_free frees one such
	 * buffer of the same `bytes`; every one is freed before destroy. */
	void *(*host_alloc)(size_t bytes);
	void (*host_free)(void *p, size_t bytes);
} wc_backend_ops;

struct wc_backend {
	const wc_backend_ops *ops;
	uint32_t max_batch;   /* tiles per decode call the backend prefers */
	uint32_t concurrency; /* decode calls worth running at once (dispatch threads) */
	/* What a reader of this backend should do by default; each is a property
	 * the backend knows and its users (wcodecfs) do not, so no user compares
	 * backend names. 0 / false: no preference. */
	uint32_t readahead_tiles; /* tiles to decode ahead of a sequential reader */
	/* A one-tile decode call takes longer than decoding the tile on the
	 * calling CPU thread (a GPU round trip), so a reader that would wait
	 * for a tile no decode call has taken yet decodes it itself. */
	bool reader_decodes_misses;
};

typedef struct wc_backend_opts {
	unsigned threads;          /* CPU threads; 0 = online CPUs */
	int gpu;                   /* CUDA device ordinal */
	uint64_t gpu_memory_limit; /* device bytes the CUDA backend may hold; 0 = its default */
	/* For tests of the fallback path only: every batch the CUDA backend
	 * submits makes the GPU fault (an illegal address), so that a fault is
	 * seen to end in WC_E_BACKEND and a CPU decode, never in wrong bytes.
	 * A fault poisons the process's CUDA context for good. */
	bool gpu_fault_every_batch;
} wc_backend_opts;

/* Create a backend by name:
 *   "cpu"  - the thread pool;
 *   "cuda" - load the plugin (WC_PLUGIN_DIR or $WCODEC_PLUGIN_DIR) and open
 *            the GPU; WC_E_NOTFOUND/WC_E_BACKEND with a reason if unusable;
 *   "auto" - "cuda" if it opens, else "cpu"; logs which one it chose and why.
 * Errors: WC_E_INVAL (unknown name), as above, WC_E_NOMEM. */
wc_err wc_backend_create(const char *name, const wc_backend_opts *opts, wc_backend **out);
void wc_backend_destroy(wc_backend *be);

/* Decode a batch with be, falling back to the CPU: if be's decode returns
 * WC_E_BACKEND the failure is logged (WC_LOG_WARN, with the reason) and the
 * batch is decoded again by a CPU backend (one thread per online CPU, the
 * calling thread among them), started on the first fallback and kept for the
 * life of the process; if that cannot start, by the calling thread alone. A
 * job whose payload is corrupt ends with WC_E_CORRUPT from either backend.
 * Returns WC_OK (every job's status says how it ended). Thread-safe. */
wc_err wc_backend_decode(wc_backend *be, wc_tile_job *jobs, size_t n);

/* Decode jobs[0..n) on the CPU: on the process's shared CPU backend (one
 * thread per online CPU, the calling thread among them; started on first
 * use and kept, the one wc_backend_decode falls back to), which cuts a
 * batch of fewer tiles than threads into parts so that one tile is decoded
 * by every idle thread; if that backend cannot start, on the calling
 * thread alone. Sets every job's status; returns WC_OK. Thread-safe. For a
 * reader of a GPU backend decoding its own miss (a GPU round trip takes
 * longer than the CPU does for one tile). */
wc_err wc_decode_jobs_cpu(wc_tile_job *jobs, size_t n);

/* Host buffers for tile payloads and decoded tiles, `bytes` bytes (rounded
 * up to whole 4096-byte pages here): from be's host allocator when it has
 * one (the CUDA backend's page-locked memory, which the GPU DMAs from and
 * into with no staging copy), else anonymous mmap() memory, which goes back
 * to the OS at once when freed. NULL if out of memory. Free with
 * wc_backend_buf_free() and the same `bytes`. Thread-safe. */
void *wc_backend_buf_alloc(const wc_backend *be, size_t bytes);
void wc_backend_buf_free(const wc_backend *be, void *p, size_t bytes);

/* Anonymous mmap() memory of wc_backend_buf_size(bytes) bytes, whatever the
 * backend: what wc_backend_buf_alloc() gives for a backend without its own
 * host allocator, and what the tile cache decodes into when its pool of the
 * backend's memory is empty. NULL if out of memory. Free with
 * wc_host_buf_free() and the same `bytes`. Thread-safe. */
void *wc_host_buf_alloc(size_t bytes);
void wc_host_buf_free(void *p, size_t bytes);

/* The bytes wc_backend_buf_alloc(be, bytes) really allocates: bytes rounded
 * up to whole 4096-byte pages (one page for 0). Callers that keep buffers for
 * reuse size them by this. */
size_t wc_backend_buf_size(size_t bytes);

/* Whether wc_backend_buf_alloc() memory comes from be's own allocator (and
 * so cannot be mremap()ed). */
bool wc_backend_buf_is_backend_memory(const wc_backend *be);

/* Decode one job on the calling thread with the reference CPU decoder,
 * chosen by job->kind: WC_JOB_PLANES is wc_tile_decode_dict() (tile_codec.h;
 * wc_tile_decode() when job->dict is NULL) then XXH3-64 of the out_size
 * decoded bytes compared with job->dhash; another kind, its registered
 * cpu_decode. Sets and returns job->status, and job->detail when it is not
 * WC_OK: WC_E_CORRUPT (payload inconsistent, or dhash mismatch),
 * WC_E_UNSUPPORTED (a kind nobody registered), WC_E_NOMEM. Thread-safe. */
wc_err wc_decode_job_cpu(wc_tile_job *job);

/* A job kind of a format (see WC_JOB_PLANES). cpu_decode decodes one job
 * of it on the calling thread and checks job->dhash, with the contract of
 * wc_decode_job_cpu(); thread-safe. */
typedef struct wc_job_kind_ops {
	const char *name; /* for messages: "qvq" */
	wc_err (*cpu_decode)(wc_tile_job *job);
} wc_job_kind_ops;

/* Register kind (1..WC_JOB_KINDS-1) with ops (static storage). Registering
 * the same ops again is a no-op, so a format may register whenever it opens
 * a file. Errors: WC_E_INVAL (kind out of range, or taken by other ops).
 * Thread-safe. */
wc_err wc_job_kind_register(uint32_t kind, const wc_job_kind_ops *ops);

/* Whether the CUDA plugin can be loaded, without opening a GPU: its path
 * ($WCODEC_PLUGIN_DIR or the installed directory) into path (cap bytes),
 * then dlopen and the entry point's dlsym. Errors: WC_E_NOTFOUND (no such
 * file: a build without --with-cuda), WC_E_BACKEND (it does not load, or
 * lacks the entry point of this library's layout), with the reason. */
wc_err wc_backend_plugin_probe(char *path, size_t cap);

/* An exported function of be's plugin by name (dlsym), NULL for the CPU
 * backend or a plugin without it: how a format reaches its own device code
 * in the plugin (the .qvq k-means search: wcodec_cuda_vq_nearest) without
 * the decode interface knowing of it. Valid while be lives. */
void *wc_backend_symbol(const wc_backend *be, const char *name);

/* The plugin's own backend object behind be (wc_backend_create wraps it),
 * for a plugin function found with wc_backend_symbol that takes one (the
 * .qvq images' wcodec_cuda_vq_place); NULL for the CPU backend. Valid
 * while be lives. */
wc_backend *wc_backend_plugin_backend(wc_backend *be);

/* Compare XXH3-64 of job's out_size decoded bytes with job->dhash: WC_OK, or
 * WC_E_CORRUPT with the two hashes in job->detail (job->status set). For
 * decoders that check a tile once all of its parts are done. */
wc_err wc_job_check_hash(wc_tile_job *job);

/* Decode one synthetic BF16 tile (128 KiB, both planes rANS-coded, its
 * frequency tables under table_key UINT64_MAX) in `calls` decode calls at
 * once (1..64; be->concurrency uses every CUDA lane), each from a thread of
 * its own, and check the bytes: a fresh backend's first calls pay one-time
 * costs (the CUDA context's first launches and copies on each stream took
 * 13-26 ms) that would otherwise fall on the first reads. Errors: the
 * decode's (the job's status and reason), WC_E_CORRUPT (wrong bytes),
 * WC_E_NOMEM. A failure does not make the backend unusable: callers log it.
 * (backend_warm.c) */
wc_err wc_backend_warm_up(wc_backend *be, unsigned calls);

/* The CPU backend directly: `threads` decoding threads per decode call (0 =
 * online CPUs): threads - 1 pool workers plus the calling thread. Prefers
 * batches of 2 * threads tiles and 2 concurrent callers. A batch of fewer
 * tiles than threads (a reader's miss with nothing queued behind it) has
 * the tiles a reader waits for (wc_tile_job.reader_waits) cut into parts of
 * consecutive chunks (wc_tile_decode_part), so every thread works on them
 * and the reader waits less. Errors: WC_E_RANGE
 * (more than 1024 threads), WC_E_NOMEM, WC_E_IO (a thread failed to start). */
wc_err wc_backend_cpu_create(unsigned threads, wc_backend **out);

/* The symbol the CUDA plugin exports (cuda/plugin.c):
 *   wc_err wcodec_cuda_backend_create_v5(const wc_backend_opts *, wc_backend **);
 * The suffix is the layout of struct wc_backend, wc_backend_ops,
 * wc_backend_opts and wc_tile_job (v5: registered job kinds with kind_data,
 * gpu_fault_every_batch): a plugin left from a build with another layout
 * lacks this symbol and is refused with a message, rather than read past
 * the end of its backend. */
#define WC_CUDA_PLUGIN_NAME "wcodec-cuda.so"
#define WC_CUDA_PLUGIN_SYMBOL "wcodec_cuda_backend_create_v5"
typedef wc_err (*wc_backend_create_fn)(const wc_backend_opts *opts, wc_backend **out);

#ifdef __cplusplus
}
#endif

#endif /* WC_BACKEND_H */
