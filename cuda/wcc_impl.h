/*
 * wcc_impl.h - the decode context's state, shared by the files of the GPU
 * batch pipeline (wcc_device.c: context, submit, complete, calls;
 * wcc_lane.c: frequency tables, job planning, filling a lane). Not installed.
 */
#ifndef WCC_IMPL_H
#define WCC_IMPL_H

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "codec/lossy.h"
#include "codec/tile_codec.h"
#include "engine/threadpool.h"
#include "wcc_device.h"
#include "wcc_kernels.h"

#define ALIGN16(x) (((size_t)(x) + 15u) & ~(size_t)15u)
#define MIB ((size_t)1 << 20)
#define TABLE_SLOTS 8192u          /* frequency tables resident on the device */
#define LANE_MAX_JOBS 4096u        /* tiles per lane (size of the status array) */
#define DEFAULT_LIMIT (320u * MIB) /* device bytes when the caller gives none */

/* The scales a lossy tile of elements [first, first + n) reads, as the
 * device holds them (wcc_lossy.c): scales [slo, shi) of its tensor's; or,
 * with channels last in groups (ng > 0), groups [slo, slo + ng) of each
 * channel, channel c's at c * ng (the span between would run over every
 * channel). count: scales uploaded; groups: the tensor's per channel. */
typedef struct wcc_scale_span {
	uint64_t slo, shi, count;
	uint32_t ng, groups;
} wcc_scale_span;

/* The span of p's scales that elements [first, first + n) read (docs/FORMAT.md
 * 2.2). Returns 0, or -1 for parameters or a range no valid tile has. */
int wcc_scale_span_of(const wc_lossy_params *p, uint64_t first, uint64_t n, wcc_scale_span *s);

/* The span's count scales of a tensor's `scales` (channels of them) into dst. */
void wcc_scale_copy(const float *scales, uint32_t channels, const wcc_scale_span *s, uint8_t *dst);

/* The merge tile dequantizing lossy tile lj's n codes (device addresses:
 * codes, its span's scales, out) bit for bit as wc_lossy_dequant. */
struct wc_lossy_job;
void wcc_lossy_merge_tile(wcc_merge_tile *t, const struct wc_lossy_job *lj, uint32_t n, const wcc_scale_span *s,
			  const uint8_t *codes, const uint8_t *scales, uint8_t *out);

typedef struct lane_job {
	wc_tile_job *job;
	size_t payload_off; /* in h_in / d_in */
	size_t scale_off;   /* a lossy tile: its scales (span) in h_in / d_in */
	const struct wc_lossy_job *lossy; /* container/lossy_job.h */
	wcc_scale_span span;
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
	int fault_inject; /* tests: every batch faults (wcc_ctx_opts.fault_every_batch) */
	wc_threadpool *pool;
	/* Batch timings (under mu), logged by wcc_ctx_destroy: where a decode
	 * call's time goes, for tuning the read path. */
	uint64_t st_batches, st_tiles, st_prep_ns, st_gpu_ns, st_wait_ns, st_check_ns;
};

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
	/* a lossy tile (WC_JOB_LOSSY): its code plane is planned above (n
	 * codes; rANS into scratch, or RAW read in place), then a merge tile
	 * of kind WCC_KIND_LOSSY reads scale_bytes of scales staged after the
	 * payload */
	int lossy;
	wcc_scale_span span;
	size_t scale_bytes;
	/* the last table set placed, kept across one call's jobs (they
	 * mostly share it): no context lock per job */
	uint64_t memo_key;
	uint32_t memo_count, memo_base;
	int memo;
} job_plan;

/* Mark the context dead (logged once) after CUDA call `what` failed with e;
 * returns WC_E_BACKEND with the reason. */
wc_err wcc_cuda_fail(wcc_ctx *ctx, const char *what, cudaError_t e);

/* Is [p, p + n) page-locked host memory the GPU can DMA to and from?
 * (wcc_pinned.c: ranges registered with wcc_pinned_add are known without
 * asking the driver.) */
int wcc_is_pinned(const void *p, size_t n);

/* Register [p, p + n) as page-locked (allocated so by the plugin) until
 * wcc_pinned_remove(p); a failed registration only costs speed. */
void wcc_pinned_add(const void *p, size_t n);
void wcc_pinned_remove(const void *p);

/* Can the GPU decode this job into dev_out (NULL: a lane buffer)? Fills *pl;
 * uploads the job's frequency tables on first use. 0: decode it on the CPU.
 * A call's jobs share one *pl, its memo zeroed before the first. */
int wcc_plan_job(wcc_ctx *ctx, const wc_tile_job *job, const uint8_t *dev_out, job_plan *pl);

/* Does the planned job still fit the lane's buffers and descriptors? */
int wcc_lane_fits(const wcc_lane *ln, const wc_tile_job *job, const job_plan *pl);

/* Add the planned job to the lane's batch. Errors: WC_E_NOMEM. */
wc_err wcc_lane_add(wcc_lane *ln, wc_tile_job *job, uint8_t *dev_out, const job_plan *pl);

/* Grow *arr (*cap elements of elem bytes) to hold need: 0, or -1 when out
 * of memory (*arr kept). */
int wcc_grow(void **arr, size_t *cap, size_t need, size_t elem);

/* Where a batch's descriptors lie, byte offsets from a base. */
typedef struct wcc_desc_offsets {
	size_t chunks, blocks, tiles, segs, end;
	uint32_t nblocks;
} wcc_desc_offsets;

/* Bytes the lane's batch descriptors (chunks, blocks, tiles, segments)
 * take, and their writing at base + off: the chunks sorted by table slot
 * (a stable counting sort in cnt, TABLE_SLOTS + 1 entries of scratch), cut
 * into blocks of up to WCC_RANS_WARPS chunks that share a table, then the
 * tiles and segments as they are. Fills *o. */
size_t wcc_lane_desc_bytes(const wcc_lane *ln);
void wcc_lane_write_descs(const wcc_lane *ln, uint8_t *base, size_t off, uint32_t *cnt, wcc_desc_offsets *o);

/* Empty the lane's batch. */
void wcc_lane_reset(wcc_lane *ln);

/* Host copies (wcc_copy.c): n bytes with non-temporal stores (the
 * destination is not read back soon); and the XXH3-64 of src taken while
 * copying it, block by block from L1. */
void wcc_stream_copy(uint8_t *d, const uint8_t *s, size_t n);
uint64_t wcc_copy_and_hash(uint8_t *dst, const uint8_t *src, size_t n);

#endif /* WCC_IMPL_H */
