/*
 * tx_decode.h - GPU decode of transform-mode .qvq tiles (WC_JOB_TX,
 * docs/FORMAT.md 6.8) straight into device memory: the kernels
 * (tx_kernels.cu) and the host path that feeds them (tx_place.c). Plain C
 * so the plugin's host code stays C11.
 *
 * An image is decoded in five launches over every image of a call:
 *   1. rANS: one warp a chunk of its symbol stream, a plane's rounds at a
 *      time with that plane's table (the stream checks of FORMAT.md 4);
 *   2. escapes: each escape's place holds an escape symbol;
 *   3. DC: one thread block an (image, component), a prefix sum of the DC
 *      differences (the range check of 6.8);
 *   4. inverse DCT: 256 threads for 32 blocks, a row then a column each,
 *      the exact integer arithmetic of 6.8 step 2, into the image's Y, Cb,
 *      Cr planes;
 *   5. colour: a thread 8 pixels of a row, chroma filter and JFIF colour
 *      (steps 3-4) into the destination, HWC or CHW, bytes or normalised
 *      floats.
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

/* Parse image i of job j (a WC_JOB_TX job, host payload) into *im (its
 * geometry, planes, escapes, steps; sym, dc, planes, out and the layout
 * fields are the caller's) and its chunks into ch from *nch (advanced), as
 * the CPU decoder checks them: every image end of the tile, the escapes'
 * places (ascending, inside their planes), each rANS chunk's size. Device
 * addresses are d_base + (host address - h_base): the payload's place in a
 * device copy of the host region from h_base. img: the chunks' image
 * index. Returns 0, or -1 with the job failed (WC_E_CORRUPT and a
 * reason) and *nch as it was. */
int wcc_tx_parse_image(wc_tile_job *j, uint32_t i, wcc_tx_image *im, wcc_tx_chunk *ch, uint32_t *nch,
		       const uint8_t *h_base, const uint8_t *d_base, uint32_t img);

/* Where a resident archive's batch goes (tx_resident.c): per batch place
 * k, scratch from scratch + k * (sym_bytes + dc_bytes + plane_bytes), the
 * pixels at out + k * out_stride. */
typedef struct wcc_tx_batch {
	uint8_t *scratch;
	size_t sym_bytes, dc_bytes, plane_bytes;
	uint8_t *out;
	size_t out_stride;
	uint32_t chw, f32;
	float scale[3], bias[3];
} wcc_tx_batch;

/* The descriptors of a batch of a resident archive, on the device: place k
 * is image idx[k] of all[0..nall) (an index outside sets status[k] to 2 and
 * decodes image 0 there), its `per` chunks (chunks[i * per ..]) put chunk
 * index first (bchunks[c * n + k]), status[k] zeroed otherwise. Returns 0
 * or a cudaError_t value. */
int wcc_tx_launch_prepare(const wcc_tx_image *all, uint32_t nall, const wcc_tx_chunk *chunks, uint32_t per,
			  const int64_t *idx, uint32_t n, const wcc_tx_batch *b, wcc_tx_image *batch, wcc_tx_chunk *bchunks,
			  uint32_t *status, void *stream);

typedef struct wcc_tx_resident wcc_tx_resident;

/* An archive resident in GPU gpu's memory: every payload of its tiles
 * jobs[0..n) (WC_JOB_TX jobs of one archive, host payloads checked against
 * their chash, images of one size) copied once, every image parsed once
 * into device descriptors. Errors: WC_E_UNSUPPORTED (images of several
 * sizes), WC_E_RANGE (payloads past max_bytes), WC_E_CORRUPT (an image's
 * part fails its checks, with the reason), WC_E_BACKEND, WC_E_NOMEM. */
wc_err wcc_tx_resident_create(int gpu, wc_tile_job *jobs, size_t n, uint64_t max_bytes, wcc_tx_resident **out);
void wcc_tx_resident_free(wcc_tx_resident *r);

/* Images idx[0..n) (int64, device memory) of a resident archive decoded
 * into out (device memory; place k at out + k * out_stride bytes; chw
 * planes or HWC rows; f32: floats value * scale[c] + bias[c]) by kernel
 * launches alone, ordered after `stream`'s work and before its later work;
 * *ticket names the batch for wcc_tx_resident_wait, which must come before
 * the pixels are used (its statuses say whether they may be). Two batches
 * may be in flight. Errors: WC_E_INVAL (n 0, or two batches in flight),
 * WC_E_BACKEND, WC_E_NOMEM. */
wc_err wcc_tx_resident_launch(wcc_tx_resident *r, const int64_t *idx, size_t n, int chw, int f32,
			      const float scale[3], const float bias[3], void *out, size_t out_stride, void *stream,
			      uint64_t *ticket);
/* Wait for batch `ticket` (one synchronisation) and read its statuses.
 * Errors: WC_E_RANGE (an index past the archive), WC_E_CORRUPT (a stream
 * failed its checks: the batch's pixels are not to be used), WC_E_INVAL (no
 * such batch in flight), WC_E_BACKEND. */
wc_err wcc_tx_resident_wait(wcc_tx_resident *r, uint64_t ticket);

/* Whether any of jobs[0..n) is a WC_JOB_TX job (the plugin's dispatch,
 * which sees no format's header). */
int wcc_tx_any(const wc_tile_job *jobs, size_t n);

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
