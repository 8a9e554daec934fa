/*
 * vq_gather.h - GPU decode of .qvq image tiles (WC_JOB_VQ, src/qvq/qvq_job.h):
 * the codebook gather kernel (vq_gather.cu) and the backend path that feeds
 * it. Plain C so the plugin's host code stays C11.
 *
 * Files: the kernel in vq_gather.cu, the backend path in vq_decode.cu.
 * A VQ job is decoded in two steps on the device:
 *   1. its payload, a tile-codec payload of codebook indices, is decoded by
 *      the plugin's plane pipeline (wcc_decode with device outputs: the
 *      rANS stream checks run on the GPU);
 *   2. wcc_vq_launch_gather() turns each image's indices into RGB bytes,
 *      exactly as wc_qvq_gather() does on the CPU (src/qvq/qvq.h).
 * The RGB bytes are copied to the job's host buffer and checked against its
 * dhash; a job failing anything is decoded again by the CPU reference
 * (wc_decode_job_cpu), which decides. Codebooks stay on the device per
 * archive (keyed by the job's codebook_key).
 */
#ifndef WCC_VQ_GATHER_H
#define WCC_VQ_GATHER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" { /* the project's C headers, C linkage from nvcc's C++ too */
#endif

#include "core/wc_error.h"
#include "engine/backend.h"

/* One image to gather; every pointer is a device address. */
typedef struct wcc_vq_image {
	const uint8_t *idx;      /* ceil(h/ph)*ceil(w/pw) indices of index_bytes each (LE) */
	uint8_t *out;            /* w * h * 3 pixels: bytes, or floats (f32) */
	const uint8_t *codebook; /* entries * ph * pw * 3 bytes */
	uint32_t entries;
	uint32_t w, h;
	uint8_t ph, pw, index_bytes;
	uint8_t chw;             /* 1: out is three planes of w * h pixels; 0: RGB rows */
	uint32_t job;            /* index into the status array */
	uint32_t f32;            /* 1: out holds floats, value * scale[c] + bias[c] */
	float scale[3], bias[3];
} wcc_vq_image;

/* Gather nimg images (descriptors in device memory). max_patches: the
 * largest patch grid of them. An index >= entries sets status[job] to 1
 * (that patch's pixels are then left unwritten). `stream` is a
 * cudaStream_t. Returns 0 or a cudaError_t value. */
int wcc_vq_launch_gather(const wcc_vq_image *imgs, uint32_t nimg, uint32_t max_patches,
			 uint32_t *status, void *stream);
/* Load the gather kernel's code on the current device now (see
 * wcc_preload_kernels). Returns 0 or a cudaError_t value. */
int wcc_vq_preload_kernels(void);

/* ---- the backend path ------------------------------------------------------ */

struct wcc_ctx;
typedef struct wcc_vq wcc_vq;

/* State of the VQ path for one wcc_ctx (same GPU): device codebooks, staging
 * buffers. Errors: WC_E_BACKEND, WC_E_NOMEM. */
wc_err wcc_vq_create(struct wcc_ctx *ctx, int gpu, wcc_vq **out);
void wcc_vq_destroy(wcc_vq *vq);

/* Whether any of jobs[0..n) is a WC_JOB_VQ job. */
int wcc_vq_any(const wc_tile_job *jobs, size_t n);

/* Decode the WC_JOB_VQ jobs[0..n) (host payloads, their chash checked by
 * the caller) and write the images dsts[0..ndst) name straight into device
 * memory (wcodec_cuda_vq_place, cuda/wcodec_cuda.h). Sets every job's
 * status: WC_E_CORRUPT where its index stream failed its checks or an
 * index is past the codebook. `stream`: the caller's cudaStream_t or NULL;
 * the work is ordered after what it holds, and the call returns once the
 * images are written. Returns WC_OK, WC_E_BACKEND or WC_E_NOMEM. */
struct wc_qvq_image_dst;
wc_err wcc_vq_place(wcc_vq *vq, wc_tile_job *jobs, size_t n, const struct wc_qvq_image_dst *dsts, size_t ndst,
		    void *stream);

/* Decode every WC_JOB_VQ job of jobs[0..n) (host payloads and outputs) and
 * set its status; other jobs are not touched. Returns WC_OK if every job was
 * attempted, WC_E_BACKEND if the device failed as a whole. */
wc_err wcc_vq_decode(wcc_vq *vq, wc_tile_job *jobs, size_t n);

/* The plugin's decode: WC_JOB_VQ jobs as above, every other job through
 * wcc_decode() (host outputs). Same contract as wc_backend_ops.decode. */
wc_err wcc_vq_decode_mixed(wcc_vq *vq, wc_tile_job *jobs, size_t n);

#ifdef __cplusplus
}
#endif

#endif /* WCC_VQ_GATHER_H */
