/* qvq_writer_tx.c - the transform mode's tiles (docs/FORMAT.md 6.8): each
 * image quantised, a frequency table a plane over the whole archive, each
 * tile coded and decoded back to take its hash (qvq_write_archive.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "core/limits.h"
#include "qvq/qvq_parallel.h"
#include "qvq/qvq_tx_tile.h"
#include "qvq/qvq_write_archive.h"

typedef struct tx_ctx {
	const wc_qvq_write_input *in;
	qvq_tx_image *im;
	wc_err *err;             /* per image (quantising) */
	qvq_tile_out *tiles;
	wc_freqtab tabs[QVQ_TX_PLANES];
	const wc_rans_dtab *dt[QVQ_TX_PLANES];
	uint32_t chunk;
} tx_ctx;

static void quantise_slice(void *ctx, unsigned slice, size_t begin, size_t end)
{
	(void)slice;
	tx_ctx *c = ctx;
	const wc_qvq_write_input *in = c->in;
	for (size_t i = begin; i < end; i++)
		c->err[i] = qvq_tx_image_make(in->rgb[i], in->dims[2 * i], in->dims[2 * i + 1], in->step_luma,
					      in->step_chroma, &c->im[i]);
}

/* Code tile tp, decode it back with the reader's decoder, hash both, and
 * add up its squared error against the input. */
static void encode_tile(void *ctx, qvq_tile_out *tp)
{
	tx_ctx *c = ctx;
	const wc_qvq_write_input *in = c->in;
	const uint32_t *dims = in->dims + 2 * (size_t)tp->first;
	size_t cap = qvq_tx_tile_bound(dims, tp->count, c->chunk), len = 0;
	uint8_t *rgb = malloc((size_t)tp->dsize + 1);
	tp->payload = malloc(cap);
	if (!rgb || !tp->payload) {
		tp->err = WC_E_NOMEM;
		snprintf(tp->why, sizeof tp->why, "no memory for a tile of %u images", tp->count);
		goto out;
	}
	tp->err = qvq_tx_tile_encode(c->im + tp->first, dims, tp->count, c->tabs, c->chunk, tp->payload, &len);
	if (!tp->err)
		tp->err = qvq_tx_tile_decode(tp->payload, len, dims, tp->count, c->dt, c->chunk, in->step_luma,
					     in->step_chroma, rgb);
	if (tp->err) {
		snprintf(tp->why, sizeof tp->why, "%s", wc_last_detail());
		goto out;
	}
	tp->csize = len;
	tp->chash = wc_xxh3_64(tp->payload, len);
	tp->dhash = wc_xxh3_64(rgb, tp->dsize);
	const uint8_t *d = rgb;
	for (uint32_t i = tp->first; i < tp->first + tp->count; i++) {
		qvq_tx_layout L;
		qvq_tx_image_layout(in->dims[2 * i], in->dims[2 * i + 1], &L);
		tp->nidx += (uint32_t)L.nsym;
		size_t n = (size_t)in->dims[2 * i] * in->dims[2 * i + 1] * 3;
		uint64_t se = 0;
		for (size_t j = 0; j < n; j++) {
			int v = (int)d[j] - (int)in->rgb[i][j];
			se += (uint64_t)(v * v);
		}
		tp->sq_err += (double)se;
		d += n;
	}
out:
	for (uint32_t i = tp->first; i < tp->first + tp->count; i++)
		qvq_tx_image_free(&c->im[i]); /* its symbols are in the payload now */
	free(rgb);
}

/* A table a plane from the archive's histograms. A plane holding one value
 * everywhere (a flat image set) gets a second symbol of count 1, as rANS
 * tables need two (docs/FORMAT.md 4). */
static wc_err build_tables(tx_ctx *c, uint64_t hist[QVQ_TX_PLANES][256], wc_rans_dtab *dtabs)
{
	for (unsigned p = 0; p < QVQ_TX_PLANES; p++) {
		unsigned present = 0;
		for (unsigned s = 0; s < 256; s++)
			present += hist[p][s] != 0;
		if (present < 2)
			hist[p][hist[p][0] ? 1 : 0]++;
		if (present < 1)
			hist[p][1]++;
		wc_err e = wc_freq_normalize(hist[p], &c->tabs[p]);
		if (e)
			return wc_fail_context(e, "qvq: frequency table of plane %u", p);
		wc_rans_dtab_build(&c->tabs[p], &dtabs[p]);
		c->dt[p] = &dtabs[p];
	}
	return WC_OK;
}

