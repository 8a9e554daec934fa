/*
 * qvq_reader.c - opening and validating .qvq archives (docs/FORMAT.md 6).
 *
 * Everything except the tile payloads is read and checked at open: the
 * header, each section's XXH3-64, the JSON metadata, the frequency tables,
 * the image and tile tables (tiles cover the images in order, sizes add up),
 * and every name. A payload is checked against its hash when read, and its
 * decoded bytes against theirs when decoded.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codec/tile_codec.h"
#include "core/fileio.h"
#include "core/hash.h"
#include "core/json_walk.h"
#include "qvq/qvq.h"
#include "qvq/qvq_internal.h"
#include "qvq/qvq_names.h"
#include "qvq/qvq_tx_tile.h"

/* Read a section into a fresh buffer (len + 1 bytes, NUL-terminated) and
 * check its hash. */
static wc_err read_section(wc_qvq *q, const char *what, uint64_t off, uint64_t len,
			   uint64_t hash, void **out)
{
	uint8_t *buf = malloc(len + 1);
	if (!buf)
		return wc_fail(WC_E_NOMEM, "qvq: no memory for the %s (%llu bytes)", what,
			       (unsigned long long)len);
	wc_err e = wc_pread_full(q->fd, buf, len, off, what);
	if (!e && wc_xxh3_64(buf, len) != hash)
		e = wc_fail(WC_E_CORRUPT, "qvq: %s checksum mismatch", what);
	if (e) {
		free(buf);
		return e;
	}
	buf[len] = 0;
	*out = buf;
	return WC_OK;
}

/* Members of the metadata other than "labels": none is used (a later
 * version's are ignored). */
static wc_err meta_member(void *ctx, const char *key, json_t *value)
{
	(void)ctx;
	(void)key;
	(void)value;
	return WC_OK;
}

/* One label: a one-line string; at most WC_QVQ_MAX_LABELS of them. */
static wc_err meta_label(void *ctx, size_t i, json_t *s)
{
	wc_qvq *q = ctx;
	if (i >= WC_QVQ_MAX_LABELS)
		return wc_fail(WC_E_FORMAT, "qvq: metadata \"labels\" holds more than %u strings", WC_QVQ_MAX_LABELS);
	const char *v = json_string_value(s);
	if (!v || strlen(v) != json_string_length(s) || strchr(v, '\n'))
		return wc_fail(WC_E_FORMAT, "qvq: label %zu is not a one-line string", i);
	if ((i & (i - 1)) == 0) { /* 0, 1, 2, 4, ...: room for twice as many */
		char **l = realloc(q->labels, (i ? 2 * i : 1) * sizeof *l);
		if (!l)
			return wc_fail(WC_E_NOMEM, "qvq: no memory");
		q->labels = l;
	}
	if (!(q->labels[i] = strdup(v)))
		return wc_fail(WC_E_NOMEM, "qvq: no memory");
	q->nlabels = (uint32_t)i + 1;
	return WC_OK;
}

/* The metadata (JSON, json_walk.h: one value at a time, each at most
 * WC_JSON_VALUE_MAX bytes, so a hostile file cannot make the reader build
 * a tree of many times its size): "labels", an array of one-line strings
 * or null. */
static wc_err parse_metadata(wc_qvq *q)
{
	return wc_json_walk_object((const char *)q->meta, q->h.meta_len, "qvq: metadata", meta_member, "labels",
				   meta_label, q);
}

