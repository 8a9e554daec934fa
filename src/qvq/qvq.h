/*
 * qvq.h - reading .qvq image archives (docs/FORMAT.md section 6).
 *
 * A .qvq archive holds N RGB images vector-quantized with one codebook of K
 * patches (2x2 pixels x 3 channels, uint8). Each image is a grid of codebook
 * indices; the index arrays of consecutive images are grouped into tiles and
 * each tile is coded with the tile codec (codec/tile_codec.h: layout `bytes`
 * for K <= 256, `shuffle2` for K <= 65536). A tile decodes to the raw RGB
 * bytes (row-major, 3 bytes per pixel, no padding) of its images, one after
 * the other; that is what the tile cache holds.
 *
 * Readers validate every offset, size and name before use (limits in
 * qvq_format.h and docs/FORMAT.md 6.7); a wc_qvq that opened successfully
 * never indexes outside its tables, and none of its names can escape the
 * directory it is shown in.
 */
#ifndef WC_QVQ_H
#define WC_QVQ_H

#include <stddef.h>
#include <stdint.h>

#include "core/wc_error.h"
#include "engine/backend.h"
#include "engine/tile_source.h"
#include "qvq/qvq_format.h"
#include "qvq/qvq_job.h"

typedef struct wc_qvq wc_qvq;

/* One image of an archive, in archive order (sorted by name). */
typedef struct wc_qvq_image {
	const char *name;    /* relative path as packed, validated (qvq_names.h) */
	uint32_t width;      /* true pixels, before any padding */
	uint32_t height;
	uint32_t label;      /* index into the label list, or WC_QVQ_NO_LABEL */
	uint32_t tile;       /* the tile holding it */
	uint32_t tile_off;   /* offset of its RGB bytes in the decoded tile */
} wc_qvq_image;

typedef struct wc_qvq_tile {
	uint64_t coff;        /* payload offset in the file */
	uint32_t csize;       /* payload bytes */
	uint32_t dsize;       /* decoded bytes: sum of width*height*3 of its images */
	uint32_t first_image; /* images [first_image, first_image + nimages) */
	uint32_t nimages;
	uint32_t nindices;    /* codebook indices in the payload */
	uint64_t chash, dhash;/* XXH3-64 of payload, of decoded bytes */
	uint64_t voff;        /* offset of its first byte in the concatenation of all tiles */
} wc_qvq_tile;

/* Open and validate an archive: header and its hash, every section's bounds
 * and hash, JSON metadata, codebook, frequency tables, image and tile tables,
 * names. Payloads are checked when read. Reference-counted (starts at 1),
 * safe to share between threads.
 * Errors: WC_E_IO, WC_E_FORMAT (with the reason via wc_last_detail()),
 * WC_E_CORRUPT (a section hash), WC_E_UNSUPPORTED (version, patch shape),
 * WC_E_RANGE (a value beyond a reader limit), WC_E_NOMEM. */
wc_err wc_qvq_open(const char *path, wc_qvq **out);
void wc_qvq_retain(wc_qvq *q);
void wc_qvq_release(wc_qvq *q);

/* The archive as a tile source for the cache (engine/tile_source.h); jobs
 * are WC_JOB_VQ (codebook mode) or WC_JOB_TX (transform mode). Its
 * retain/release are wc_qvq_retain/release. */
wc_tile_source *wc_qvq_source(wc_qvq *q);
uint64_t wc_qvq_id(const wc_qvq *q);

const wc_qvq_header *wc_qvq_header_of(const wc_qvq *q);
/* Codebook: entries * patch_h * patch_w * channels bytes. */
const uint8_t *wc_qvq_codebook(const wc_qvq *q, uint32_t *entries);
/* The JSON metadata text (NUL-terminated), as stored. */
const char *wc_qvq_metadata(const wc_qvq *q);

uint32_t wc_qvq_nimages(const wc_qvq *q);
const wc_qvq_image *wc_qvq_image_at(const wc_qvq *q, uint32_t i);
uint32_t wc_qvq_ntiles(const wc_qvq *q);
const wc_qvq_tile *wc_qvq_tile_at(const wc_qvq *q, uint32_t t);
/* Label names (JSON "labels"), nlabels entries; NULL/0 without labels. */
const char *const *wc_qvq_labels(const wc_qvq *q, uint32_t *nlabels);

/* Read tile t's payload (csize bytes) into buf and check its hash.
 * Errors: WC_E_IO, WC_E_CORRUPT, WC_E_RANGE (t out of range). */
wc_err wc_qvq_read_payload(const wc_qvq *q, uint32_t t, uint8_t *buf);

/* Fill a WC_JOB_VQ or WC_JOB_TX job for tile t (everything but payload, payload_size,
 * out, out_size, status). */
void wc_qvq_describe_job(const wc_qvq *q, uint32_t t, wc_tile_job *job);

/* Read and decode tile t on the calling thread into out (dsize bytes),
 * checking both hashes. Errors as read_payload and wc_qvq_decode_job
 * (wc_qvq_tx_decode_job in transform mode). */
wc_err wc_qvq_decode_tile(const wc_qvq *q, uint32_t t, uint8_t *out);

/* ---- decoding (qvq_decode.c) -------------------------------------------- */

/* The reference CPU decode of a WC_JOB_VQ job: tile-codec decode of the
 * index array (job->layout, tables, chunk_symbols), codebook gather of each
 * image (wc_qvq_gather), XXH3-64 of the output against job->dhash. Sets and
 * returns job->status. Errors: WC_E_CORRUPT (payload, an index >= entries,
 * hash), WC_E_FORMAT (inconsistent job geometry), WC_E_NOMEM. */
wc_err wc_qvq_decode_job(wc_tile_job *job);

/* The CPU decode of a WC_JOB_TX job (docs/FORMAT.md 6.8): each image's
 * rANS stream, escapes and pixels (qvq_tx_tile_decode), XXH3-64 of the
 * output against job->dhash. Sets and returns job->status. Errors:
 * WC_E_CORRUPT (payload, hash), WC_E_FORMAT (inconsistent job), WC_E_NOMEM. */
wc_err wc_qvq_tx_decode_job(wc_tile_job *job);

/* Codebook gather of one image: idx holds ceil(h/ph) * ceil(w/pw) indices
 * (index_bytes 1 or 2, little-endian), row-major over the patch grid; out
 * receives w * h * channels bytes: pixel (y, x) channel c =
 * codebook[idx[(y/ph) * gw + x/pw]][((y%ph) * pw + x%pw) * channels + c].
 * Rows and columns of the padded grid beyond h, w are not written.
 * Errors: WC_E_CORRUPT if an index >= entries. The CUDA kernel
 * (cuda/vq_gather.cu) computes exactly this. */
wc_err wc_qvq_gather(const uint8_t *codebook, uint32_t entries, uint32_t ph, uint32_t pw,
		     uint32_t channels, const uint8_t *idx, uint32_t index_bytes,
		     uint32_t w, uint32_t h, uint8_t *out);


#endif /* WC_QVQ_H */
