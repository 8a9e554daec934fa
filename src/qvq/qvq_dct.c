/*
 * qvq_dct.c - the transform mode's pixel pipeline (qvq_dct.h): the encoder
 * in doubles, the decoder in the exact integer arithmetic the header
 * specifies.
 */
#include "qvq_dct.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

/* round(4096 * a(k) * cos((2 n + 1) k pi / 16)) */
const int16_t QVQ_DCT_BASIS[8][8] = {
	{ 1448, 1448, 1448, 1448, 1448, 1448, 1448, 1448 },
	{ 2009, 1703, 1138, 400, -400, -1138, -1703, -2009 },
	{ 1892, 784, -784, -1892, -1892, -784, 784, 1892 },
	{ 1703, -400, -2009, -1138, 1138, 2009, 400, -1703 },
	{ 1448, -1448, -1448, 1448, 1448, -1448, -1448, 1448 },
	{ 1138, -2009, 400, 1703, -1703, -400, 2009, -1138 },
	{ 784, -1892, 1892, -784, -784, 1892, -1892, 784 },
	{ 400, -1138, 1703, -2009, 2009, -1703, 1138, -400 },
};

void qvq_dct_geometry(uint32_t w, uint32_t h, qvq_dct_geom *g)
{
	g->mw = (w + 15u) / 16u;
	g->mh = (h + 15u) / 16u;
	g->luma_blocks = (size_t)4 * g->mw * g->mh;
	g->chroma_blocks = (size_t)g->mw * g->mh;
	g->blocks = g->luma_blocks + 2 * g->chroma_blocks;
}

size_t qvq_dct_scratch_bytes(uint32_t w, uint32_t h)
{
	qvq_dct_geom g;
	qvq_dct_geometry(w, h, &g);
	const size_t px = (size_t)256 * g.mw * g.mh;  /* luma samples */
	const size_t enc = (px + px / 2) * sizeof(double);
	/* planes; two chroma rows vertically filtered (8 mw each), two on the luma grid (16 mw each) */
	const size_t dec = px + px / 2 + (2 * (size_t)8 * g.mw + 2 * (size_t)16 * g.mw) * sizeof(int32_t) + 64;
	return enc > dec ? enc : dec;
}

static int valid(uint32_t w, uint32_t h, uint32_t sl, uint32_t sc)
{
	return w >= 1 && h >= 1 && w <= QVQ_DCT_SIDE_MAX && h <= QVQ_DCT_SIDE_MAX && sl >= 1 && sc >= 1 && sl <= QVQ_DCT_STEP_MAX &&
	       sc <= QVQ_DCT_STEP_MAX;
}

/* x / 2^b rounded down (steps 2-4's fs): the arithmetic shift, which GCC
 * and Clang define >> of a negative int to be. */
_Static_assert((-5 >> 1) == -3, "arithmetic right shift");
static inline int32_t fs32(int32_t x, unsigned b)
{
	return x >> b;
}

