/* qvq_writer.c - wc_qvq_write: the mode's writer (qvq_write_archive.h). */
#include "qvq/qvq_writer.h"

#include "qvq/qvq_write_archive.h"

wc_err wc_qvq_write(const char *path, const wc_qvq_write_input *in, wc_qvq_write_stats *stats)
{
	switch (in->mode) {
	case WC_QVQ_MODE_VQ: return qvq_write_vq(path, in, stats);
	case WC_QVQ_MODE_DCT: return qvq_write_tx(path, in, stats);
	default: return wc_fail(WC_E_INVAL, "qvq: mode %u (0: codebook, 1: transform)", in->mode);
	}
}
