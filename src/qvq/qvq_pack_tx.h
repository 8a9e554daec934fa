/* qvq_pack_tx.h - the transform mode's part of `wcodec pack-images`
 * (qvq_pack.c): the step from the options, the PSNR it gives. */
#ifndef WC_QVQ_PACK_TX_H
#define WC_QVQ_PACK_TX_H

#include <stddef.h>
#include <stdint.h>

#include "images/image_io.h"
#include "qvq/qvq_pack.h"

/* The luma step (eighths) for images img[0..n) under o (psnr_db: the
 * largest step keeping it, qvq_dct_step_for_psnr; else o->quality or 90,
 * qvq_dct_step_for_quality), and into st the steps and, with o->keep_recon,
 * the decoded images (names copied from names). The PSNR is the writer's,
 * from its decode of the archive. Errors: WC_E_INVAL (options), WC_E_RANGE (a PSNR
 * beyond reach), WC_E_NOMEM. */
wc_err qvq_pack_tx_prepare(const wc_image *img, size_t n, char **names, const wc_qvq_pack_opts *o,
			   uint32_t *step, wc_qvq_pack_stats *st);

#endif /* WC_QVQ_PACK_TX_H */