static wc_err parse_images(wc_qvq *q, const uint8_t *rec, const uint8_t *pool)
{
	uint32_t n = q->h.nimages;
	uint64_t total = 0;
	for (uint32_t i = 0; i < n; i++) { /* bound every length before allocating */
		uint32_t nlen = wc_get_u32(rec + (size_t)i * WC_QVQ_IMAGE_RECORD + 16);
		if (nlen > WC_QVQ_MAX_NAME || nlen > q->h.strings_len)
			return wc_fail(WC_E_FORMAT, "qvq: image %u: name of %u bytes (limit %u, pool %u)",
				       i, nlen, WC_QVQ_MAX_NAME, q->h.strings_len);
		total += (uint64_t)nlen + 1;
	}
	q->images = calloc(n, sizeof *q->images);
	q->dims = malloc((size_t)n * 2 * sizeof *q->dims);
	q->names = malloc(total);
	if (!q->images || !q->dims || !q->names)
		return wc_fail(WC_E_NOMEM, "qvq: no memory for %u image records", n);
	char *np = q->names;
	for (uint32_t i = 0; i < n; i++) {
		const uint8_t *r = rec + (size_t)i * WC_QVQ_IMAGE_RECORD;
		wc_qvq_image *im = &q->images[i];
		im->width = wc_get_u32(r);
		im->height = wc_get_u32(r + 4);
		im->label = wc_get_u32(r + 8);
		uint32_t noff = wc_get_u32(r + 12), nlen = wc_get_u32(r + 16);
		if (wc_get_u32(r + 20) != 0)
			return wc_fail(WC_E_FORMAT, "qvq: image %u: reserved field not 0", i);
		if (im->width < 1 || im->width > WC_QVQ_MAX_SIDE || im->height < 1 ||
		    im->height > WC_QVQ_MAX_SIDE ||
		    (uint64_t)im->width * im->height * q->h.channels > WC_QVQ_MAX_IMAGE_BYTES)
			return wc_fail(WC_E_RANGE, "qvq: image %u: %ux%u pixels beyond the limits "
				       "(sides 1..%u, %u bytes)", i, im->width, im->height,
				       WC_QVQ_MAX_SIDE, WC_QVQ_MAX_IMAGE_BYTES);
		if (im->label != WC_QVQ_NO_LABEL && im->label >= q->nlabels)
			return wc_fail(WC_E_FORMAT, "qvq: image %u: label %u, only %u labels", i,
				       im->label, q->nlabels);
		if (noff > q->h.strings_len || nlen > q->h.strings_len - noff)
			return wc_fail(WC_E_FORMAT, "qvq: image %u: name [%u, +%u) outside the string "
				       "pool (%u bytes)", i, noff, nlen, q->h.strings_len);
		wc_err e = wc_qvq_name_check((const char *)pool + noff, nlen);
		if (e)
			return wc_fail_context(e, "image %u", i);
		memcpy(np, pool + noff, nlen);
		np[nlen] = 0;
		im->name = np;
		np += nlen + 1;
		if (i > 0 && strcmp(q->images[i - 1].name, im->name) >= 0)
			return wc_fail(WC_E_FORMAT, "qvq: image %u: names not strictly sorted", i);
		q->dims[2 * i] = im->width;
		q->dims[2 * i + 1] = im->height;
	}
	/* The names the mount shows must be distinct and not clash with directories. */
	q->shown = calloc(n, sizeof *q->shown);
	if (!q->shown)
		return wc_fail(WC_E_NOMEM, "qvq: no memory");
	for (uint32_t i = 0; i < n; i++)
		if (!(q->shown[i] = wc_qvq_ppm_name(q->images[i].name)))
			return wc_fail(WC_E_NOMEM, "qvq: no memory");
	return wc_qvq_names_unique((const char *const *)q->shown, n);
}

