/*
 * qvq_writer.h - writing .qvq archives (docs/FORMAT.md 6) from a trained
 * codebook and per-image codebook indices.
 */
#ifndef WC_QVQ_WRITER_H
#define WC_QVQ_WRITER_H

#include <jansson.h>
#include <stdint.h>

#include "core/wc_error.h"

#define WC_QVQ_TILE_BYTES_DEFAULT (1u << 20) /* decoded bytes a tile aims at */

typedef struct wc_qvq_write_input {
	uint8_t mode;                 /* WC_QVQ_MODE_VQ (codebook, indices) or _DCT (rgb, steps) */
	/* Transform mode: every image's w * h * 3 RGB bytes and the steps
	 * (eighths, 1..2047; qvq_dct.h). */
	const uint8_t *const *rgb;
	uint16_t step_luma, step_chroma;
	/* Codebook mode: */
	uint32_t entries;             /* K, 1..65536 */
	uint8_t patch_h, patch_w;     /* 1..16 */
	const uint8_t *codebook;      /* entries * patch_h * patch_w * 3 bytes */
	uint32_t nimages;
	const char *const *names;     /* nimages names, strictly sorted (strcmp), valid */
	const uint32_t *dims;         /* 2 * nimages: width, height */
	const uint32_t *labels;       /* nimages label indices (or WC_QVQ_NO_LABEL); NULL: none */
	const char *const *label_names; /* nlabels one-line strings */
	uint32_t nlabels;
	/* Every image's indices back to back, each image's patch grid row-major:
	 * sum over images of ceil(w/pw) * ceil(h/ph) entries, each < entries. */
	const uint16_t *indices;
	json_t *metadata;             /* a JSON object to store (keys "format" and "labels"
				         are set by the writer), or NULL */
	uint32_t tile_bytes;          /* decoded bytes a tile aims at; 0 = default */
	uint32_t chunk_symbols;       /* rANS chunk; 0 = WC_RANS_CHUNK_DEFAULT */
	unsigned threads;             /* 0 = online CPUs */
	void (*progress)(void *ctx, uint64_t done, uint64_t total); /* tiles; may be NULL */
	void *progress_ctx;
	/* Called with the temporary file's path once it exists, and with NULL
	 * once it is renamed or removed (a CLI's signal cleanup); may be NULL. */
	void (*tmp_path)(const char *path);
} wc_qvq_write_input;

typedef struct wc_qvq_write_stats {
	uint64_t file_bytes;     /* size of the archive */
	uint64_t payload_bytes;  /* sum of tile payloads */
	uint64_t index_bytes;    /* raw index arrays (before entropy coding); codebook mode */
	double sq_err;           /* transform mode: sum of squared errors of the decoded
				  * images against rgb, every sample */
	uint64_t pixels;         /* true pixels over all images */
	uint32_t ntiles;
} wc_qvq_write_stats;

/* Write the archive to path through "path.tmp.XXXXXX" in the same directory
 * (fsync, rename); on failure the temporary file is removed and path is
 * untouched. Tiles group consecutive images up to tile_bytes decoded bytes
 * (an image larger than that gets a tile of its own). Codebook mode
 * (version 1): each tile's index array is coded with wc_tile_encode
 * (layout bytes for K <= 256, shuffle2 otherwise; rANS with per-archive
 * frequency tables where smaller, else RAW or CONST). Transform mode
 * (version 2, docs/FORMAT.md 6.8): each image quantised (qvq_dct.h), its
 * symbols coded with a table a plane over the whole archive; every tile is
 * decoded back by the reader's decoder to take its hash, so the archive
 * holds what readers will decode, and the metadata's "psnr_db" is that
 * decode's PSNR against rgb (999 when exact). Errors: WC_E_INVAL (bad input, with the
 * reason: name, sort order, geometry, index >= entries, step), WC_E_IO,
 * WC_E_NOMEM. */
wc_err wc_qvq_write(const char *path, const wc_qvq_write_input *in, wc_qvq_write_stats *stats);

#endif /* WC_QVQ_WRITER_H */
