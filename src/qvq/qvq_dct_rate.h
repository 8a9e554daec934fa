/*
 * qvq_dct_rate.h - the transform mode's quantisation step (qvq_dct.h): from
 * a quality on JPEG's 1-100 scale, or the largest step that keeps a PSNR
 * over a set of images (the smallest archive at that quality: the coded
 * size falls as the step grows): `wcodec pack-images --quality / --psnr`
 * (qvq_pack_tx.c).
 */
#ifndef WC_QVQ_DCT_RATE_H
#define WC_QVQ_DCT_RATE_H

#include <stddef.h>
#include <stdint.h>

#include "core/wc_error.h"

/* An image: w x h RGB pixels, row-major. */
typedef struct qvq_rate_image {
	const uint8_t *rgb;
	uint32_t w, h;
} qvq_rate_image;

/* The luma step (eighths; the chroma step is 3/2 of it, rounded down,
 * clamped to QVQ_DCT_STEP_MAX) whose PSNR on photographs matches JPEG's at
 * quality q (1..100, libjpeg's scale): 8 * 1.10 * s^0.675 rounded, s the
 * IJG scaling of q (5000 / q below 50, else 200 - 2 q), at least 1. Fitted
 * to PIL's JPEG PSNR at q = 50, 75, 85, 90, 95 on 336 held-out crops of
 * 224 x 224 (docs/BENCHMARKS.md, "A transform mode against JPEG (study)":
 * q 75 -> step 16, q 90 -> 8.4). Errors: WC_E_INVAL (q outside 1..100). */
wc_err qvq_dct_step_for_quality(int q, uint32_t *step_luma);

/* The chroma step that goes with a luma step: 3/2 of it, clamped. */
uint32_t qvq_dct_chroma_step(uint32_t step_luma);

/* PSNR (dB) over every pixel of the images coded at step_luma (chroma
 * qvq_dct_chroma_step): encoded and decoded as the archive would, one
 * mean squared error over all their samples. 99 dB when exact. Errors:
 * WC_E_INVAL (no images, a bad size or step), WC_E_NOMEM. */
wc_err qvq_dct_psnr(const qvq_rate_image *im, size_t n, uint32_t step_luma, double *db);

/* The largest luma step (1..QVQ_DCT_STEP_MAX) whose qvq_dct_psnr is at
 * least target_db, found by bisection (PSNR falls as the step grows, up to
 * rounding: the step returned is checked, never assumed); *db gets its
 * PSNR. Errors: WC_E_RANGE (even step 1 falls short: the target is past
 * what 4:2:0 keeps of these images), qvq_dct_psnr's. */
wc_err qvq_dct_step_for_psnr(const qvq_rate_image *im, size_t n, double target_db, uint32_t *step_luma,
			     double *db);

#endif /* WC_QVQ_DCT_RATE_H */
