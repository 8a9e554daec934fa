/*
 * qvq_dct.h - the pixel pipeline of the archive's transform mode: RGB to
 * YCbCr 4:2:0, 8x8 DCT blocks quantised with one step per component, and
 * back. The decoder side is exact integer arithmetic (int32 products and
 * sums, floor shifts), so that every decoder (this CPU code, a GPU kernel)
 * gives the same bytes; the encoder side uses doubles (its output is the
 * file's, not checked against another encoder).
 *
 * Sources: the DCT-II of size 8, orthonormal (N. Ahmed, T. Natarajan,
 * K. R. Rao, "Discrete Cosine Transform", IEEE Trans. Computers, 1974),
 * separable over rows and columns; YCbCr as JFIF 1.02 (ITU-T T.871:
 * full-range BT.601); chroma averaged over 2x2 pixels and brought back by a
 * triangle (bilinear, 3:1) filter. The design and its rate against JPEG:
 * docs/BENCHMARKS.md, "A transform mode against JPEG (study)".
 *
 * Geometry of a w x h image: macroblocks of 16 x 16 pixels, mw =
 * ceil(w / 16) by mh = ceil(h / 16); luma in (2 mw) x (2 mh) blocks of 8 x 8,
 * each chroma component in mw x mh blocks; blocks row-major, luma first,
 * then Cb, then Cr. Pixels past the image (to the macroblocks' edge) repeat
 * its last column and row. A block's 64 coefficients are in natural order
 * (row-major: vertical frequency, then horizontal).
 */
#ifndef WC_QVQ_DCT_H
#define WC_QVQ_DCT_H

#include <stddef.h>
#include <stdint.h>

#include "core/wc_error.h"

/* Quantisation steps are in eighths of a unit of the orthonormal DCT's
 * coefficients: 1..2047 (0.125 to 255.875). */
#define QVQ_DCT_STEP_MAX 2047u
/* The largest side of an image, pixels (the archive's limit). */
#define QVQ_DCT_SIDE_MAX 16384u

/* The exact decoder's constants: the DCT basis at 12 fractional bits,
 * QVQ_DCT_BASIS[k][n] = round(4096 * a(k) * cos((2 n + 1) k pi / 16)),
 * a(0) = sqrt(1/8), a(k) = sqrt(2/8); the same table every decoder uses. */
extern const int16_t QVQ_DCT_BASIS[8][8];

typedef struct qvq_dct_geom {
	uint32_t mw, mh;       /* macroblocks */
	size_t luma_blocks;    /* (2 mw) * (2 mh) */
	size_t chroma_blocks;  /* mw * mh, for each of Cb and Cr */
	size_t blocks;         /* luma_blocks + 2 * chroma_blocks */
} qvq_dct_geom;

/* The geometry of a w x h image (w, h >= 1). */
void qvq_dct_geometry(uint32_t w, uint32_t h, qvq_dct_geom *g);

/* Bytes of scratch qvq_dct_encode and qvq_dct_decode need for a w x h image. */
size_t qvq_dct_scratch_bytes(uint32_t w, uint32_t h);

/* Quantised coefficients of an image: rgb is w * h * 3 bytes (row-major,
 * no padding); coef gets geometry's blocks * 64 values, each the
 * coefficient divided by its component's step (step_luma, step_chroma in
 * eighths) and rounded to the nearest (ties away from zero), clamped to
 * +-32767. scratch: qvq_dct_scratch_bytes. Errors: WC_E_INVAL (a size or
 * step out of range). */
wc_err qvq_dct_encode(const uint8_t *rgb, uint32_t w, uint32_t h, uint32_t step_luma, uint32_t step_chroma,
		      int16_t *coef, void *scratch);

/* The image coded by coef (as qvq_dct_encode gives them) into rgb (w * h *
 * 3 bytes), exactly:
 *   1. dequantise: X8 = q * step, clamped to -32768..32767 (X8: the
 *      coefficient times 8; a true coefficient is within +-1024);
 *   2. each block, rows then columns: t[r][n] = fs(sum_k B[k][n] * X8[r][k]
 *      + 2^11, 12); s[m][n] = fs(sum_k B[k][m] * t[k][n] + 2^14, 15) + 128,
 *      clamped to 0..255 (B: QVQ_DCT_BASIS; fs(x, b): x / 2^b rounded down);
 *   3. chroma planes brought to luma size: vertically v = 3 c[i] + c[i - 1]
 *      for the upper row of each pair and 3 c[i] + c[i + 1] for the lower
 *      (indices clamped to the plane), then horizontally the same on v,
 *      giving u; sample = fs(u + 8, 4);
 *   4. with b = Cb - 128, r = Cr - 128: R = Y + fs(91881 r + 2^15, 16),
 *      G = Y + fs(-22554 b - 46802 r + 2^15, 16), B = Y + fs(116130 b +
 *      2^15, 16), each clamped to 0..255 (JFIF's 1.402, 0.344136, 0.714136,
 *      1.772 at 16 fractional bits); only the image's own w x h pixels are
 *      written.
 * scratch: qvq_dct_scratch_bytes. Errors: WC_E_INVAL (a size or step out of
 * range). */
wc_err qvq_dct_decode(const int16_t *coef, uint32_t w, uint32_t h, uint32_t step_luma, uint32_t step_chroma,
		      uint8_t *rgb, void *scratch);

#endif /* WC_QVQ_DCT_H */
