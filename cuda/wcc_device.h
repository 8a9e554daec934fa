/*
 * wcc_device.h - one GPU's decode context: CUDA streams, pinned host staging
 * buffers, device buffers allocated once within a byte budget, the cache of
 * frequency tables on the device, and the batch pipeline that turns
 * wc_tile_job arrays into kernel launches (wcc_kernels.h).
 *
 * The pipeline: a context owns `nlanes` lanes; a lane is one CUDA stream
 * with its own pinned input/output buffers and device buffers. A decode call
 * packs as many jobs as fit into a lane (payloads plus chunk/tile
 * descriptors in one pinned buffer), enqueues copy-in, the two kernel
 * launches and copy-out on the lane's stream, and goes on filling the next
 * lane while the GPU works; it completes its lanes oldest first (copy the
 * tiles out, check each tile's XXH3-64 against job->dhash). Several threads
 * may decode at once; they share the lanes.
 *
 * Trust: a job is WC_OK only when its bytes passed a check: for host
 * outputs the dhash (always); for device outputs (wcc_decode with dev_out)
 * the payload's chash (checked by whoever read the payload) plus the
 * device-side stream checks of every rANS chunk. Any job the device reports
 * as corrupt, or whose hash does not match, is decoded again with the CPU
 * reference (wc_decode_job_cpu), which then decides: a GPU fault never
 * becomes wrong bytes.
 */
#ifndef WCC_DEVICE_H
#define WCC_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "core/wc_error.h"
#include "engine/backend.h"

typedef struct wcc_ctx wcc_ctx;

typedef struct wcc_ctx_opts {
	int gpu;                /* CUDA device ordinal */
	uint64_t memory_limit;  /* device bytes for buffers and tables; 0 = default (320 MiB) */
	unsigned lanes;         /* streams with their buffers; 0 = 3 */
	unsigned host_threads;  /* copy/hash threads besides the caller; 0 = default (3) */
	/* Decode into device memory only (wcc_decode with dev_out): the lanes
	 * get no output buffers on the host or the device, so a loader's
	 * context holds half the page-locked memory; wcc_decode with dev_out
	 * NULL then fails with WC_E_INVAL. */
	int device_only;
	int fault_every_batch;
} wcc_ctx_opts;

/* Open the device and allocate every buffer. With fault_every_batch (tests
 * only, wc_backend_opts.gpu_fault_every_batch) every batch the context
 * submits makes the GPU fault (an illegal address). Errors: WC_E_BACKEND with a
 * reason (no driver, no device, allocation failed), WC_E_NOMEM. */
wc_err wcc_ctx_create(const wcc_ctx_opts *opts, wcc_ctx **out);
void wcc_ctx_destroy(wcc_ctx *ctx);

/* Process-wide contexts, one per GPU and use: the context of GPU o->gpu in
 * slots[] (WCC_MAX_GPUS entries, NULL until then), created with *o on
 * first use and kept for the life of the process. Errors: WC_E_BACKEND (an
 * ordinal out of range), those of wcc_ctx_create. */
#define WCC_MAX_GPUS 64
wc_err wcc_ctx_once(wcc_ctx **slots, const wcc_ctx_opts *o, wcc_ctx **out);

/* Decoded bytes one lane holds: jobs larger than this are decoded on the CPU. */
size_t wcc_ctx_lane_bytes(const wcc_ctx *ctx);

/* Page-locked host bytes and device bytes the context holds. */
size_t wcc_ctx_pinned_bytes(const wcc_ctx *ctx);
size_t wcc_ctx_device_bytes(const wcc_ctx *ctx);

/* Decode jobs[0..n). dev_out NULL: outputs are job->out (host memory) and
 * every job's dhash is checked. dev_out non-NULL: job i's decoded bytes go
 * to device address dev_out[i] (job->out is ignored) on this context's GPU,
 * no host copy; jobs the GPU cannot decode go through the CPU and are
 * copied up. Sets every job's status (WC_OK, WC_E_CORRUPT, ...).
 * Returns WC_OK if every job was attempted, WC_E_BACKEND if a CUDA call
 * failed (then no output of this call may be trusted; after a fault that
 * poisons the CUDA context, every later call also returns WC_E_BACKEND). */
wc_err wcc_decode(wcc_ctx *ctx, wc_tile_job *jobs, size_t n, uint8_t *const *dev_out);

/* Benchmarks: with timing on, every lane records CUDA events around its two
 * kernel launches and wcc_ctx_kernel_ms() returns the sum of those kernel
 * times (milliseconds) over lanes completed since timing was switched on. */
void wcc_ctx_set_timing(wcc_ctx *ctx, int on);
double wcc_ctx_kernel_ms(wcc_ctx *ctx);

#endif /* WCC_DEVICE_H */
