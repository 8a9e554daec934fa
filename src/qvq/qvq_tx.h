/*
 * qvq_tx.h - the transform mode's coefficient streams: an image's quantised
 * DCT coefficients (qvq_dct.h) as byte symbols in QVQ_TX_PLANES planes, one
 * per band of zigzag positions and component class, each coded with one
 * frequency table for the whole archive, plus the escaped values with
 * their places. A symbol's plane and place follow from the image's size
 * alone, so a GPU decoder maps every symbol to its coefficient without a
 * scan. The archive's transform mode (docs/FORMAT.md 6.8) carries an
 * image's planes back to back in one rANS stream whose table changes with
 * the plane (qvq_tx_tile.h). Its rate against JPEG: docs/BENCHMARKS.md,
 * "Image archives" (0.907 of JPEG q=90's bits at its PSNR, 0.966 of
 * q=75's, on held-out photographs).
 *
 * Order: images in turn; in an image, luma blocks then Cb then Cr (each
 * row-major, qvq_dct.h), and for each block the positions of the plane's
 * band in zigzag order. Plane b (b < QVQ_TX_BANDS) holds luma band b, plane
 * QVQ_TX_BANDS + b chroma band b; band b is zigzag indices
 * [QVQ_TX_BAND_START[b], QVQ_TX_BAND_START[b + 1]).
 *
 * Values: a block's DC is coded as its difference to the previous block's
 * DC of the same component in the image (0 before the first). A value v
 * with |v| <= QVQ_TX_DIRECT is the symbol 0 (v = 0) or 2|v| - (v < 0); any
 * other is QVQ_TX_ESCAPE, its value kept apart with its place (the index of
 * the symbol among its plane's symbols of the tile), so that a decoder
 * finds it by a search instead of counting the escapes before it. Symbols
 * 253 and 254 are never written.
 */
#ifndef WC_QVQ_TX_H
#define WC_QVQ_TX_H

#include <stddef.h>
#include <stdint.h>

#include "core/wc_error.h"

#define QVQ_TX_BANDS 4u
#define QVQ_TX_PLANES (2u * QVQ_TX_BANDS)
#define QVQ_TX_DIRECT 126
#define QVQ_TX_ESCAPE 255u

/* QVQ_TX_ZIGZAG[i]: the natural position (row * 8 + column) of zigzag index i. */
extern const uint8_t QVQ_TX_ZIGZAG[64];
/* First zigzag index of each band, and 64. */
extern const uint8_t QVQ_TX_BAND_START[QVQ_TX_BANDS + 1];

/* Symbols each plane holds for a w x h image (w, h >= 1). */
void qvq_tx_plane_counts(uint32_t w, uint32_t h, size_t counts[QVQ_TX_PLANES]);

/* The escaped values of a tile: for each plane, n[p] places (indices among
 * the plane's symbols of the tile, strictly increasing) and their values. */
typedef struct qvq_tx_escapes {
	uint32_t *pos[QVQ_TX_PLANES];
	int16_t *val[QVQ_TX_PLANES];
	size_t n[QVQ_TX_PLANES];
} qvq_tx_escapes;

/* Append a w x h image's coefficients (qvq_dct_encode's: qvq_dct_geometry's
 * blocks * 64, natural order) to the planes, plane p from plane[p] +
 * pos[p] (pos advanced: the tile's symbols so far), and its escaped values
 * to esc (its arrays hold room for every symbol of the tile). */
void qvq_tx_to_symbols(const int16_t *coef, uint32_t w, uint32_t h, uint8_t *const plane[QVQ_TX_PLANES],
		       size_t pos[QVQ_TX_PLANES], qvq_tx_escapes *esc);

/* The inverse: a w x h image's coefficients from plane[p] + pos[p], the
 * escapes from esc at cursor[p] (pos and cursor advanced). The caller
 * checked that each plane holds the image's counts, and checks at the end
 * of the tile that every escape was used (cursor[p] == esc->n[p]). Errors:
 * WC_E_CORRUPT (symbol 253 or 254, an escape symbol without its value, a
 * DC past +-32767), with the plane and block. */
wc_err qvq_tx_from_symbols(const uint8_t *const plane[QVQ_TX_PLANES], size_t pos[QVQ_TX_PLANES],
			   const qvq_tx_escapes *esc, size_t cursor[QVQ_TX_PLANES], uint32_t w, uint32_t h,
			   int16_t *coef);

#endif /* WC_QVQ_TX_H */
