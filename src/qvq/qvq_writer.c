/* qvq_writer.c - writing .qvq archives: tile grouping, index coding, sections. */
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
#include "core/limits.h"
#include "qvq/qvq.h"
#include "qvq/qvq_names.h"
#include "qvq/qvq_parallel.h"

typedef struct tile_plan {
	uint32_t first, count;   /* images */
	uint64_t idx_first;      /* first index in in->indices */
	uint32_t nidx, dsize;
	uint8_t *payload;
	size_t csize;
	uint64_t chash, dhash;
	wc_err err;
	char why[256];
} tile_plan;

typedef struct encode_ctx {
	const wc_qvq_write_input *in;
	tile_plan *tiles;
	wc_layout layout;
	wc_plane_plan plan[2];
	uint32_t chunk;
	const uint8_t *codebook;
} encode_ctx;

/* Encode tile t: serialize its indices, tile-codec them, and compute the
 * hash of what the decoder must produce (the codebook gather). */
static void encode_tile(encode_ctx *c, tile_plan *tp)
{
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

static void encode_slice(void *ctx, unsigned slice, size_t begin, size_t end)
{
	(void)slice;
	encode_ctx *c = ctx;
	for (size_t t = begin; t < end; t++)
		encode_tile(c, &c->tiles[t]);
}

/* Check names, geometry and indices before anything is written. */
static wc_err check_input(const wc_qvq_write_input *in, uint64_t *nidx_total)
{
	if (in->entries < 1 || in->entries > WC_QVQ_MAX_ENTRIES || !in->codebook)
		return wc_fail(WC_E_INVAL, "qvq: %u codebook entries (1..%u)", in->entries,
			       WC_QVQ_MAX_ENTRIES);
	if (in->patch_h < 1 || in->patch_h > WC_QVQ_MAX_PATCH || in->patch_w < 1 ||
	    in->patch_w > WC_QVQ_MAX_PATCH)
		return wc_fail(WC_E_INVAL, "qvq: patch %ux%u", in->patch_h, in->patch_w);
	if (in->nimages < 1 || in->nimages > WC_QVQ_MAX_IMAGES)
		return wc_fail(WC_E_INVAL, "qvq: %u images (1..%u)", in->nimages, WC_QVQ_MAX_IMAGES);
	if (in->nlabels > WC_QVQ_MAX_LABELS)
		return wc_fail(WC_E_INVAL, "qvq: %u labels (limit %u)", in->nlabels,
			       WC_QVQ_MAX_LABELS);
	for (uint32_t l = 0; l < in->nlabels; l++)
		if (strchr(in->label_names[l], '\n'))
			return wc_fail(WC_E_INVAL, "qvq: label \"%s\" holds a newline",
				       in->label_names[l]);
	uint64_t n = 0;
	for (uint32_t i = 0; i < in->nimages; i++) {
		wc_err e = wc_qvq_name_check(in->names[i], strlen(in->names[i]));
		if (e)
			return wc_fail_context(WC_E_INVAL, "qvq: cannot store image %u", i);
		if (i > 0 && strcmp(in->names[i - 1], in->names[i]) >= 0)
			return wc_fail(WC_E_INVAL, "qvq: image names not strictly sorted at \"%s\"",
				       in->names[i]);
		uint32_t w = in->dims[2 * i], h = in->dims[2 * i + 1];
		if (w < 1 || h < 1 || w > WC_QVQ_MAX_SIDE || h > WC_QVQ_MAX_SIDE ||
		    (uint64_t)w * h * 3 > WC_QVQ_MAX_IMAGE_BYTES)
			return wc_fail(WC_E_INVAL, "qvq: image \"%s\": %ux%u beyond the limits",
				       in->names[i], w, h);
		if (in->labels && in->labels[i] != WC_QVQ_NO_LABEL && in->labels[i] >= in->nlabels)
			return wc_fail(WC_E_INVAL, "qvq: image \"%s\": label %u of %u", in->names[i],
				       in->labels[i], in->nlabels);
		n += wc_qvq_patches(w, h, in->patch_w, in->patch_h);
	}
	for (uint64_t j = 0; j < n; j++)
		if (in->indices[j] >= in->entries)
			return wc_fail(WC_E_INVAL, "qvq: index %u at %llu >= %u entries",
				       in->indices[j], (unsigned long long)j, in->entries);
	char **shown = calloc(in->nimages, sizeof *shown);
	if (!shown)
		return wc_fail(WC_E_NOMEM, "qvq: no memory");
	wc_err e = WC_OK;
	for (uint32_t i = 0; i < in->nimages && !e; i++)
		if (!(shown[i] = wc_qvq_ppm_name(in->names[i])))
			e = wc_fail(WC_E_NOMEM, "qvq: no memory");
	if (!e && (e = wc_qvq_names_unique((const char *const *)shown, in->nimages)))
		e = wc_fail_context(WC_E_INVAL, "qvq: image names clash once shown as .ppm");
	for (uint32_t i = 0; i < in->nimages; i++)
		free(shown[i]);
	free(shown);
	*nidx_total = n;
	return e;
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

wc_err wc_qvq_write(const char *path, const wc_qvq_write_input *in, wc_qvq_write_stats *stats)
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
	tile_plan *tiles = calloc(in->nimages, sizeof *tiles);
	if (!tiles)
		return wc_fail(WC_E_NOMEM, "qvq: no memory");
	uint32_t ntiles = 0;
	uint64_t ipos = 0;
	for (uint32_t i = 0; i < in->nimages; i++) {
		uint32_t w = in->dims[2 * i], h = in->dims[2 * i + 1];
		uint32_t d = w * h * 3;
		uint32_t np = (uint32_t)wc_qvq_patches(w, h, in->patch_w, in->patch_h);
		tile_plan *tp = ntiles ? &tiles[ntiles - 1] : NULL;
		if (!tp || (uint64_t)tp->dsize + d > tile_bytes) {
			tp = &tiles[ntiles++];
			tp->first = i;
			tp->idx_first = ipos;
		}
		tp->count++;
		tp->dsize += d;
		tp->nidx += np;
		ipos += np;
	}
	c.tiles = tiles;

	/* Encode every tile, in parallel, in groups so progress can be shown. */
	unsigned threads = in->threads ? in->threads : wc_cpu_count();
	const uint32_t group = 256;
	for (uint32_t t0 = 0; t0 < ntiles && !e; t0 += group) {
		uint32_t cnt = ntiles - t0 < group ? ntiles - t0 : group;
		encode_ctx sub = c;
		sub.tiles = tiles + t0;
		wc_qvq_parallel(threads < cnt ? threads : cnt, cnt, encode_slice, &sub);
		for (uint32_t t = t0; t < t0 + cnt && !e; t++)
			if (tiles[t].err)
				e = wc_fail(tiles[t].err, "qvq: tile %u: %s", t, tiles[t].why);
		if (in->progress)
			in->progress(in->progress_ctx, t0 + cnt, ntiles);
	}

	/* Sections. */
	json_t *meta = in->metadata ? json_deep_copy(in->metadata) : json_object();
	char *meta_text = NULL;
	uint8_t *images = NULL, *trec = NULL, *ftab = NULL;
	char *pool = NULL;
	wc_atomic_file out = {.fd = -1};
	if (e)
		goto out;
	if (!meta || !json_is_object(meta)) {
		e = wc_fail(WC_E_INVAL, "qvq: metadata must be a JSON object");
		goto out;
	}
	json_object_set_new(meta, "format", json_string("qvq"));
	if (in->nlabels) {
		json_t *arr = json_array();
		for (uint32_t l = 0; l < in->nlabels; l++)
			json_array_append_new(arr, json_string(in->label_names[l]));
		json_object_set_new(meta, "labels", arr);
	} else {
		json_object_del(meta, "labels");
	}
	meta_text = json_dumps(meta, JSON_INDENT(1) | JSON_SORT_KEYS);
	images = calloc(in->nimages, WC_QVQ_IMAGE_RECORD);
	trec = calloc(ntiles, WC_QVQ_TILE_RECORD);
	ftab = calloc(ntables ? ntables : 1, WC_QVQ_FREQTAB_BYTES);
	uint64_t pool_len = 0;
	for (uint32_t i = 0; i < in->nimages; i++)
		pool_len += strlen(in->names[i]);
	pool = malloc(pool_len + 1);
	if (!meta_text || !images || !trec || !ftab || !pool) {
		e = wc_fail(WC_E_NOMEM, "qvq: no memory for the archive's tables");
		goto out;
	}
	if (pool_len > WC_QVQ_MAX_STRINGS || strlen(meta_text) > WC_QVQ_MAX_META) {
		e = wc_fail(WC_E_INVAL, "qvq: names (%llu bytes) or metadata beyond the limits",
			    (unsigned long long)pool_len);
		goto out;
	}
	uint64_t po = 0;
	for (uint32_t i = 0; i < in->nimages; i++) {
		uint8_t *r = images + (size_t)i * WC_QVQ_IMAGE_RECORD;
		size_t nl = strlen(in->names[i]);
		wc_put_u32(r, in->dims[2 * i]);
		wc_put_u32(r + 4, in->dims[2 * i + 1]);
		wc_put_u32(r + 8, in->labels ? in->labels[i] : WC_QVQ_NO_LABEL);
		wc_put_u32(r + 12, (uint32_t)po);
		wc_put_u32(r + 16, (uint32_t)nl);
		memcpy(pool + po, in->names[i], nl);
		po += nl;
	}
	for (uint32_t t = 0; t < ntables; t++)
		for (unsigned s = 0; s < 256; s++)
			wc_put_u16(ftab + t * WC_QVQ_FREQTAB_BYTES + 2 * s, tabs[t].freq[s]);

	/* Temporary file next to the target. */
	if ((e = wc_atomic_create(&out, path)))
		goto out;
	if (in->tmp_path)
		in->tmp_path(out.tmp);
	uint64_t off = WC_QVQ_HEADER_BYTES, payload_bytes = 0;
	for (uint32_t t = 0; t < ntiles && !e; t++) {
		tile_plan *tp = &tiles[t];
		uint8_t *r = trec + (size_t)t * WC_QVQ_TILE_RECORD;
		wc_put_u64(r, off);
		wc_put_u32(r + 8, (uint32_t)tp->csize);
		wc_put_u32(r + 12, tp->dsize);
		wc_put_u32(r + 16, tp->first);
		wc_put_u32(r + 20, tp->count);
		wc_put_u32(r + 24, tp->nidx);
		wc_put_u64(r + 32, tp->chash);
		wc_put_u64(r + 40, tp->dhash);
		e = wc_pwrite_full(out.fd, tp->payload, tp->csize, off, out.tmp);
		off += tp->csize;
		payload_bytes += tp->csize;
	}
	wc_qvq_header h = {
		.version = WC_QVQ_VERSION, .header_size = WC_QVQ_HEADER_BYTES,
		.patch_h = in->patch_h, .patch_w = in->patch_w, .channels = 3,
		.index_bytes = (uint8_t)ib, .entries = in->entries, .nimages = in->nimages,
		.ntiles = ntiles, .chunk_symbols = chunk, .ntables = ntables,
	};
	struct { uint64_t *off; const void *data; uint64_t len; uint64_t *hash; } sec[] = {
		{&h.meta_off, meta_text, strlen(meta_text), &h.meta_hash},
		{&h.codebook_off, in->codebook, (uint64_t)in->entries * in->patch_h * in->patch_w * 3,
		 &h.codebook_hash},
		{&h.tables_off, ftab, (uint64_t)ntables * WC_QVQ_FREQTAB_BYTES, &h.tables_hash},
		{&h.images_off, images, (uint64_t)in->nimages * WC_QVQ_IMAGE_RECORD, &h.images_hash},
		{&h.tiles_off, trec, (uint64_t)ntiles * WC_QVQ_TILE_RECORD, &h.tiles_hash},
		{&h.strings_off, pool, pool_len, &h.strings_hash},
	};
	for (size_t s = 0; s < sizeof sec / sizeof sec[0] && !e; s++) {
		*sec[s].off = off;
		*sec[s].hash = wc_xxh3_64(sec[s].data, sec[s].len);
		e = wc_pwrite_full(out.fd, sec[s].data, sec[s].len, off, out.tmp);
		off += sec[s].len;
	}
	h.meta_len = (uint32_t)strlen(meta_text);
	h.strings_len = (uint32_t)pool_len;
	h.file_size = off;
	uint8_t hdr[WC_QVQ_HEADER_BYTES];
	wc_qvq_header_write(&h, hdr);
	if (!e)
		e = wc_pwrite_full(out.fd, hdr, sizeof hdr, 0, out.tmp);
	if (!e)
		e = wc_atomic_commit(&out);
	if (!e && stats) {
		stats->file_bytes = off;
		stats->payload_bytes = payload_bytes;
		stats->index_bytes = nidx * ib;
		stats->pixels = 0;
		for (uint32_t i = 0; i < in->nimages; i++)
			stats->pixels += (uint64_t)in->dims[2 * i] * in->dims[2 * i + 1];
		stats->ntiles = ntiles;
	}
out:
	wc_atomic_abort(&out);
	if (in->tmp_path)
		in->tmp_path(NULL);
	for (uint32_t t = 0; t < ntiles; t++)
		free(tiles[t].payload);
	free(tiles);
	json_decref(meta);
	free(meta_text);
	free(images);
	free(trec);
	free(ftab);
	free(pool);
	return e;
}
