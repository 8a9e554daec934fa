/* qvq_write_archive.c - what every mode's writer shares
 * (qvq_write_archive.h). */
#include "qvq/qvq_write_archive.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/atomic_file.h"
#include "core/fileio.h"
#include "core/hash.h"
#include "core/le.h"
#include "core/limits.h"
#include "qvq/qvq.h"
#include "qvq/qvq_names.h"
#include "qvq/qvq_parallel.h"

wc_err qvq_write_check_images(const wc_qvq_write_input *in)
{
	if (in->nimages < 1 || in->nimages > WC_QVQ_MAX_IMAGES)
		return wc_fail(WC_E_INVAL, "qvq: %u images (1..%u)", in->nimages, WC_QVQ_MAX_IMAGES);
	if (in->nlabels > WC_QVQ_MAX_LABELS)
		return wc_fail(WC_E_INVAL, "qvq: %u labels (limit %u)", in->nlabels,
			       WC_QVQ_MAX_LABELS);
	for (uint32_t l = 0; l < in->nlabels; l++)
		if (strchr(in->label_names[l], '\n'))
			return wc_fail(WC_E_INVAL, "qvq: label \"%s\" holds a newline",
				       in->label_names[l]);
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
	}
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
	return e;
}

uint32_t qvq_write_group_tiles(const wc_qvq_write_input *in, uint32_t tile_bytes, qvq_tile_out *tiles)
{
	uint32_t ntiles = 0;
	for (uint32_t i = 0; i < in->nimages; i++) {
		uint32_t d = in->dims[2 * i] * in->dims[2 * i + 1] * 3;
		qvq_tile_out *tp = ntiles ? &tiles[ntiles - 1] : NULL;
		if (!tp || (uint64_t)tp->dsize + d > tile_bytes) {
			tp = &tiles[ntiles++];
			tp->first = i;
		}
		tp->count++;
		tp->dsize += d;
	}
	return ntiles;
}

typedef struct encode_group {
	qvq_tile_out *tiles;
	void (*encode)(void *ctx, qvq_tile_out *tp);
	void *ctx;
} encode_group;

static void encode_slice(void *arg, unsigned slice, size_t begin, size_t end)
{
	(void)slice;
	encode_group *g = arg;
	for (size_t t = begin; t < end; t++)
		g->encode(g->ctx, &g->tiles[t]);
}

wc_err qvq_write_encode_tiles(const wc_qvq_write_input *in, qvq_tile_out *tiles, uint32_t ntiles,
			      void (*encode)(void *ctx, qvq_tile_out *tp), void *ctx)
{
	const unsigned threads = in->threads ? in->threads : wc_cpu_count();
	const uint32_t group = 256;
	wc_err e = WC_OK;
	for (uint32_t t0 = 0; t0 < ntiles && !e; t0 += group) {
		const uint32_t cnt = ntiles - t0 < group ? ntiles - t0 : group;
		encode_group g = {tiles + t0, encode, ctx};
		wc_qvq_parallel(threads < cnt ? threads : cnt, cnt, encode_slice, &g);
		for (uint32_t t = t0; t < t0 + cnt && !e; t++)
			if (tiles[t].err)
				e = wc_fail(tiles[t].err, "qvq: tile %u: %s", t, tiles[t].why);
		if (in->progress)
			in->progress(in->progress_ctx, t0 + cnt, ntiles);
	}
	return e;
}

wc_err qvq_write_archive(const char *path, const wc_qvq_write_input *in, wc_qvq_header h,
			 const uint8_t *codebook, uint64_t codebook_len, const wc_freqtab *tabs, uint32_t ntables,
			 const qvq_tile_out *tiles, uint32_t ntiles, wc_qvq_write_stats *stats)
{
	wc_err e = WC_OK;
	json_t *meta = in->metadata ? json_deep_copy(in->metadata) : json_object();
	char *meta_text = NULL;
	uint8_t *images = NULL, *trec = NULL, *ftab = NULL;
	char *pool = NULL;
	wc_atomic_file out = {.fd = -1};
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
		const qvq_tile_out *tp = &tiles[t];
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
	h.header_size = WC_QVQ_HEADER_BYTES;
	h.nimages = in->nimages;
	h.ntiles = ntiles;
	h.ntables = ntables;
	struct { uint64_t *off; const void *data; uint64_t len; uint64_t *hash; } sec[] = {
		{&h.meta_off, meta_text, strlen(meta_text), &h.meta_hash},
		{&h.codebook_off, codebook ? (const void *)codebook : "", codebook_len, &h.codebook_hash},
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
		stats->pixels = 0;
		for (uint32_t i = 0; i < in->nimages; i++)
			stats->pixels += (uint64_t)in->dims[2 * i] * in->dims[2 * i + 1];
		stats->ntiles = ntiles;
	}
out:
	wc_atomic_abort(&out);
	if (in->tmp_path)
		in->tmp_path(NULL);
	json_decref(meta);
	free(meta_text);
	free(images);
	free(trec);
	free(ftab);
	free(pool);
	return e;
}
