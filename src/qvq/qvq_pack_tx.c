/* qvq_pack_tx.c - the transform mode's step and quality (qvq_pack_tx.h). */
#include "qvq/qvq_pack_tx.h"

#include <stdlib.h>
#include <string.h>

#include "qvq/qvq_dct.h"
#include "qvq/qvq_dct_rate.h"
#include "qvq/qvq_format.h"

/* The images as decoded from the archive, into st (keep_recon). */
static wc_err keep_recon(const wc_image *img, size_t n, char **names, uint32_t step, wc_qvq_pack_stats *st)
{
	st->recon = calloc(n, sizeof *st->recon);
	st->names = calloc(n, sizeof *st->names);
	st->nimages = (uint32_t)n;
	if (!st->recon || !st->names)
		return wc_fail(WC_E_NOMEM, "no memory");
	for (size_t i = 0; i < n; i++) {
		const uint32_t w = img[i].width, h = img[i].height;
		qvq_dct_geom g;
		qvq_dct_geometry(w, h, &g);
		int16_t *coef = malloc(g.blocks * 64 * sizeof *coef);
		void *scratch = malloc(qvq_dct_scratch_bytes(w, h));
		st->recon[i] = malloc((size_t)w * h * 3);
		st->names[i] = strdup(names[i]);
		wc_err e = coef && scratch && st->recon[i] && st->names[i] ? WC_OK : wc_fail(WC_E_NOMEM, "no memory");
		if (!e)
			e = qvq_dct_encode(img[i].rgb, w, h, step, qvq_dct_chroma_step(step), coef, scratch);
		if (!e)
			e = qvq_dct_decode(coef, w, h, step, qvq_dct_chroma_step(step), st->recon[i], scratch);
		free(coef);
		free(scratch);
		if (e)
			return e;
	}
	return WC_OK;
}

wc_err qvq_pack_tx_prepare(const wc_image *img, size_t n, char **names, const wc_qvq_pack_opts *o,
			   uint32_t *step, wc_qvq_pack_stats *st)
{
	if (o->quality && o->psnr_db > 0)
		return wc_fail(WC_E_INVAL, "pack-images: a quality or a PSNR, not both");
	qvq_rate_image *ri = malloc(n * sizeof *ri);
	if (!ri)
		return wc_fail(WC_E_NOMEM, "no memory");
	for (size_t i = 0; i < n; i++)
		ri[i] = (qvq_rate_image){img[i].rgb, img[i].width, img[i].height};
	double db = 0;
	wc_err e = o->psnr_db > 0 ? qvq_dct_step_for_psnr(ri, n, o->psnr_db, step, &db)
				  : qvq_dct_step_for_quality(o->quality ? o->quality : 90, step);
	free(ri);
	if (e)
		return e;
	st->step_luma = *step;
	st->step_chroma = qvq_dct_chroma_step(*step);
	return o->keep_recon ? keep_recon(img, n, names, *step, st) : WC_OK;
}
