/*
 * qvq_pack.h - the image-archive encoder behind `wcodec pack-images`:
 * directory scan, image decode, optional resize + centre crop, patch
 * extraction with edge padding, k-means codebook, assignment, PSNR, and
 * the archive writer.
 */
#ifndef WC_QVQ_PACK_H
#define WC_QVQ_PACK_H

#include <stdint.h>

#include "core/wc_error.h"

typedef struct wc_qvq_pack_opts {
	uint32_t width, height;  /* resize + centre crop to this size; 0, 0 = keep sizes */
	uint8_t mode;            /* WC_QVQ_MODE_VQ (codebook) or WC_QVQ_MODE_DCT (transform) */
	/* Transform mode: the quality on JPEG's 1-100 scale (qvq_dct_rate.h),
	 * or psnr_db > 0: the largest step whose PSNR over every image is at
	 * least psnr_db (the smallest archive at that quality). Neither: 90. */
	int quality;
	double psnr_db;
	uint32_t entries;        /* codebook mode: entries K, 1..65536; 0 = 256 */
	uint64_t seed;           /* k-means sampling and seeding */
	unsigned threads;        /* 0 = online CPUs */
	uint32_t tile_bytes;     /* decoded bytes per tile; 0 = 1 MiB */
	uint32_t iterations;     /* Lloyd iterations at most; 0 = 10 */
	/* Symbols a rANS chunk (a multiple of 32, WC_RANS_CHUNK_MIN..MAX), 0 =
	 * the mode's default. A chunk is a chain of dependent steps for a GPU
	 * warp: shorter chunks decode sooner, each adding 128 bytes of lane
	 * states (docs/FORMAT.md 4). */
	uint32_t chunk_symbols;
	int keep_recon;          /* return the encoder's reconstruction in the stats */
	int skip_unreadable;     /* an image that cannot be read or decoded (any
				  * error but WC_E_NOMEM) is left out with a
				  * warning (wc_log) instead of failing the pack */
	/* Progress per stage ("load", "seed", "train", "assign", "write"). */
	void (*progress)(void *ctx, const char *stage, uint64_t done, uint64_t total);
	void *progress_ctx;
	void (*tmp_path)(const char *path); /* see wc_qvq_write_input; may be NULL */
	/* Optional: k-means' nearest-entry search elsewhere (a GPU), as
	 * wc_kmeans_opts.nearest; the archive is the same bytes either way. */
	wc_err (*nearest)(void *ctx, const uint8_t *codebook, uint32_t k, uint32_t dim,
			  const uint8_t *points, uint64_t n, uint16_t *out);
	void *nearest_ctx;
} wc_qvq_pack_opts;

typedef struct wc_qvq_pack_stats {
	uint32_t nimages, entries, nlabels, ntiles; /* entries 0: transform mode */
	uint32_t step_luma, step_chroma;  /* transform mode: the steps, eighths */
	uint64_t skipped;        /* images left out (skip_unreadable) */
	uint64_t pixels;         /* true pixels of all images */
	uint64_t file_bytes;     /* archive size */
	double mse, psnr_db;     /* reconstruction vs the (resized) input, over every channel */
	double bits_per_pixel;   /* 8 * file_bytes / pixels */
	/* keep_recon: per image (archive order) w*h*3 reconstructed bytes. */
	uint8_t **recon;
	uint32_t *dims;          /* 2 * nimages: width, height (keep_recon) */
	char **names;            /* nimages names (keep_recon) */
} wc_qvq_pack_stats;

/* Pack (codebook mode: k-means of 2x2 patches; transform mode: qvq_dct.h at
 * the step of opts' quality or PSNR) every PNG, JPEG and PPM/PGM file under dir (recursively; chosen by
 * extension .png .jpg .jpeg .ppm .pgm, any case; dotfiles skipped; names
 * sorted bytewise) into out. When every image lies in a subdirectory, the
 * first directory component is its label (ImageFolder convention).
 * A temporary file beside out is created and removed first, so that an
 * output that cannot be written fails at once, not after the work.
 * Errors: WC_E_NOTFOUND (no image), the image readers' errors naming the
 * file, WC_E_INVAL (options, a name that cannot be stored), WC_E_RANGE
 * (a PSNR beyond what the transform keeps of the images), WC_E_IO (also
 * out's directory missing or not writable), WC_E_NOMEM. */
wc_err wc_qvq_pack_dir(const char *dir, const char *out, const wc_qvq_pack_opts *opts,
		       wc_qvq_pack_stats *stats);
void wc_qvq_pack_stats_free(wc_qvq_pack_stats *stats);

#endif /* WC_QVQ_PACK_H */
