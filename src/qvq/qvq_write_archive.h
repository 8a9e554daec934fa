/*
 * qvq_write_archive.h - the part of writing a .qvq archive that every mode
 * shares (docs/FORMAT.md 6.1-6.2): checking names, sizes and labels,
 * grouping images into tiles, and writing payloads, sections and header
 * through a temporary file. The modes' writers (qvq_writer_vq.c: codebook,
 * qvq_writer_tx.c: transform) build on it and not on each other.
 */
#ifndef WC_QVQ_WRITE_ARCHIVE_H
#define WC_QVQ_WRITE_ARCHIVE_H

#include "codec/rans.h"
#include "qvq/qvq_format.h"
#include "qvq/qvq_writer.h"

/* A tile as a mode's writer makes it. */
typedef struct qvq_tile_out {
	uint32_t first, count;   /* images */
	uint64_t idx_first;      /* codebook mode: first index in in->indices */
	uint32_t nidx, dsize;    /* the tile table's nindices, dsize */
	uint8_t *payload;
	size_t csize;
	uint64_t chash, dhash;
	double sq_err;           /* transform mode: squared error against the input */
	wc_err err;
	char why[256];
} qvq_tile_out;

/* Check what every mode stores: image count, names (valid, sorted, distinct
 * once shown), sizes, labels. Errors: WC_E_INVAL with the reason, WC_E_NOMEM. */
wc_err qvq_write_check_images(const wc_qvq_write_input *in);

/* Group consecutive images into tiles of up to tile_bytes decoded bytes
 * (an image larger gets its own): fills first, count, dsize of tiles (room
 * for nimages) and returns their number. */
uint32_t qvq_write_group_tiles(const wc_qvq_write_input *in, uint32_t tile_bytes, qvq_tile_out *tiles);

/* Encode tiles[0..ntiles) with encode(ctx, tile) on in->threads threads
 * (0: the usable CPUs), in groups of 256 tiles so that in->progress is told
 * as they finish. Returns WC_OK, or the first failed tile's err with its
 * why. */
wc_err qvq_write_encode_tiles(const wc_qvq_write_input *in, qvq_tile_out *tiles, uint32_t ntiles,
			      void (*encode)(void *ctx, qvq_tile_out *tp), void *ctx);

/* Write the archive: h holds the mode's fields (version, mode, steps,
 * patch, channels, entries, index_bytes, chunk_symbols); the rest is
 * filled here. codebook: codebook_len bytes; tabs: ntables tables.
 * Through "path.tmp.XXXXXX", fsync, rename; on failure path is untouched.
 * Errors: WC_E_INVAL (metadata, limits), WC_E_IO, WC_E_NOMEM. */
wc_err qvq_write_archive(const char *path, const wc_qvq_write_input *in, wc_qvq_header h,
			 const uint8_t *codebook, uint64_t codebook_len, const wc_freqtab *tabs, uint32_t ntables,
			 const qvq_tile_out *tiles, uint32_t ntiles, wc_qvq_write_stats *stats);

/* The modes' writers behind wc_qvq_write: codebook (qvq_writer_vq.c),
 * transform (qvq_writer_tx.c). Contract and errors as wc_qvq_write. */
wc_err qvq_write_vq(const char *path, const wc_qvq_write_input *in, wc_qvq_write_stats *stats);
wc_err qvq_write_tx(const char *path, const wc_qvq_write_input *in, wc_qvq_write_stats *stats);

#endif /* WC_QVQ_WRITE_ARCHIVE_H */
