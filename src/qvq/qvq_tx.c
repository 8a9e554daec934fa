/*
 * qvq_tx.c - the transform mode's coefficient streams (qvq_tx.h).
 */
#include "qvq_tx.h"

#include "qvq_dct.h"

/* JPEG's zigzag scan of an 8x8 block (ITU-T T.81, figure A.6). */
const uint8_t QVQ_TX_ZIGZAG[64] = {
	0,  1,  8,  16, 9,  2,  3,  10, 17, 24, 32, 25, 18, 11, 4,  5,  12, 19, 26, 33, 40, 48,
	41, 34, 27, 20, 13, 6,  7,  14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23,
	30, 37, 44, 51, 58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
};

/* DC; the 5 lowest AC; the next 15; the 43 highest (the study's choice of
 * 4 bands, docs/BENCHMARKS.md) */
const uint8_t QVQ_TX_BAND_START[QVQ_TX_BANDS + 1] = { 0, 1, 6, 21, 64 };

void qvq_tx_plane_counts(uint32_t w, uint32_t h, size_t counts[QVQ_TX_PLANES])
{
	qvq_dct_geom g;
	qvq_dct_geometry(w, h, &g);
	for (unsigned b = 0; b < QVQ_TX_BANDS; b++) {
		const size_t n = (size_t)(QVQ_TX_BAND_START[b + 1] - QVQ_TX_BAND_START[b]);
		counts[b] = g.luma_blocks * n;
		counts[QVQ_TX_BANDS + b] = 2 * g.chroma_blocks * n;
	}
}

/* The component runs of an image: (first block, blocks, plane class). */
static void components(const qvq_dct_geom *g, size_t first[3], size_t count[3])
{
	first[0] = 0, count[0] = g->luma_blocks;
	first[1] = g->luma_blocks, count[1] = g->chroma_blocks;
	first[2] = g->luma_blocks + g->chroma_blocks, count[2] = g->chroma_blocks;
}

void qvq_tx_to_symbols(const int16_t *coef, uint32_t w, uint32_t h, uint8_t *const plane[QVQ_TX_PLANES],
		       size_t pos[QVQ_TX_PLANES], qvq_tx_escapes *esc)
{
	qvq_dct_geom g;
	qvq_dct_geometry(w, h, &g);
	size_t first[3], count[3];
	components(&g, first, count);
	for (unsigned c = 0; c < 3; c++) {
		const unsigned base = c ? QVQ_TX_BANDS : 0;
		int32_t prev = 0;
		for (size_t k = first[c]; k < first[c] + count[c]; k++) {
			const int16_t *blk = coef + 64 * k;
			for (unsigned b = 0; b < QVQ_TX_BANDS; b++) {
				uint8_t *out = plane[base + b];
				for (unsigned z = QVQ_TX_BAND_START[b]; z < QVQ_TX_BAND_START[b + 1]; z++) {
					int32_t v = blk[QVQ_TX_ZIGZAG[z]];
					if (z == 0) {
						const int32_t dc = v;
						v -= prev;
						prev = dc;
					}
					const int32_t a = v < 0 ? -v : v;
					const unsigned p = base + b;
					if (a <= QVQ_TX_DIRECT) {
						out[pos[p]++] = (uint8_t)(v ? 2 * a - (v < 0) : 0);
					} else { /* a DC difference fits 16 bits: coefficients are within +-8192 */
						esc->pos[p][esc->n[p]] = (uint32_t)pos[p];
						esc->val[p][esc->n[p]++] = (int16_t)(v > 32767 ? 32767 : v < -32768 ? -32768 : v);
						out[pos[p]++] = QVQ_TX_ESCAPE;
					}
				}
			}
		}
	}
}

/* The value of symbol i of plane p (block k, for the reason): direct, or
 * an escape's value from esc at cursor[p] (advanced). Errors:
 * WC_E_CORRUPT (symbol 253 or 254, an escape without its value). */
static wc_err symbol_value(const uint8_t *const plane[QVQ_TX_PLANES], size_t i, const qvq_tx_escapes *esc,
			   size_t cursor[QVQ_TX_PLANES], unsigned p, size_t k, int32_t *v)
{
	const uint32_t s = plane[p][i];
	if (s < 253u) {
		*v = (int32_t)(s >> 1) ^ -(int32_t)(s & 1u);
		return WC_OK;
	}
	if (s == QVQ_TX_ESCAPE) {
		const size_t c = cursor[p]++;
		if (c < esc->n[p] && esc->pos[p][c] == i) {
			*v = esc->val[p][c];
			return WC_OK;
		}
		return wc_fail(WC_E_CORRUPT, "transform: plane %u, block %zu: escape symbol %zu without its value", p, k,
			       i);
	}
	return wc_fail(WC_E_CORRUPT, "transform: plane %u, block %zu: symbol %u", p, k, (unsigned)s);
}

wc_err qvq_tx_from_symbols(const uint8_t *const plane[QVQ_TX_PLANES], size_t pos[QVQ_TX_PLANES],
			   const qvq_tx_escapes *esc, size_t cursor[QVQ_TX_PLANES], uint32_t w, uint32_t h,
			   int16_t *coef)
{
	qvq_dct_geom g;
	qvq_dct_geometry(w, h, &g);
	size_t first[3], count[3];
	components(&g, first, count);
	wc_err e;
	for (unsigned c = 0; c < 3; c++) {
		const unsigned base = c ? QVQ_TX_BANDS : 0;
		int32_t prev = 0;
		for (size_t k = first[c]; k < first[c] + count[c]; k++) {
			int16_t *blk = coef + 64 * k;
			int32_t v;
			/* band 0, the DC: a difference to the previous block's */
			if ((e = symbol_value(plane, pos[base]++, esc, cursor, base, k, &v)))
				return e;
			v += prev;
			if (v > 32767 || v < -32767)
				return wc_fail(WC_E_CORRUPT, "transform: plane %u, block %zu: DC %d", base, k, (int)v);
			prev = v;
			blk[0] = (int16_t)v;
			for (unsigned b = 1; b < QVQ_TX_BANDS; b++) {
				const unsigned p = base + b;
				const uint8_t *in = plane[p] + pos[p];
				const unsigned z0 = QVQ_TX_BAND_START[b], z1 = QVQ_TX_BAND_START[b + 1];
				unsigned z = z0;
				for (; z < z1; z++) { /* 0, 2|v|, 2|v| - 1: branch-free; escapes and bad symbols apart */
					const uint32_t sym = in[z - z0];
					if (sym >= 253u)
						break;
					blk[QVQ_TX_ZIGZAG[z]] = (int16_t)((int32_t)(sym >> 1) ^ -(int32_t)(sym & 1u));
				}
				for (; z < z1; z++) { /* from the first escape or bad symbol on, one at a time */
					if ((e = symbol_value(plane, pos[p] + (z - z0), esc, cursor, p, k, &v)))
						return e;
					blk[QVQ_TX_ZIGZAG[z]] = (int16_t)v;
				}
				pos[p] += z1 - z0;
			}
		}
	}
	return WC_OK;
}