static inline uint8_t clamp255(int32_t v)
{
	return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* ---- encoder ------------------------------------------------------------ */

static double g_cos[8][8]; /* a(k) cos((2 n + 1) k pi / 16) */
static pthread_once_t g_cos_once = PTHREAD_ONCE_INIT;

static void make_cos(void)
{
	const double pi = 3.14159265358979323846;
	for (int k = 0; k < 8; k++)
		for (int n = 0; n < 8; n++)
			g_cos[k][n] = (k ? sqrt(2.0 / 8.0) : sqrt(1.0 / 8.0)) * cos((2 * n + 1) * k * pi / 16.0);
}

/* One 8x8 block of plane p (stride pw) at (bx, by), level-shifted by 128,
 * transformed and quantised into out[64]. */
static void fdct_block(const double *p, size_t pw, size_t bx, size_t by, double step, int16_t *out)
{
	const double(*c)[8] = (const double(*)[8])g_cos;
	double t[8][8];
	for (int r = 0; r < 8; r++) {
		const double *row = p + (by * 8 + (size_t)r) * pw + bx * 8;
		for (int k = 0; k < 8; k++) {
			double s = 0;
			for (int n = 0; n < 8; n++)
				s += c[k][n] * (row[n] - 128.0);
			t[r][k] = s;
		}
	}
	for (int k = 0; k < 8; k++)     /* vertical frequency */
		for (int l = 0; l < 8; l++) { /* horizontal */
			double s = 0;
			for (int r = 0; r < 8; r++)
				s += c[k][r] * t[r][l];
			long q = lround(s / step);
			out[k * 8 + l] = (int16_t)(q > 32767 ? 32767 : q < -32767 ? -32767 : q);
		}
}

wc_err qvq_dct_encode(const uint8_t *rgb, uint32_t w, uint32_t h, uint32_t step_luma, uint32_t step_chroma,
		      int16_t *coef, void *scratch)
{
	if (!valid(w, h, step_luma, step_chroma))
		return wc_fail(WC_E_INVAL, "transform: image %ux%u, steps %u/%u", w, h, step_luma, step_chroma);
	pthread_once(&g_cos_once, make_cos);
	qvq_dct_geom g;
	qvq_dct_geometry(w, h, &g);
	const size_t pw = (size_t)16 * g.mw, ph = (size_t)16 * g.mh, cw = pw / 2, ch = ph / 2;
	double *y = scratch, *cb = y + pw * ph, *cr = cb + cw * ch;
	memset(cb, 0, 2 * cw * ch * sizeof *cb);
	for (size_t j = 0; j < ph; j++)
		for (size_t i = 0; i < pw; i++) {
			const uint8_t *px = rgb + ((j < h ? j : h - 1) * (size_t)w + (i < w ? i : w - 1)) * 3;
			const double r = px[0], gg = px[1], b = px[2];
			y[j * pw + i] = 0.299 * r + 0.587 * gg + 0.114 * b;
			cb[(j / 2) * cw + i / 2] += 0.25 * (128.0 - 0.168736 * r - 0.331264 * gg + 0.5 * b);
			cr[(j / 2) * cw + i / 2] += 0.25 * (128.0 + 0.5 * r - 0.418688 * gg - 0.081312 * b);
		}
	int16_t *o = coef;
	for (size_t by = 0; by < ph / 8; by++)
		for (size_t bx = 0; bx < pw / 8; bx++, o += 64)
			fdct_block(y, pw, bx, by, step_luma / 8.0, o);
	for (int c = 0; c < 2; c++)
		for (size_t by = 0; by < ch / 8; by++)
			for (size_t bx = 0; bx < cw / 8; bx++, o += 64)
				fdct_block(c ? cr : cb, cw, bx, by, step_chroma / 8.0, o);
	return WC_OK;
}

/* ---- decoder ------------------------------------------------------------ */

/* Block q (64 quantised coefficients) with its step, decoded into the plane
 * at out (stride pw). Written for the vectorizer: each pass accumulates 8
 * outputs at once over k (int32 lanes); a row of zeros is skipped, its
 * terms being 0 (sums are exact, so the order and the skipped zero terms
 * change nothing). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
/* AVX2's 8-lane int32 multiply where the CPU has it (picked at load time);
 * the baseline's SSE2 has no 32-bit multiply to vectorize with. */
__attribute__((target_clones("avx2", "default")))
#endif
static void idct_block(const int16_t *q, int32_t step, uint8_t *out, size_t pw)
{
	int32_t x[64], t[64];
	unsigned rows = 0; /* bit r: row r of coefficients has a non-zero */
	for (int i = 0; i < 64; i++) {
		const int32_t v = (int32_t)q[i] * step;
		x[i] = v > 32767 ? 32767 : v < -32768 ? -32768 : v;
		rows |= (unsigned)(x[i] != 0) << (i / 8);
	}
	for (int r = 0; r < 8; r++) { /* rows: horizontal frequencies */
		int32_t acc[8];
		for (int n = 0; n < 8; n++)
			acc[n] = 1 << 11;
		if (rows >> r & 1)
			for (int k = 0; k < 8; k++) {
				const int32_t xk = x[r * 8 + k];
				for (int n = 0; n < 8; n++)
					acc[n] += QVQ_DCT_BASIS[k][n] * xk;
			}
		for (int n = 0; n < 8; n++)
			t[r * 8 + n] = fs32(acc[n], 12);
	}
	for (int m = 0; m < 8; m++) { /* columns: vertical frequencies */
		int32_t acc[8];
		for (int n = 0; n < 8; n++)
			acc[n] = 1 << 14;
		for (int k = 0; k < 8; k++) {
			if (!(rows >> k & 1)) /* a row of zeros: t's row is fs(2^11, 12) = 0 */
				continue;
			const int32_t b = QVQ_DCT_BASIS[k][m];
			for (int n = 0; n < 8; n++)
				acc[n] += b * t[k * 8 + n];
		}
		for (int n = 0; n < 8; n++)
			out[(size_t)m * pw + n] = clamp255(fs32(acc[n], 15) + 128);
	}
}

/* Chroma row i of plane c (cw x chh), triangle-filtered vertically toward
 * row y of the luma grid, into v (3 c[i] + c[i +- 1]). */
static void chroma_row(const uint8_t *c, size_t cw, size_t chh, size_t y, int32_t *v)
{
	const size_t i = y / 2;
	const size_t o = y % 2 ? (i + 1 < chh ? i + 1 : i) : (i > 0 ? i - 1 : 0);
	for (size_t j = 0; j < cw; j++)
		v[j] = 3 * c[i * cw + j] + c[o * cw + j];
}

/* A vertically filtered chroma row v (cw samples) filtered horizontally to
 * the luma grid's 2 cw columns, less 128 (step 3's second half). */
static void chroma_cols(const int32_t *v, size_t cw, int32_t *out)
{
	for (size_t j = 0; j < cw; j++) {
		const size_t jm = j > 0 ? j - 1 : 0, jp = j + 1 < cw ? j + 1 : j;
		out[2 * j] = fs32(3 * v[j] + v[jm] + 8, 4) - 128;
		out[2 * j + 1] = fs32(3 * v[j] + v[jp] + 8, 4) - 128;
	}
}

wc_err qvq_dct_decode(const int16_t *coef, uint32_t w, uint32_t h, uint32_t step_luma, uint32_t step_chroma,
		      uint8_t *rgb, void *scratch)
{
	if (!valid(w, h, step_luma, step_chroma))
		return wc_fail(WC_E_INVAL, "transform: image %ux%u, steps %u/%u", w, h, step_luma, step_chroma);
	qvq_dct_geom g;
	qvq_dct_geometry(w, h, &g);
	const size_t pw = (size_t)16 * g.mw, ph = (size_t)16 * g.mh, cw = pw / 2, ch = ph / 2;
	uint8_t *y = scratch, *cb = y + pw * ph, *cr = cb + cw * ch;
	int32_t *vb = (int32_t *)(((uintptr_t)(cr + cw * ch) + 15u) & ~(uintptr_t)15u), *vr = vb + cw;
	int32_t *hb = vr + cw, *hr = hb + pw; /* chroma on the luma grid, a row */
	const int16_t *q = coef;
	for (size_t by = 0; by < ph / 8; by++)
		for (size_t bx = 0; bx < pw / 8; bx++, q += 64)
			idct_block(q, (int32_t)step_luma, y + by * 8 * pw + bx * 8, pw);
	for (int c = 0; c < 2; c++)
		for (size_t by = 0; by < ch / 8; by++)
			for (size_t bx = 0; bx < cw / 8; bx++, q += 64)
				idct_block(q, (int32_t)step_chroma, (c ? cr : cb) + by * 8 * cw + bx * 8, cw);
	for (size_t j = 0; j < h; j++) {
		chroma_row(cb, cw, ch, j, vb);
		chroma_row(cr, cw, ch, j, vr);
		chroma_cols(vb, cw, hb);
		chroma_cols(vr, cw, hr);
		uint8_t *out = rgb + j * (size_t)w * 3;
		const uint8_t *ly = y + j * pw;
		for (size_t i = 0; i < w; i++, out += 3) {
			const int32_t l = ly[i], b = hb[i], r = hr[i];
			/* |b|, |r| <= 128: every product fits 32 bits */
			out[0] = clamp255(l + fs32(91881 * r + (1 << 15), 16));
			out[1] = clamp255(l + fs32(-22554 * b - 46802 * r + (1 << 15), 16));
			out[2] = clamp255(l + fs32(116130 * b + (1 << 15), 16));
		}
	}
	return WC_OK;
}
