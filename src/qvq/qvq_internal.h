/* qvq_internal.h - the archive object, shared by the reader and the
 * virtual-file code of src/qvq; not part of the public API. */
#ifndef WC_QVQ_INTERNAL_H
#define WC_QVQ_INTERNAL_H

#include <stdatomic.h>

#include "codec/rans.h"
#include "qvq/qvq.h"
#include "qvq/qvq_job.h"
#include "qvq/qvq_tx.h"

struct wc_qvq {
	wc_tile_source src; /* first member: the tile source is the archive */
	atomic_uint refs;
	int fd;
	wc_qvq_header h;
	wc_layout layout;
	char *meta;
	uint8_t *codebook;
	wc_freqtab *tables;
	wc_rans_dtab *dtabs; /* transform mode: the tables' decoding tables */
	const wc_rans_dtab *dtab_of[QVQ_TX_PLANES]; /* pointers to them, as jobs take them */
	wc_qvq_image *images;
	uint32_t *dims;  /* width, height per image: the jobs' dims */
	char *names;     /* every name, NUL-terminated, images[i].name points here */
	wc_qvq_tile *tiles;
	wc_qvq_job *jobs; /* per tile: its decode jobs' kind_data (qvq_job.h) */
	char **labels;
	uint32_t nlabels;
	char **shown;      /* per image: the name shown by the mount (.ppm) */
	int uniform;       /* all images share one size: images.npy exists */
	char *labels_txt;  /* labels.txt content, or NULL without labels */
	size_t labels_len;
	char npy_header[128]; /* images.npy header */
	uint32_t npy_header_len;
};

/* Build the derived views (shown names are already set): uniform size,
 * images.npy header, labels.txt. Errors: WC_E_NOMEM. */
wc_err wc_qvq_files_init(wc_qvq *q);

#endif /* WC_QVQ_INTERNAL_H */