static wc_err parse_tiles(wc_qvq *q, const uint8_t *rec)
{
	uint32_t n = q->h.ntiles, next = 0;
	uint32_t ib = q->h.index_bytes;
	uint64_t voff = 0;
	q->tiles = calloc(n, sizeof *q->tiles);
	if (!q->tiles)
		return wc_fail(WC_E_NOMEM, "qvq: no memory for %u tiles", n);
	for (uint32_t t = 0; t < n; t++) {
		const uint8_t *r = rec + (size_t)t * WC_QVQ_TILE_RECORD;
		wc_qvq_tile *tl = &q->tiles[t];
		tl->coff = wc_get_u64(r);
		tl->csize = wc_get_u32(r + 8);
		tl->dsize = wc_get_u32(r + 12);
		tl->first_image = wc_get_u32(r + 16);
		tl->nimages = wc_get_u32(r + 20);
		tl->nindices = wc_get_u32(r + 24);
		tl->chash = wc_get_u64(r + 32);
		tl->dhash = wc_get_u64(r + 40);
		tl->voff = voff;
		if (wc_get_u32(r + 28) != 0)
			return wc_fail(WC_E_FORMAT, "qvq: tile %u: reserved field not 0", t);
		if (tl->first_image != next || tl->nimages < 1 ||
		    tl->nimages > q->h.nimages - next)
			return wc_fail(WC_E_FORMAT, "qvq: tile %u: images [%u, +%u) do not follow the "
				       "previous tile's (next image %u of %u)", t, tl->first_image,
				       tl->nimages, next, q->h.nimages);
		uint64_t dsize = 0, nidx = 0;
		const int tx = q->h.mode == WC_QVQ_MODE_DCT;
		for (uint32_t i = tl->first_image; i < tl->first_image + tl->nimages; i++) {
			wc_qvq_image *im = &q->images[i];
			im->tile = t;
			im->tile_off = (uint32_t)dsize; /* < WC_QVQ_MAX_TILE_BYTES, checked below */
			dsize += (uint64_t)im->width * im->height * q->h.channels;
			if (tx) { /* symbols of its stream */
				qvq_tx_layout L;
				qvq_tx_image_layout(im->width, im->height, &L);
				nidx += L.nsym;
			} else {
				nidx += wc_qvq_patches(im->width, im->height, q->h.patch_w, q->h.patch_h);
			}
			if (dsize > WC_QVQ_MAX_TILE_BYTES)
				return wc_fail(WC_E_RANGE, "qvq: tile %u decodes to more than %u bytes",
					       t, WC_QVQ_MAX_TILE_BYTES);
		}
		if (dsize != tl->dsize || nidx != tl->nindices)
			return wc_fail(WC_E_FORMAT, "qvq: tile %u: %u bytes / %u indices recorded, its "
				       "images need %llu / %llu", t, tl->dsize, tl->nindices,
				       (unsigned long long)dsize, (unsigned long long)nidx);
		uint64_t least = tx ? 4ull * tl->nimages : WC_TILE_HEADER_BYTES(q->layout.nplanes);
		uint64_t bound = tx ? qvq_tx_tile_bound(q->dims + 2 * (size_t)tl->first_image, tl->nimages,
							q->h.chunk_symbols)
				    : wc_tile_encode_bound(q->layout, (size_t)nidx * ib, q->h.chunk_symbols);
		if (tl->csize < least || tl->csize > bound)
			return wc_fail(WC_E_FORMAT, "qvq: tile %u: payload of %u bytes outside [%llu, %llu]",
				       t, tl->csize, (unsigned long long)least, (unsigned long long)bound);
		if (tl->coff < q->h.header_size || tl->coff > q->h.file_size ||
		    tl->csize > q->h.file_size - tl->coff)
			return wc_fail(WC_E_FORMAT, "qvq: tile %u: payload [%llu, +%u) outside the file",
				       t, (unsigned long long)tl->coff, tl->csize);
		next += tl->nimages;
		voff += tl->dsize;
	}
	if (next != q->h.nimages)
		return wc_fail(WC_E_FORMAT, "qvq: tiles hold %u of %u images", next, q->h.nimages);
	return WC_OK;
}