wc_err qvq_write_tx(const char *path, const wc_qvq_write_input *in, wc_qvq_write_stats *stats)
{
	if (!in->rgb || in->step_luma < 1 || in->step_luma > WC_QVQ_MAX_STEP || in->step_chroma < 1 ||
	    in->step_chroma > WC_QVQ_MAX_STEP)
		return wc_fail(WC_E_INVAL, "qvq: transform mode with steps %u, %u (1..%u eighths)%s", in->step_luma,
			       in->step_chroma, WC_QVQ_MAX_STEP, in->rgb ? "" : " and no images");
	wc_err e = qvq_write_check_images(in);
	if (e)
		return e;
	const uint32_t n = in->nimages;
	tx_ctx c = {.in = in, .chunk = in->chunk_symbols ? in->chunk_symbols : QVQ_TX_CHUNK_DEFAULT};
	uint32_t tile_bytes = in->tile_bytes ? in->tile_bytes : WC_QVQ_TILE_BYTES_DEFAULT;
	if (tile_bytes > WC_QVQ_MAX_TILE_BYTES)
		tile_bytes = WC_QVQ_MAX_TILE_BYTES;
	unsigned threads = in->threads ? in->threads : wc_cpu_count();
	c.im = calloc(n, sizeof *c.im);
	c.err = calloc(n, sizeof *c.err);
	c.tiles = calloc(n, sizeof *c.tiles);
	uint64_t(*hist)[256] = calloc(QVQ_TX_PLANES, sizeof *hist);
	wc_rans_dtab *dtabs = malloc(QVQ_TX_PLANES * sizeof *dtabs);
	uint32_t ntiles = 0;
	if (!c.im || !c.err || !c.tiles || !hist || !dtabs) {
		e = wc_fail(WC_E_NOMEM, "qvq: no memory for %u images", n);
		goto out;
	}
	wc_qvq_parallel(threads < n ? threads : n, n, quantise_slice, &c);
	for (uint32_t i = 0; i < n && !e; i++) {
		if (c.err[i])
			e = wc_fail(c.err[i], "qvq: image \"%s\": %s", in->names[i], wc_last_detail());
		else
			qvq_tx_image_count(&c.im[i], in->dims[2 * i], in->dims[2 * i + 1], hist);
	}
	if (e || (e = build_tables(&c, hist, dtabs)))
		goto out;
	ntiles = qvq_write_group_tiles(in, tile_bytes, c.tiles);
	if ((e = qvq_write_encode_tiles(in, c.tiles, ntiles, encode_tile, &c)))
		goto out;
	/* the archive's PSNR, from the decode each tile was hashed by */
	double se = 0, samples = 0;
	for (uint32_t t = 0; t < ntiles; t++)
		se += c.tiles[t].sq_err;
	for (uint32_t i = 0; i < n; i++)
		samples += 3.0 * in->dims[2 * i] * in->dims[2 * i + 1];
	wc_qvq_write_input with_psnr = *in;
	with_psnr.metadata = in->metadata ? json_deep_copy(in->metadata) : json_object();
	if (!with_psnr.metadata || json_object_set_new(with_psnr.metadata, "psnr_db",
						       json_real(se > 0 ? 10 * log10(255.0 * 255.0 * samples / se) : 999.0))) {
		json_decref(with_psnr.metadata);
		e = wc_fail(WC_E_NOMEM, "qvq: no memory for the metadata");
		goto out;
	}
	wc_qvq_header h = {
		.version = WC_QVQ_VERSION, .mode = WC_QVQ_MODE_DCT, .step_luma = in->step_luma,
		.step_chroma = in->step_chroma, .patch_h = 8, .patch_w = 8, .channels = 3, .chunk_symbols = c.chunk,
	};
	e = qvq_write_archive(path, &with_psnr, h, NULL, 0, c.tabs, QVQ_TX_PLANES, c.tiles, ntiles, stats);
	json_decref(with_psnr.metadata);
	if (!e && stats)
		stats->sq_err = se;
out:
	for (uint32_t i = 0; c.im && i < n; i++)
		qvq_tx_image_free(&c.im[i]);
	for (uint32_t t = 0; c.tiles && t < ntiles; t++)
		free(c.tiles[t].payload);
	free(c.im);
	free(c.err);
	free(c.tiles);
	free(hist);
	free(dtabs);
	return e;
}
