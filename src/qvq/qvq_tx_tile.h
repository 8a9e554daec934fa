/*
 * qvq_tx_tile.h - the payload of a transform-mode tile (docs/FORMAT.md
 * 6.8): each image's symbols (qvq_tx.h's planes back to back, each padded
 * to a round of 32) as one rANS stream whose table changes with the plane
 * (rans.h, wc_rans_segs), and its escaped values with their places. Every
 * image of a tile decodes on its own, so a GPU takes them in parallel.
 */
#ifndef WC_QVQ_TX_TILE_H
#define WC_QVQ_TX_TILE_H

#include <stddef.h>
#include <stdint.h>

#include "codec/rans.h"
#include "core/wc_error.h"
#include "qvq/qvq_tx.h"

/* The writers' rANS chunk (pack-images --chunk): a 224 x 224 image's
 * 75,264 symbols in five chunks. A chunk is a chain of dependent steps for
 * one GPU warp, so its length bounds the GPU decode (H200, batches of 512:
 * rANS 102 us at 16384, 154 us at 32768); each chunk costs 128 bytes of
 * lane states: 0.987 of JPEG q=75's bits at its PSNR, where 32768 gives
 * 0.961 and 8192 1.056 (docs/BENCHMARKS.md, "Image archives: size and
 * quality"). */
#define QVQ_TX_CHUNK_DEFAULT (1u << 14)

/* Where an image's planes lie in its symbol stream: plane p holds count[p]
 * symbols from start[p], then zeros up to end[p] (a multiple of 32, the
 * next plane's start); nsym = end[QVQ_TX_PLANES - 1]. */
typedef struct qvq_tx_layout {
	size_t start[QVQ_TX_PLANES], count[QVQ_TX_PLANES], end[QVQ_TX_PLANES];
	size_t nsym;
} qvq_tx_layout;

/* The layout of a w x h image's symbols (w, h >= 1). */
void qvq_tx_image_layout(uint32_t w, uint32_t h, qvq_tx_layout *L);

/* An image, quantised: its symbol stream (layout's nsym bytes, padding 0)
 * and escapes (qvq_tx_escapes: places index the stream). */
typedef struct qvq_tx_image {
	uint8_t *sym;
	qvq_tx_escapes esc;
} qvq_tx_image;

/* Quantise a w x h RGB image (qvq_dct_encode at the steps) into im, whose
 * buffers this allocates. Errors: WC_E_INVAL (size, step), WC_E_NOMEM. */
wc_err qvq_tx_image_make(const uint8_t *rgb, uint32_t w, uint32_t h, uint32_t step_luma, uint32_t step_chroma,
			 qvq_tx_image *im);
void qvq_tx_image_free(qvq_tx_image *im);

/* Add an image's symbols to per-plane histograms (hist[p][256]). */
void qvq_tx_image_count(const qvq_tx_image *im, uint32_t w, uint32_t h, uint64_t hist[QVQ_TX_PLANES][256]);

/* Upper bound of the payload of images of dims[2 * i], dims[2 * i + 1]. */
size_t qvq_tx_tile_bound(const uint32_t *dims, uint32_t nimages, uint32_t chunk_symbols);

/* The tile payload of nimages quantised images (dims: width, height of
 * each), plane p coded with tabs[p] (every symbol of plane p present in
 * it), rANS chunks of chunk_symbols. out: qvq_tx_tile_bound bytes.
 * Errors: WC_E_INVAL (a symbol absent from its table), WC_E_NOMEM. */
wc_err qvq_tx_tile_encode(const qvq_tx_image *im, const uint32_t *dims, uint32_t nimages,
			  const wc_freqtab tabs[QVQ_TX_PLANES], uint32_t chunk_symbols, uint8_t *out, size_t *len);

/* Decode a tile payload of `size` bytes into the images' RGB bytes (out:
 * sum of w * h * 3 over dims), checking every offset, the rANS streams
 * (section 4's checks), every escape's place and that DC values stay in
 * range. dtabs: the archive's 8 decoding tables. Errors: WC_E_CORRUPT with
 * the image and the reason, WC_E_NOMEM. */
wc_err qvq_tx_tile_decode(const uint8_t *payload, size_t size, const uint32_t *dims, uint32_t nimages,
			  const wc_rans_dtab *const dtabs[QVQ_TX_PLANES], uint32_t chunk_symbols, uint32_t step_luma,
			  uint32_t step_chroma, uint8_t *out);

#endif /* WC_QVQ_TX_TILE_H */