static uint32_t src_ntiles(const wc_tile_source *s) { return ((const wc_qvq *)s)->h.ntiles; }
static uint32_t src_dsize(const wc_tile_source *s, uint32_t t)
{
	const wc_qvq *q = (const wc_qvq *)s;
	return t < q->h.ntiles ? q->tiles[t].dsize : 0;
}
static uint32_t src_csize(const wc_tile_source *s, uint32_t t)
{
	const wc_qvq *q = (const wc_qvq *)s;
	return t < q->h.ntiles ? q->tiles[t].csize : 0;
}
static wc_err src_read(const wc_tile_source *s, uint32_t t, uint8_t *buf)
{
	return wc_qvq_read_payload((const wc_qvq *)s, t, buf);
}
static void src_describe(const wc_tile_source *s, uint32_t t, wc_tile_job *job)
{
	wc_qvq_describe_job((const wc_qvq *)s, t, job);
}
static void src_retain(wc_tile_source *s) { wc_qvq_retain((wc_qvq *)s); }
static void src_release(wc_tile_source *s) { wc_qvq_release((wc_qvq *)s); }

/* The decode job kinds of image tiles (qvq_job.h), registered on open. */
static const wc_job_kind_ops qvq_job_kind = {.name = "qvq", .cpu_decode = wc_qvq_decode_job};
static const wc_job_kind_ops qvq_tx_job_kind = {.name = "qvq-transform", .cpu_decode = wc_qvq_tx_decode_job};

static const wc_tile_source_ops qvq_source_ops = {
	.ntiles = src_ntiles, .tile_dsize = src_dsize, .tile_csize = src_csize,
	.read_payload = src_read, .describe_job = src_describe,
	.retain = src_retain, .release = src_release,
};

static void qvq_free(wc_qvq *q)
{
	if (q->fd >= 0)
		close(q->fd);
	free(q->meta);
	free(q->codebook);
	free(q->tables);
	free(q->dtabs);
	free(q->images);
	free(q->dims);
	free(q->names);
	free(q->tiles);
	free(q->jobs);
	for (uint32_t i = 0; q->labels && i < q->nlabels; i++)
		free(q->labels[i]);
	free(q->labels);
	for (uint32_t i = 0; q->shown && i < q->h.nimages; i++)
		free(q->shown[i]);
	free(q->shown);
	free(q->labels_txt);
	free(q);
}

