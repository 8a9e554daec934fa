/* qvq_writer_vq.c - the codebook mode's tiles: index arrays coded with the
 * tile codec (qvq_write_archive.h). */
#include "qvq/qvq_writer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codec/tile_codec.h"
#include "core/atomic_file.h"
#include "core/fileio.h"
#include "core/hash.h"
#include "qvq/qvq.h"
#include "qvq/qvq_names.h"
#include "qvq/qvq_write_archive.h"

typedef struct encode_ctx {
	const wc_qvq_write_input *in;
	wc_layout layout;
	wc_plane_plan plan[2];
	uint32_t chunk;
	const uint8_t *codebook;
} encode_ctx;

/* Encode tile t: serialize its indices, tile-codec them, and compute the
 * hash of what the decoder must produce (the codebook gather). */
static void encode_tile(void *ctx, qvq_tile_out *tp)
{
	encode_ctx *c = ctx;
	const wc_qvq_write_input *in = c->in;
	uint32_t ib = c->layout.elem_size;
	size_t raw = (size_t)tp->nidx * ib;
	uint8_t *idx = malloc(raw + 1), *rgb = malloc((size_t)tp->dsize + 1);
	size_t cap = wc_tile_encode_bound(c->layout, raw, c->chunk);
	tp->payload = malloc(cap);
	if (!idx || !rgb || !tp->payload) {
		tp->err = WC_E_NOMEM;
		snprintf(tp->why, sizeof tp->why, "no memory for tile of %u images", tp->count);
		goto out;
	}
	const uint16_t *src = in->indices + tp->idx_first;
	for (uint32_t j = 0; j < tp->nidx; j++) {
		if (ib == 1)
			idx[j] = (uint8_t)src[j];
		else
			wc_put_u16(idx + 2 * j, src[j]);
	}
	size_t len = 0;
	tp->err = wc_tile_encode(c->layout, idx, raw, c->plan, c->chunk, tp->payload, cap, &len,
				 NULL);
	if (tp->err) {
		snprintf(tp->why, sizeof tp->why, "tile codec: %s", wc_last_detail());
		goto out;
	}
	tp->csize = len;
	tp->chash = wc_xxh3_64(tp->payload, len);
	const uint8_t *ip = idx;
	uint8_t *op = rgb;
	for (uint32_t i = tp->first; i < tp->first + tp->count; i++) {
		uint32_t w = in->dims[2 * i], h = in->dims[2 * i + 1];
		tp->err = wc_qvq_gather(in->codebook, in->entries, in->patch_h, in->patch_w, 3, ip,
					ib, w, h, op);
		if (tp->err) {
			snprintf(tp->why, sizeof tp->why, "image %u: %s", i, wc_last_detail());
			goto out;
		}
		ip += wc_qvq_patches(w, h, in->patch_w, in->patch_h) * ib;
		op += (size_t)w * h * 3;
	}
	tp->dhash = wc_xxh3_64(rgb, tp->dsize);
out:
	free(idx);
	free(rgb);
}

/* Check the codebook mode's input: codebook and indices (the images as
 * qvq_write_check_images). */
static wc_err check_input(const wc_qvq_write_input *in, uint64_t *nidx_total)
{
	if (in->entries < 1 || in->entries > WC_QVQ_MAX_ENTRIES || !in->codebook)
		return wc_fail(WC_E_INVAL, "qvq: %u codebook entries (1..%u)", in->entries,
			       WC_QVQ_MAX_ENTRIES);
	if (in->patch_h < 1 || in->patch_h > WC_QVQ_MAX_PATCH || in->patch_w < 1 ||
	    in->patch_w > WC_QVQ_MAX_PATCH)
		return wc_fail(WC_E_INVAL, "qvq: patch %ux%u", in->patch_h, in->patch_w);
	wc_err e = qvq_write_check_images(in);
	if (e)
		return e;
	uint64_t n = 0;
	for (uint32_t i = 0; i < in->nimages; i++)
		n += wc_qvq_patches(in->dims[2 * i], in->dims[2 * i + 1], in->patch_w, in->patch_h);
	for (uint64_t j = 0; j < n; j++)
		if (in->indices[j] >= in->entries)
			return wc_fail(WC_E_INVAL, "qvq: index %u at %llu >= %u entries",
				       in->indices[j], (unsigned long long)j, in->entries);
	*nidx_total = n;
	return WC_OK;
}

/* Per-plane frequency tables over every index (plane order as the layout:
 * bytes -> the index; shuffle2 -> high byte, then low byte). A plane with
 * one symbol gets no table (the tile codec stores it CONST). */
