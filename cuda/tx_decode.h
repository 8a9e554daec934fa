/*
 * tx_decode.h - GPU decode of transform-mode .qvq tiles (WC_JOB_TX,
 * docs/FORMAT.md 6.8) straight into device memory: the kernels
 * (tx_kernels.cu) and the host path that feeds them (tx_place.c). Plain C
 * so the plugin's host code stays C11.
 *
 * An image is decoded in five launches over every image of a call:
 *   1. rANS: one warp a chunk of its symbol stream, the table of each
 *      round that of its plane (the stream checks of FORMAT.md 4);
 *   2. escapes: each escape's place holds an escape symbol;
 *   3. DC: one thread block an (image, component), a prefix sum of the DC
 *      differences (the range check of 6.8);
 *   4. inverse DCT: 64 threads a block, the exact integer arithmetic of
 *      6.8 step 2, into the image's Y, Cb, Cr planes;
 *   5. colour: a thread a pixel, chroma filter and JFIF colour (steps 3-4)
 *      into the destination, HWC or CHW, bytes or normalised floats.
 * The arithmetic is the CPU reference's (src/qvq/qvq_dct.c, qvq_tx.c), so
 * both give the same bytes. Anything a check refuses marks the image's job
 * corrupt; its pixels are then not to be used.
 */
#ifndef WCC_TX_DECODE_H
#define WCC_TX_DECODE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "core/wc_error.h"
#include "engine/backend.h"

#define WCC_TX_PLANES 8u

/* One image to decode; every pointer a device address. */
typedef struct wcc_tx_image {
	const uint32_t *places;   /* nesc escape places (ascending), then */
	const int16_t *values;    /* their values */
	uint32_t nesc;
	uint32_t w, h, mw, mh;    /* pixels; macroblocks */
	uint32_t start[WCC_TX_PLANES], count[WCC_TX_PLANES], end[WCC_TX_PLANES]; /* its stream's planes */
	uint8_t *sym;             /* nsym symbols (scratch) */
	int32_t *dc;              /* a DC a block (scratch) */
	uint8_t *planes;          /* Y (16mw x 16mh), Cb, Cr (8mw x 8mh each) (scratch) */
	uint32_t step_luma, step_chroma;
	uint8_t *out;             /* w * h * 3 pixels: bytes, or floats (f32) */
	uint32_t chw, f32;
	float scale[3], bias[3];
	uint32_t job;             /* index into the status array */
} wcc_tx_image;

/* One rANS chunk of an image's stream. */
typedef struct wcc_tx_chunk {
	const uint8_t *data;      /* 32 states, then words */
	uint32_t nw;              /* word slots (the pad word included) */
	uint32_t first, m;        /* its first symbol in the stream, its symbols */
	uint32_t img;             /* index into the images */
} wcc_tx_chunk;

/* Launch the five steps on `stream` (a cudaStream_t) for nimg images
 * (descriptors in device memory; max_blocks, max_pixels, max_escapes their
 * largest counts) and nchunks chunks; group > 0: the chunks come in groups
 * of `group` whose chunks share their first symbol and length, of images of
 * one size (the rANS step then keeps its tables in shared memory), 0: any
 * chunks; tables: 8 decoding tables of 4096
 * entries (the rANS decoding-table packing of src/codec/rans.h). A failed
 * check sets status[job] to 1. Returns 0 or a cudaError_t value. */
int wcc_tx_launch(const wcc_tx_image *imgs, uint32_t nimg, const wcc_tx_chunk *chunks, uint32_t nchunks, uint32_t group,
		  const uint32_t *tables, uint32_t max_blocks, uint32_t max_pixels, uint32_t max_escapes,
		  uint32_t *status, void *stream);

struct wcc_ctx;
typedef struct wcc_tx wcc_tx;

/* State of the transform path for one GPU: device tables per archive,
 * staging. Errors: WC_E_BACKEND, WC_E_NOMEM. */
wc_err wcc_tx_create(int gpu, wcc_tx **out);
void wcc_tx_destroy(wcc_tx *tx);

/* Decode the images dsts[0..ndst) name of the WC_JOB_TX jobs[0..n)
 * (payloads in host memory, one page-locked region, their chash checked by
 * the caller) straight into device memory, as wcodec_cuda_vq_place
 * (cuda/wcodec_cuda.h). Sets every job's status: WC_E_CORRUPT where a
 * check failed. Returns WC_OK, WC_E_INVAL (jobs or destinations that are
 * not this path's), WC_E_BACKEND or WC_E_NOMEM. */
struct wc_qvq_image_dst;
wc_err wcc_tx_place(wcc_tx *tx, wc_tile_job *jobs, size_t n, const struct wc_qvq_image_dst *dsts, size_t ndst,
		    void *stream);

#ifdef __cplusplus
}
#endif

#endif /* WCC_TX_DECODE_H */
