/* qvq_job.h - the decode job kind of .qvq image tiles (docs/FORMAT.md 6.5):
 * its number and the data its jobs carry in wc_tile_job.kind_data. Shared
 * by the format (qvq_reader.c fills it, qvq_decode.c is the CPU decoder it
 * registers) and the CUDA plugin's kernels of this format (cuda/vq_*). */
#ifndef WC_QVQ_JOB_H
#define WC_QVQ_JOB_H

#include <stdint.h>

#include "engine/backend.h"

#define WC_JOB_VQ 1u /* registered by wc_qvq_open (wc_job_kind_register) */
/* A tile of a transform-mode archive (docs/FORMAT.md 6.8); registered by
 * wc_qvq_open. Its own kind, so that a backend's VQ path never takes it. */
#define WC_JOB_TX 4u

/* A tile of images: its payload is a tile-codec payload (layout, tables,
 * chunk_symbols as for WC_JOB_PLANES) of codebook indices; the output is
 * the raw RGB bytes of its images, each gathered from the codebook
 * (wc_qvq_gather). Stable while the archive lives. */
typedef struct wc_qvq_job {
	const uint8_t *codebook; /* entries patches of patch_h*patch_w*channels bytes */
	uint32_t entries;        /* codebook entries K, 1..65536 */
	uint8_t patch_h, patch_w, channels;
	uint8_t index_bytes;     /* 1 (layout bytes) or 2 (layout shuffle2, little-endian) */
	uint32_t nimages;        /* images in the tile */
	const uint32_t *dims;    /* 2*nimages: width, height of each image, in tile order */
	uint32_t nindices;       /* indices in the payload: sum of the images' patch grids */
	uint64_t codebook_key;   /* identifies codebook (the archive id) for device caching */
	/* WC_JOB_TX jobs (codebook NULL, entries 0, index_bytes 0): the
	 * archive's 8 decoding tables, one a plane, and the steps (eighths). */
	const struct wc_rans_dtab *const *dtabs;
	uint16_t step_luma, step_chroma;
} wc_qvq_job;

/* Where one image of a WC_JOB_VQ job goes when a GPU writes images straight
 * into device memory (the CUDA plugin's wcodec_cuda_vq_place): the job,
 * the image's place among the job's images, the device address of its
 * width * height * channels pixels, their layout and type. */
typedef struct wc_qvq_image_dst {
	uint32_t job;     /* index into the jobs of the call */
	uint32_t image;   /* 0 .. nimages - 1 of that job */
	void *device_dst; /* device memory */
	uint32_t chw;     /* 1: channel planes (CHW); 0: rows of pixels (HWC) */
	/* 0: the bytes; 1: float32 pixels, value * scale[c] + bias[c], each
	 * operation rounded on its own (no fused multiply-add) */
	uint32_t f32;
	float scale[3], bias[3];
} wc_qvq_image_dst;

/* Patches of an image of w x h pixels: ceil(w/pw) * ceil(h/ph). */
static inline uint64_t wc_qvq_patches(uint32_t w, uint32_t h, uint32_t pw, uint32_t ph)
{
	return (uint64_t)((w + pw - 1) / pw) * ((h + ph - 1) / ph);
}

/* The job data of a WC_JOB_VQ job, NULL for any other kind. */
static inline const wc_qvq_job *wc_qvq_job_of(const wc_tile_job *job)
{
	return job->kind == WC_JOB_VQ ? (const wc_qvq_job *)job->kind_data : NULL;
}

/* The job data of a WC_JOB_TX job, NULL for any other kind. */
static inline const wc_qvq_job *wc_qvq_tx_job_of(const wc_tile_job *job)
{
	return job->kind == WC_JOB_TX ? (const wc_qvq_job *)job->kind_data : NULL;
}

#endif /* WC_QVQ_JOB_H */
