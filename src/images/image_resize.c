/*
 * image_resize.c - resize (shorter side) + centre crop with a separable,
 * antialiased triangle filter: the usual convolution resampler (as in
 * PIL's Image.resize with BILINEAR, or ImageMagick's Triangle filter) whose
 * support is scaled by the shrink factor, so shrinking averages like an
 * area filter and enlarging interpolates bilinearly.
 */
#include <math.h>
#include <stdlib.h>

#include "images/image_io.h"

/* Coefficients for out_n output samples at positions first..first+out_n-1
 * of a src_n -> scaled_n resampling: for output i, taps start[i] ..
 * start[i] + ntaps - 1 with weights w[i * ntaps + k] (summing to 1). */
typedef struct coeffs {
	int ntaps;
	int *start;
	float *w;
} coeffs;

static int make_coeffs(uint32_t src_n, double scale, uint32_t first, uint32_t out_n, coeffs *c)
{
	double support = scale < 1.0 ? 1.0 / scale : 1.0; /* filter radius in source pixels */
	double fscale = scale < 1.0 ? scale : 1.0;
	c->ntaps = (int)ceil(support) * 2 + 1;
	c->start = malloc(out_n * sizeof *c->start);
	c->w = calloc((size_t)out_n * c->ntaps, sizeof *c->w);
	if (!c->start || !c->w)
		return -1;
	for (uint32_t i = 0; i < out_n; i++) {
		double center = (first + i + 0.5) / scale; /* in source pixel units */
		int lo = (int)floor(center - support);
		if (lo < 0)
			lo = 0;
		int hi = (int)ceil(center + support);
		if (hi > (int)src_n)
			hi = (int)src_n;
		if (hi - lo > c->ntaps)
			hi = lo + c->ntaps;
		double sum = 0;
		float *w = c->w + (size_t)i * c->ntaps;
		for (int j = lo; j < hi; j++) {
			double x = fabs((j + 0.5 - center) * fscale);
			double v = x < 1.0 ? 1.0 - x : 0.0;
			w[j - lo] = (float)v;
			sum += v;
		}
		if (sum <= 0) { /* cannot happen for centre inside the image; be safe */
			int j = (int)center < (int)src_n ? (int)center : (int)src_n - 1;
			lo = j;
			w[0] = 1;
			sum = 1;
			for (int k = 1; k < c->ntaps; k++)
				w[k] = 0;
		}
		for (int k = 0; k < c->ntaps; k++)
			w[k] = (float)(w[k] / sum);
		c->start[i] = lo;
	}
	return 0;
}

static void free_coeffs(coeffs *c)
{
	free(c->start);
	free(c->w);
}

wc_err wc_image_resize_crop(const wc_image *src, uint32_t w, uint32_t h, wc_image *out)
{
	if (w == 0 || h == 0)
		return wc_fail(WC_E_INVAL, "resize to %ux%u", w, h);
	double sx = (double)w / src->width, sy = (double)h / src->height;
	double s = sx > sy ? sx : sy;
	/* Scaled size: the side that matches keeps exactly w (or h). */
	const double fw = floor(src->width * s + 0.5), fh = floor(src->height * s + 0.5);
	if ((sx < sy && fw > UINT32_MAX) || (sx >= sy && fh > UINT32_MAX))
		return wc_fail(WC_E_RANGE, "resize of %ux%u to %ux%u: the scaled image would be "
			       "%.0fx%.0f", src->width, src->height, w, h, sx >= sy ? w : fw, sx >= sy ? fh : h);
	uint32_t rw = sx >= sy ? w : (uint32_t)fw;
	uint32_t rh = sx >= sy ? (uint32_t)fh : h;
	if (rw < w)
		rw = w;
	if (rh < h)
		rh = h;
	uint32_t x0 = (rw - w) / 2, y0 = (rh - h) / 2;
	double scx = (double)rw / src->width, scy = (double)rh / src->height;
	coeffs cx = {0}, cy = {0};
	float *tmp = NULL;
	uint8_t *dst = malloc((size_t)w * h * 3);
	wc_err e = WC_OK;
	if (!dst || make_coeffs(src->width, scx, x0, w, &cx) || make_coeffs(src->height, scy, y0, h, &cy)) {
		e = wc_fail(WC_E_NOMEM, "resize: no memory");
		free(dst);
		goto out;
	}
	/* Only the source rows [r0, r1) the kept rows draw on are resampled:
	 * a sliver enlarged to a wide crop keeps a few of its rows, not
	 * src->height rows of w columns (gigabytes). */
	uint32_t r0 = src->height, r1 = 0;
	for (uint32_t y = 0; y < h; y++) {
		uint32_t lo = (uint32_t)cy.start[y], hi = lo + (uint32_t)cy.ntaps;
		r0 = lo < r0 ? lo : r0;
		r1 = hi > r1 ? hi : r1;
	}
	if (r1 > src->height)
		r1 = src->height;
	if (r0 > r1)
		r0 = r1;
	if (!(tmp = malloc(((size_t)(r1 - r0) * w * 3 + 1) * sizeof *tmp))) {
		e = wc_fail(WC_E_NOMEM, "resize: no memory");
		free(dst);
		goto out;
	}
	/* Horizontal pass: those source rows -> w columns. */
	for (uint32_t y = r0; y < r1; y++) {
		const uint8_t *row = src->rgb + (size_t)y * src->width * 3;
		float *t = tmp + (size_t)(y - r0) * w * 3;
		for (uint32_t x = 0; x < w; x++) {
			const float *wt = cx.w + (size_t)x * cx.ntaps;
			int st = cx.start[x];
			float r = 0, g = 0, b = 0;
			for (int k = 0; k < cx.ntaps && st + k < (int)src->width; k++) {
				const uint8_t *p = row + (size_t)(st + k) * 3;
				r += wt[k] * p[0]; g += wt[k] * p[1]; b += wt[k] * p[2];
			}
			t[3 * x] = r; t[3 * x + 1] = g; t[3 * x + 2] = b;
		}
	}
	/* Vertical pass -> h rows, rounded to 8 bits. */
	for (uint32_t y = 0; y < h; y++) {
		const float *wt = cy.w + (size_t)y * cy.ntaps;
		int st = cy.start[y];
		uint8_t *o = dst + (size_t)y * w * 3;
		for (uint32_t x = 0; x < w * 3; x++) {
			float v = 0;
			for (int k = 0; k < cy.ntaps && st + k < (int)src->height; k++)
				v += wt[k] * tmp[(size_t)(st + k - (int)r0) * w * 3 + x];
			long r = lroundf(v);
			o[x] = (uint8_t)(r < 0 ? 0 : r > 255 ? 255 : r);
		}
	}
	out->width = w;
	out->height = h;
	out->rgb = dst;
out:
	free(tmp);
	free_coeffs(&cx);
	free_coeffs(&cy);
	return e;
}
