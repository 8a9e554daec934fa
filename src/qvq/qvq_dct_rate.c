/*
 * qvq_dct_rate.c - choosing the transform mode's quantisation step
 * (qvq_dct_rate.h).
 */
#include "qvq_dct_rate.h"

#include <math.h>
#include <stdlib.h>

#include "qvq_dct.h"
#include "core/limits.h"
#include "qvq/qvq_parallel.h"

wc_err qvq_dct_step_for_quality(int q, uint32_t *step_luma)
{
	if (q < 1 || q > 100)
		return wc_fail(WC_E_INVAL, "transform: quality %d is not in 1..100", q);
	const double s = q < 50 ? 5000.0 / q : 200.0 - 2.0 * q;
	const double step = s > 0 ? 8.0 * 1.10 * pow(s, 0.675) : 0;
	long r = lround(step);
	*step_luma = (uint32_t)(r < 1 ? 1 : r > (long)QVQ_DCT_STEP_MAX ? QVQ_DCT_STEP_MAX : r);
	return WC_OK;
}

uint32_t qvq_dct_chroma_step(uint32_t step_luma)
{
	const uint32_t c = step_luma * 3 / 2;
	return c < 1 ? 1 : c > QVQ_DCT_STEP_MAX ? QVQ_DCT_STEP_MAX : c;
}

typedef struct psnr_ctx {
	const qvq_rate_image *im;
	uint32_t step, chroma;
	uint64_t *se;   /* per slice: squared errors, exact */
	wc_err *err;    /* per slice */
} psnr_ctx;

static void psnr_slice(void *ctx, unsigned slice, size_t begin, size_t end)
{
	psnr_ctx *c = ctx;
	size_t scr = 0, nc = 0;
	for (size_t i = begin; i < end; i++) {
		qvq_dct_geom g;
		qvq_dct_geometry(c->im[i].w, c->im[i].h, &g);
		const size_t s = qvq_dct_scratch_bytes(c->im[i].w, c->im[i].h);
		scr = s > scr ? s : scr;
		nc = g.blocks * 64 > nc ? g.blocks * 64 : nc;
	}
	void *scratch = malloc(scr + 1);
	int16_t *coef = malloc(nc * sizeof *coef + 1);
	uint8_t *out = malloc(nc * 3 + 1); /* 384 coefficients a macroblock of 256 pixels: more than w * h * 3 */
	wc_err e = scratch && coef && out ? WC_OK : WC_E_NOMEM;
	uint64_t se = 0;
	for (size_t i = begin; i < end && e == WC_OK; i++) {
		const qvq_rate_image *m = &c->im[i];
		e = qvq_dct_encode(m->rgb, m->w, m->h, c->step, c->chroma, coef, scratch);
		if (e == WC_OK)
			e = qvq_dct_decode(coef, m->w, m->h, c->step, c->chroma, out, scratch);
		const size_t k = (size_t)m->w * m->h * 3;
		for (size_t j = 0; j < k && e == WC_OK; j++) {
			const int d = (int)out[j] - (int)m->rgb[j];
			se += (uint64_t)(d * d);
		}
	}
	free(scratch);
	free(coef);
	free(out);
	c->se[slice] = se;
	c->err[slice] = e;
}

wc_err qvq_dct_psnr(const qvq_rate_image *im, size_t n, uint32_t step_luma, double *db)
{
	if (n == 0)
		return wc_fail(WC_E_INVAL, "transform: no images");
	if (step_luma < 1 || step_luma > QVQ_DCT_STEP_MAX)
		return wc_fail(WC_E_INVAL, "transform: step %u (1..%u)", step_luma, QVQ_DCT_STEP_MAX);
	double samples = 0;
	for (size_t i = 0; i < n; i++) {
		if (im[i].w < 1 || im[i].h < 1 || im[i].w > QVQ_DCT_SIDE_MAX || im[i].h > QVQ_DCT_SIDE_MAX)
			return wc_fail(WC_E_INVAL, "transform: image %zu of %ux%u", i, im[i].w, im[i].h);
		samples += (double)im[i].w * im[i].h * 3;
	}
	const unsigned cpus = wc_cpu_count(), threads = n < cpus ? (unsigned)n : cpus;
	psnr_ctx c = {im, step_luma, qvq_dct_chroma_step(step_luma), calloc(threads, sizeof(uint64_t)),
		      calloc(threads, sizeof(wc_err))};
	wc_err e = c.se && c.err ? WC_OK : wc_fail(WC_E_NOMEM, "transform: PSNR buffers");
	double se = 0;
	if (e == WC_OK)
		wc_qvq_parallel(threads, n, psnr_slice, &c);
	for (unsigned s = 0; e == WC_OK && s < threads; s++) {
		if (c.err[s])
			e = wc_fail(c.err[s], "transform: PSNR at step %u", step_luma);
		se += (double)c.se[s];
	}
	free(c.se);
	free(c.err);
	if (e == WC_OK)
		*db = se == 0 ? 99.0 : 10.0 * log10(255.0 * 255.0 * samples / se);
	return e;
}

wc_err qvq_dct_step_for_psnr(const qvq_rate_image *im, size_t n, double target_db, uint32_t *step_luma,
			     double *db)
{
	double p;
	wc_err e = qvq_dct_psnr(im, n, 1, &p);
	if (e != WC_OK)
		return e;
	if (p < target_db)
		return wc_fail(WC_E_RANGE, "transform: %.2f dB at the finest step, short of %.2f dB", p, target_db);
	uint32_t lo = 1, hi = QVQ_DCT_STEP_MAX; /* lo meets the target */
	double plo = p;
	if ((e = qvq_dct_psnr(im, n, hi, &p)) != WC_OK)
		return e;
	if (p >= target_db)
		lo = hi, plo = p;
	while (hi - lo > 1) {
		const uint32_t mid = lo + (hi - lo) / 2;
		if ((e = qvq_dct_psnr(im, n, mid, &p)) != WC_OK)
			return e;
		if (p >= target_db)
			lo = mid, plo = p;
		else
			hi = mid;
	}
	*step_luma = lo;
	*db = plo;
	return WC_OK;
}