wc_err wc_qvq_open(const char *path, wc_qvq **out)
{
	*out = NULL;
	wc_qvq *q = calloc(1, sizeof *q);
	if (!q)
		return wc_fail(WC_E_NOMEM, "qvq: no memory");
	uint8_t *images = NULL, *tiles = NULL, *pool = NULL;
	wc_err e = wc_open_regular(path, &q->fd);
	if (e) {
		char why[600];
		snprintf(why, sizeof why, "%s", wc_last_detail());
		e = wc_fail(e, "qvq: cannot open %s", why);
		goto fail;
	}
	struct stat st;
	if (fstat(q->fd, &st) != 0) {
		e = wc_fail(WC_E_IO, "qvq: stat %s: %s", path, strerror(errno));
		goto fail;
	}
	if ((uint64_t)st.st_size < WC_QVQ_HEADER_BYTES) {
		e = wc_fail(WC_E_FORMAT, "qvq: %s: %llu bytes, shorter than the header", path,
			    (unsigned long long)st.st_size);
		goto fail;
	}
	uint8_t hdr[WC_QVQ_HEADER_BYTES];
	if ((e = wc_pread_full(q->fd, hdr, sizeof hdr, 0, "header")) ||
	    (e = wc_qvq_header_parse(hdr, (uint64_t)st.st_size, &q->h)))
		goto fail;
	q->layout = q->h.index_bytes == 1 ? (wc_layout){WC_LAYOUT_BYTES, 1, 1}
					  : (wc_layout){WC_LAYOUT_SHUFFLE, 2, 2};
	uint64_t cbsize = (uint64_t)q->h.entries * q->h.patch_h * q->h.patch_w * q->h.channels;
	if ((e = read_section(q, "metadata", q->h.meta_off, q->h.meta_len, q->h.meta_hash,
			      (void **)&q->meta)) ||
	    (e = read_section(q, "codebook", q->h.codebook_off, cbsize, q->h.codebook_hash,
			      (void **)&q->codebook)) ||
	    (e = read_section(q, "frequency tables", q->h.tables_off,
			      (uint64_t)q->h.ntables * WC_QVQ_FREQTAB_BYTES, q->h.tables_hash,
			      (void **)&pool)))
		goto fail;
	q->tables = calloc(q->h.ntables ? q->h.ntables : 1, sizeof *q->tables);
	if (!q->tables) { e = wc_fail(WC_E_NOMEM, "qvq: no memory"); goto fail; }
	for (uint32_t t = 0; t < q->h.ntables; t++) {
		for (unsigned s = 0; s < 256; s++)
			q->tables[t].freq[s] = wc_get_u16(pool + t * WC_QVQ_FREQTAB_BYTES + 2 * s);
		if ((e = wc_freq_validate(&q->tables[t]))) {
			e = wc_fail_context(e, "qvq: frequency table %u", t);
			goto fail;
		}
	}
	free(pool);
	pool = NULL;
	if (q->h.mode == WC_QVQ_MODE_DCT) { /* a table a plane, their decoding tables */
		if (q->h.ntables != QVQ_TX_PLANES) {
			e = wc_fail(WC_E_FORMAT, "qvq: transform mode with %u frequency tables (%u)",
				    q->h.ntables, QVQ_TX_PLANES);
			goto fail;
		}
		if (!(q->dtabs = malloc(QVQ_TX_PLANES * sizeof *q->dtabs))) {
			e = wc_fail(WC_E_NOMEM, "qvq: no memory");
			goto fail;
		}
		for (unsigned p = 0; p < QVQ_TX_PLANES; p++) {
			wc_rans_dtab_build(&q->tables[p], &q->dtabs[p]);
			q->dtab_of[p] = &q->dtabs[p];
		}
	}
	if ((e = parse_metadata(q)) ||
	    (e = read_section(q, "image table", q->h.images_off,
			      (uint64_t)q->h.nimages * WC_QVQ_IMAGE_RECORD, q->h.images_hash,
			      (void **)&images)) ||
	    (e = read_section(q, "tile table", q->h.tiles_off,
			      (uint64_t)q->h.ntiles * WC_QVQ_TILE_RECORD, q->h.tiles_hash,
			      (void **)&tiles)) ||
	    (e = read_section(q, "string pool", q->h.strings_off, q->h.strings_len,
			      q->h.strings_hash, (void **)&pool)) ||
	    (e = parse_images(q, images, pool)) || (e = parse_tiles(q, tiles)) ||
	    (e = wc_qvq_files_init(q)) || (e = wc_job_kind_register(WC_JOB_VQ, &qvq_job_kind)) ||
	    (e = wc_job_kind_register(WC_JOB_TX, &qvq_tx_job_kind)))
		goto fail;
	free(images);
	free(tiles);
	free(pool);
	q->src.ops = &qvq_source_ops;
	q->src.id = wc_tile_source_new_id();
	if (!(q->jobs = calloc(q->h.ntiles ? q->h.ntiles : 1, sizeof *q->jobs))) {
		e = wc_fail(WC_E_NOMEM, "qvq: no memory for %u tiles", q->h.ntiles);
		goto fail_freed;
	}
	for (uint32_t t = 0; t < q->h.ntiles; t++)
		q->jobs[t] = (wc_qvq_job){
			.codebook = q->codebook, .entries = q->h.entries, .patch_h = (uint8_t)q->h.patch_h,
			.patch_w = (uint8_t)q->h.patch_w, .channels = (uint8_t)q->h.channels,
			.index_bytes = (uint8_t)q->h.index_bytes, .nimages = q->tiles[t].nimages,
			.dims = q->dims + 2 * (size_t)q->tiles[t].first_image, .nindices = q->tiles[t].nindices,
			.codebook_key = q->src.id, .dtabs = q->dtabs ? q->dtab_of : NULL,
			.step_luma = q->h.step_luma, .step_chroma = q->h.step_chroma,
		};
	atomic_init(&q->refs, 1);
	*out = q;
	return WC_OK;
fail:
	free(images);
	free(tiles);
	free(pool);
fail_freed:
	qvq_free(q);
	return e;
}