static wc_err build_tables(const wc_qvq_write_input *in, uint64_t n, uint32_t ib,
			   wc_freqtab tabs[2], wc_plane_plan plan[2], uint32_t *ntables)
{
	uint64_t *hist = calloc(2 * 256, sizeof *hist);
	if (!hist)
		return wc_fail(WC_E_NOMEM, "qvq: no memory");
	for (uint64_t j = 0; j < n; j++) {
		uint16_t v = in->indices[j];
		if (ib == 1) {
			hist[v]++;
		} else {
			hist[v >> 8]++;
			hist[256 + (v & 0xff)]++;
		}
	}
	*ntables = 0;
	for (uint32_t p = 0; p < ib; p++) {
		unsigned present = 0;
		for (unsigned s = 0; s < 256; s++)
			present += hist[256 * p + s] != 0;
		plan[p] = (wc_plane_plan){NULL, WC_NO_TABLE, 0};
		/* rANS only where it pays: an order-0 entropy at least 1/16 below
		 * 8 bits (else RAW, which decodes at memcpy speed: fast decode is
		 * the point of a .qvq). */
		if (present < 2 || wc_entropy_bits(hist + 256 * p) > 7.5)
			continue;
		wc_err e = wc_freq_normalize(hist + 256 * p, &tabs[*ntables]);
		if (e) {
			free(hist);
			return wc_fail_context(e, "qvq: frequency table of plane %u", p);
		}
		plan[p].table = &tabs[*ntables];
		plan[p].table_id = *ntables;
		(*ntables)++;
	}
	free(hist);
	return WC_OK;
}

wc_err qvq_write_vq(const char *path, const wc_qvq_write_input *in, wc_qvq_write_stats *stats)
{
	uint64_t nidx = 0;
	wc_err e = check_input(in, &nidx);
	if (e)
		return e;
	uint32_t ib = in->entries <= 256 ? 1 : 2;
	uint32_t chunk = in->chunk_symbols ? in->chunk_symbols : WC_RANS_CHUNK_DEFAULT;
	uint32_t tile_bytes = in->tile_bytes ? in->tile_bytes : WC_QVQ_TILE_BYTES_DEFAULT;
	if (tile_bytes > WC_QVQ_MAX_TILE_BYTES)
		tile_bytes = WC_QVQ_MAX_TILE_BYTES;
	encode_ctx c = {.in = in, .chunk = chunk, .codebook = in->codebook};
	c.layout = ib == 1 ? (wc_layout){WC_LAYOUT_BYTES, 1, 1} : (wc_layout){WC_LAYOUT_SHUFFLE, 2, 2};
	wc_freqtab tabs[2];
	uint32_t ntables = 0;
	if ((e = build_tables(in, nidx, ib, tabs, c.plan, &ntables)))
		return e;

	/* Group images into tiles. */
	qvq_tile_out *tiles = calloc(in->nimages, sizeof *tiles);
	if (!tiles)
		return wc_fail(WC_E_NOMEM, "qvq: no memory");
	uint32_t ntiles = qvq_write_group_tiles(in, tile_bytes, tiles);
	uint64_t ipos = 0;
	for (uint32_t t = 0; t < ntiles; t++) {
		tiles[t].idx_first = ipos;
		for (uint32_t i = tiles[t].first; i < tiles[t].first + tiles[t].count; i++)
			tiles[t].nidx += (uint32_t)wc_qvq_patches(in->dims[2 * i], in->dims[2 * i + 1], in->patch_w,
								 in->patch_h);
		ipos += tiles[t].nidx;
	}

	e = qvq_write_encode_tiles(in, tiles, ntiles, encode_tile, &c);

	if (!e) {
		wc_qvq_header h = {
			.version = WC_QVQ_VERSION_VQ, .mode = WC_QVQ_MODE_VQ, .patch_h = in->patch_h,
			.patch_w = in->patch_w, .channels = 3, .index_bytes = (uint8_t)ib, .entries = in->entries,
			.chunk_symbols = chunk,
		};
		e = qvq_write_archive(path, in, h, in->codebook,
				      (uint64_t)in->entries * in->patch_h * in->patch_w * 3, tabs, ntables, tiles,
				      ntiles, stats);
	}
	if (!e && stats)
		stats->index_bytes = nidx * ib;
	for (uint32_t t = 0; t < ntiles; t++)
		free(tiles[t].payload);
	free(tiles);
	return e;
}