void wc_qvq_retain(wc_qvq *q) { atomic_fetch_add(&q->refs, 1); }
void wc_qvq_release(wc_qvq *q)
{
	if (q && atomic_fetch_sub(&q->refs, 1) == 1)
		qvq_free(q);
}

wc_tile_source *wc_qvq_source(wc_qvq *q) { return &q->src; }
uint64_t wc_qvq_id(const wc_qvq *q) { return q->src.id; }
const wc_qvq_header *wc_qvq_header_of(const wc_qvq *q) { return &q->h; }
const uint8_t *wc_qvq_codebook(const wc_qvq *q, uint32_t *entries)
{
	if (entries)
		*entries = q->h.entries;
	return q->codebook;
}
const char *wc_qvq_metadata(const wc_qvq *q) { return q->meta; }
uint32_t wc_qvq_nimages(const wc_qvq *q) { return q->h.nimages; }
const wc_qvq_image *wc_qvq_image_at(const wc_qvq *q, uint32_t i)
{
	return i < q->h.nimages ? &q->images[i] : NULL;
}
uint32_t wc_qvq_ntiles(const wc_qvq *q) { return q->h.ntiles; }
const wc_qvq_tile *wc_qvq_tile_at(const wc_qvq *q, uint32_t t)
{
	return t < q->h.ntiles ? &q->tiles[t] : NULL;
}
const char *const *wc_qvq_labels(const wc_qvq *q, uint32_t *nlabels)
{
	if (nlabels)
		*nlabels = q->nlabels;
	return q->nlabels ? (const char *const *)q->labels : NULL;
}

wc_err wc_qvq_read_payload(const wc_qvq *q, uint32_t t, uint8_t *buf)
{
	if (t >= q->h.ntiles)
		return wc_fail(WC_E_RANGE, "qvq: tile %u of %u", t, q->h.ntiles);
	const wc_qvq_tile *tl = &q->tiles[t];
	wc_err e = wc_pread_full(q->fd, buf, tl->csize, tl->coff, "tile payload");
	if (e)
		return wc_fail_context(e, "tile %u", t);
	if (wc_xxh3_64(buf, tl->csize) != tl->chash)
		return wc_fail(WC_E_CORRUPT, "qvq: tile %u payload checksum mismatch", t);
	return WC_OK;
}

void wc_qvq_describe_job(const wc_qvq *q, uint32_t t, wc_tile_job *job)
{
	const wc_qvq_tile *tl = &q->tiles[t];
	job->kind = q->h.mode == WC_QVQ_MODE_DCT ? WC_JOB_TX : WC_JOB_VQ;
	job->kind_data = &q->jobs[t];
	job->layout = q->layout;
	job->chunk_symbols = q->h.chunk_symbols;
	job->tables = q->tables;
	job->ntables = q->h.ntables;
	job->table_key = q->src.id;
	job->dhash = tl->dhash;
}

wc_err wc_qvq_decode_tile(const wc_qvq *q, uint32_t t, uint8_t *out)
{
	if (t >= q->h.ntiles)
		return wc_fail(WC_E_RANGE, "qvq: tile %u of %u", t, q->h.ntiles);
	const wc_qvq_tile *tl = &q->tiles[t];
	uint8_t *payload = malloc(tl->csize);
	if (!payload)
		return wc_fail(WC_E_NOMEM, "qvq: no memory for a %u-byte payload", tl->csize);
	wc_err e = wc_qvq_read_payload(q, t, payload);
	if (!e) {
		wc_tile_job job;
		memset(&job, 0, sizeof job);
		wc_qvq_describe_job(q, t, &job);
		job.payload = payload;
		job.payload_size = tl->csize;
		job.out = out;
		job.out_size = tl->dsize;
		e = job.kind == WC_JOB_TX ? wc_qvq_tx_decode_job(&job) : wc_qvq_decode_job(&job);
		if (e)
			e = wc_fail_context(e, "tile %u", t);
	}
	free(payload);
	return e;
}
