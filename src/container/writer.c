/*
 * writer.c - packing a safetensors file into a .wcodec container.
 *
 * Tensors are coded in units: a tensor, or a run of consecutive small
 * tensors of one dtype that share one tile (docs/FORMAT.md 1.6; the unit's
 * first tensor carries it, the others point at it). Three passes over the
 * memory-mapped input, each parallel over tiles:
 *   1. histograms of every tensor-plane (tiles of one tensor add into it),
 *      then per tensor its sorted distinct values when there are at most
 *      65536 (a dictionary), kept where index planes plus the dictionary are
 *      estimated smaller than the byte planes (layout "dict");
 *   2. one frequency table per tensor-plane where rANS can pay for it; then
 *      encoding, in tile order through a bounded reorder window, so the
 *      payload section is written sequentially while workers run ahead;
 *   3. (opts->verify) reopening the written temporary file with the reader
 *      and decoding every tile against the input, before the rename.
 * The file is written as "OUT.tmp.XXXXXX", fsynced and renamed over OUT; on
 * any failure the temporary file is removed. This file runs the passes,
 * encodes and writes; writer_analyse.c decides units, layouts and tables;
 * writer_verify.c checks the written file (writer_impl.h).
 */
#include "container/writer_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>
#include <zstd.h>

#include "codec/tile_codec.h"
#include "config.h"
#include "container/format.h"
#include "container/safetensors.h"
#include "core/atomic_file.h"
#include "core/fileio.h"
#include "core/hash.h"
#include "core/limits.h"

/* Report progress of the current pass (bytes of it done) from the caller's thread. */
void wc_pk_report(packer *pk, uint64_t pass_bytes)
{
	if (!pk->opts->progress || !pthread_equal(pthread_self(), pk->caller))
		return;
	uint64_t d = pk->st->data_size;
	pk->opts->progress(pk->opts->progress_ctx, pk->passes_before * d + pass_bytes, pk->npasses * d);
}

/* ---- small helpers -------------------------------------------------- */

void wc_pk_fail(packer *pk, wc_err e)
{
	pthread_mutex_lock(&pk->lock);
	if (!pk->first_err) {
		pk->first_err = e;
		snprintf(pk->first_why, sizeof pk->first_why, "%s", wc_last_detail());
	}
	pthread_mutex_unlock(&pk->lock);
	atomic_store(&pk->failed, 1);
}

typedef struct pk_loop {
	packer *pk;
	void *(*fn)(void *);
} pk_loop;

static void pk_loop_one(void *ctx, size_t i)
{
	(void)i;
	pk_loop *l = ctx;
	l->fn(l->pk);
}

/* Run fn(pk) pk->threads times at once on the packer's pool, the caller
 * taking the first (threadpool.h), so progress is reported. */
void wc_pk_run(packer *pk, void *(*fn)(void *))
{
	pk_loop l = {pk, fn};
	wc_threadpool_run(pk->pool, pk_loop_one, &l, pk->threads);
}

/* ---- pass 2: encoding through the reorder window -------------------- */

static void *encode_worker(void *arg)
{
	packer *pk = arg;
	uint8_t *decoded = NULL; /* a lossy tile's decoded bytes, for its dhash */
	for (;;) {
		pthread_mutex_lock(&pk->lock);
		while (!pk->abort && pk->next_tile < pk->ntiles && pk->next_tile >= pk->written + pk->window)
			pthread_cond_wait(&pk->cond, &pk->lock);
		if (pk->abort || pk->next_tile >= pk->ntiles) {
			pthread_mutex_unlock(&pk->lock);
			free(decoded);
			return NULL;
		}
		uint32_t i = pk->next_tile++;
		slot *s = &pk->slots[i % pk->window];
		pthread_mutex_unlock(&pk->lock);

		const tile_plan *tp = &pk->tiles[i];
		const tensor_plan *t = &pk->tensors[tp->tensor];
		const uint8_t *src = t->data + tp->offset;
		memset(s->plane_bytes, 0, sizeof s->plane_bytes);
		if (t->use_dict)
			s->err = wc_tile_encode_dict(t->layout, src, tp->dsize, t->dict, t->dict_entries, t->plan,
						     pk->chunk, s->buf, pk->slot_cap, &s->len, s->plane_bytes);
		else
			s->err = wc_tile_encode(t->layout, src, tp->dsize, t->plan, pk->chunk, s->buf, pk->slot_cap,
						&s->len, s->plane_bytes);
		if (!s->err && t->lossy && !decoded && !(decoded = malloc(pk->tile_size)))
			s->err = wc_fail(WC_E_NOMEM, "out of memory");
		if (s->err) {
			snprintf(s->why, sizeof s->why, "tile %u of tensor \"%s\": %s", i, t->st->name, wc_last_detail());
		} else {
			s->chash = wc_xxh3_64(s->buf, s->len);
			if (t->lossy) { /* the index hashes what readers decode */
				wc_pk_lossy_tile(t, tp, decoded);
				s->dhash = wc_xxh3_64(decoded, wc_pk_tile_bytes(t, tp));
			} else {
				s->dhash = wc_xxh3_64(src, tp->dsize);
			}
		}
		pthread_mutex_lock(&pk->lock);
		s->ready = 1;
		pthread_cond_broadcast(&pk->cond);
		pthread_mutex_unlock(&pk->lock);
	}
}

/* Pass 2 on the packer's pool: iteration 0, on the caller's thread (it
 * takes its loop's first iteration, threadpool.h), is the writer, which
 * consumes tiles in order, appends payloads and fills the index; the
 * others are encoders, pk->threads of them, each taking the next tile
 * within the reorder window. */
typedef struct pass2 {
	packer *pk;
	int fd;
	const char *path;
	uint64_t off, prefix_len;
	wc_tile_info *index;
	wc_err err;
} pass2;

static void write_tiles(pass2 *w)
{
	packer *pk = w->pk;
	wc_err e = WC_OK;
	uint64_t done = 0, off = w->off;
	for (uint32_t i = 0; !e && i < pk->ntiles; i++) {
		slot *s = &pk->slots[i % pk->window];
		pthread_mutex_lock(&pk->lock);
		while (!s->ready)
			pthread_cond_wait(&pk->cond, &pk->lock);
		pthread_mutex_unlock(&pk->lock);
		const tile_plan *tp = &pk->tiles[i];
		tensor_plan *t = &pk->tensors[tp->tensor];
		if (s->err) {
			e = wc_fail(s->err, "%s", s->why);
		} else if (s->len > UINT32_MAX) {
			e = wc_fail(WC_E_RANGE, "tile %u: payload too large", i);
		} else {
			e = wc_pwrite_full(w->fd, s->buf, s->len, off, w->path);
			wc_tile_info *x = &w->index[i];
			x->voff = w->prefix_len + t->st->begin + tp->offset * (t->lossy ? t->lw : 1);
			x->coff = off;
			x->csize = (uint32_t)s->len;
			x->dsize = (uint32_t)wc_pk_tile_bytes(t, tp);
			x->tensor = tp->tensor;
			x->flags = 0;
			x->chash = s->chash;
			x->dhash = s->dhash;
			off += s->len;
			for (unsigned p = 0; p < t->layout.nplanes; p++)
				t->coded[p] += s->plane_bytes[p];
		}
		done += wc_pk_tile_bytes(t, tp);
		if (!e)
			wc_pk_report(pk, done);
		pthread_mutex_lock(&pk->lock);
		s->ready = 0;
		pk->written = i + 1;
		if (e)
			pk->abort = 1;
		pthread_cond_broadcast(&pk->cond);
		pthread_mutex_unlock(&pk->lock);
	}
	/* the encoders still waiting for room in the window stop */
	pthread_mutex_lock(&pk->lock);
	pk->abort = 1;
	pthread_cond_broadcast(&pk->cond);
	pthread_mutex_unlock(&pk->lock);
	w->err = e;
}

static void pass2_one(void *ctx, size_t i)
{
	pass2 *w = ctx;
	if (i == 0)
		write_tiles(w);
	else
		encode_worker(w->pk);
}

static wc_err write_payloads(packer *pk, int fd, const char *path, uint64_t off, wc_tile_info *index,
			     uint64_t prefix_len)
{
	pass2 w = {pk, fd, path, off, prefix_len, index, WC_OK};
	wc_threadpool_run(pk->pool, pass2_one, &w, (size_t)pk->threads + 1);
	return w.err;
}

/* ---- metadata: the tensor table (docs/FORMAT.md 1.3.1) ------------- */

static void put_f32(uint8_t *p, double v)
{
	float f = (float)v;
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	wc_put_u32(p, u);
}

/* Tensor i's record at p; returns its bytes (at most WC_TT_RECORD_MAX). */
static size_t tensor_record(const packer *pk, uint32_t i, uint8_t *p)
{
	const tensor_plan *t = &pk->tensors[i];
	const tensor_plan *u = &pk->tensors[t->unit]; /* whose tiles and tables it uses */
	uint8_t *q = p;
	q[0] = t->lossy ? (t->lp.bits == 8 ? WC_TT_LAYOUT_INT8 : WC_TT_LAYOUT_INT4) : wc_tt_layout_code(u->layout);
	q[1] = t->unit != i ? WC_TT_SHARED : 0;
	q[2] = t->use_dict || t->lossy ? wc_tt_layout_code(t->plain_layout) : 0;
	q[3] = 0;
	wc_put_u64(q + 4, t->own_bytes);
	q += WC_TT_HEAD_BYTES;
	if (t->lossy) {
		q[0] = t->lp.dtype;
		q[1] = t->lp.axis;
		wc_put_u16(q + 2, (uint16_t)t->lp.group);
		wc_put_u32(q + 4, t->lp.channels);
		put_f32(q + 8, t->ls.snr_db);
		put_f32(q + 12, t->ls.max_abs_err);
		put_f32(q + 16, t->ls.mean_abs_err);
		put_f32(q + 20, t->ls.rel_frobenius);
		q += WC_TT_INT8_BYTES;
	}
	if (t->use_dict) {
		wc_put_u32(q, t->dict_entries);
		for (unsigned k = 0; k < t->plain_layout.nplanes; k++)
			put_f32(q + 4 + 4 * k, t->plain_entropy[k]);
		q += 4 + 4 * t->plain_layout.nplanes;
	}
	/* a tensor of a shared tile: its share of the tile's bytes (informative) */
	const double share = t->unit == i ? 1.0 : u->nbytes ? (double)t->own_bytes / (double)u->nbytes : 0;
	for (unsigned k = 0; k < u->layout.nplanes; k++, q += WC_TT_PLANE_BYTES) {
		wc_put_u32(q, u->plan[k].table ? u->plan[k].table_id : WC_TT_NO_TABLE);
		put_f32(q + 4, t->own_hist ? t->own_entropy[k] : u->entropy[k]);
		wc_put_u64(q + 8, (uint64_t)((double)u->coded[k] * share + 0.5));
	}
	return (size_t)(q - p);
}

/* The metadata section: the tensor table in one zstd frame. */
static uint8_t *metadata_section(const packer *pk, size_t *len)
{
	size_t n = 0, cap = (size_t)pk->st->ntensors * WC_TT_RECORD_MAX;
	uint8_t *table = malloc(cap ? cap : 1);
	if (!table)
		return NULL;
	for (uint32_t i = 0; i < pk->st->ntensors; i++)
		n += tensor_record(pk, i, table + n);
	size_t zcap = ZSTD_compressBound(n);
	uint8_t *z = malloc(zcap);
	size_t zl = z ? ZSTD_compress(z, zcap, table, n, n < (4u << 20) ? 19 : 3) : 0;
	free(table);
	if (!z || ZSTD_isError(zl)) {
		free(z);
		return NULL;
	}
	*len = zl;
	return z;
}

/* ---- the whole pack ------------------------------------------------- */

static wc_err pack_into(packer *pk, int fd, const char *tmp, wc_pack_stats *stats)
{
	const wc_st_header *st = pk->st;
	uint64_t prefix_len = st->data_offset;
	wc_err e;
	if (prefix_len > WC_LIMIT_PREFIX_BYTES)
		return wc_fail(WC_E_RANGE, "safetensors header of %llu bytes exceeds the limit",
			       (unsigned long long)prefix_len);
	if ((e = wc_pk_plan_tiles(pk)))
		return e;
	int lossy = 0;
	for (uint32_t i = 0; i < st->ntensors; i++)
		lossy |= pk->tensors[i].lossy;

	pk->caller = pthread_self();
	pk->npasses = (pk->opts->verify ? 4 : 3) + (lossy ? 1 : 0);
	pk->passes_before = 0;
	if (lossy) { /* the codes first: every later pass reads them */
		atomic_store(&pk->pass_done, 0);
		atomic_store(&pk->cursor, 0);
		wc_pk_run(pk, wc_pk_lossy_worker);
		pk->passes_before = 1;
		if (atomic_load(&pk->failed))
			return wc_fail(pk->first_err, "%s", pk->first_why);
	}
	const uint64_t base = pk->passes_before;
	atomic_store(&pk->pass_done, 0);
	atomic_store(&pk->cursor, 0);
	wc_pk_run(pk, wc_pk_hist_worker);
	pk->passes_before = base + 1;
	if (atomic_load(&pk->failed))
		return wc_fail(pk->first_err, "%s", pk->first_why);
	atomic_store(&pk->pass_done, 0);
	atomic_store(&pk->cursor, 0);
	wc_pk_run(pk, wc_pk_dict_worker);
	pk->passes_before = base + 2;
	if (atomic_load(&pk->failed))
		return wc_fail(pk->first_err, "%s", pk->first_why);
	wc_pk_choose_layouts(pk);
	if ((e = wc_pk_build_tables(pk)))
		return e;

	/* Header placeholder and the prefix, then the payloads. */
	wc_file_header h = {0};
	h.version = WC_FORMAT_VERSION;
	h.flags = pk->dicts_len ? WC_FLAG_DICTS : 0;
	h.header_size = WC_HEADER_BYTES;
	h.tile_size = pk->tile_size;
	h.chunk_symbols = pk->chunk;
	h.ntensors = st->ntensors;
	h.ntiles = pk->ntiles;
	h.ntables = pk->ntables;
	h.virtual_size = pk->in_size;
	h.prefix_off = WC_HEADER_BYTES;
	h.prefix_len = prefix_len;
	h.payload_off = h.prefix_off + prefix_len;
	uint8_t hdr[WC_HEADER_BYTES] = {0};
	if ((e = wc_pwrite_full(fd, hdr, sizeof hdr, 0, tmp)) || (e = wc_pwrite_full(fd, pk->in, prefix_len, h.prefix_off, tmp)))
		return e;

	wc_tile_info *index = calloc(pk->ntiles ? pk->ntiles : 1, sizeof *index);
	uint8_t *tables = NULL, *index_bytes = NULL, *dicts = NULL;
	uint8_t *meta = NULL;
	XXH3_state_t *hs = NULL;
	if (!index) {
		e = wc_fail(WC_E_NOMEM, "out of memory");
		goto out;
	}
	pk->window = 2 * pk->threads + 2;
	pk->slot_cap = 0;
	for (uint32_t t = 0; t < st->ntensors; t++) {
		size_t b = wc_tile_encode_bound(pk->tensors[t].layout, pk->tile_size, pk->chunk);
		if (b > pk->slot_cap)
			pk->slot_cap = b;
	}
	pk->slots = calloc(pk->window, sizeof *pk->slots);
	if (!pk->slots) {
		e = wc_fail(WC_E_NOMEM, "out of memory");
		goto out;
	}
	for (uint32_t k = 0; k < pk->window; k++)
		if (!(pk->slots[k].buf = malloc(pk->slot_cap ? pk->slot_cap : 1))) {
			e = wc_fail(WC_E_NOMEM, "out of memory");
			goto out;
		}
	if ((e = write_payloads(pk, fd, tmp, h.payload_off, index, prefix_len)))
		goto out;
	h.payload_len = 0;
	for (uint32_t i = 0; i < pk->ntiles; i++)
		h.payload_len += index[i].csize;

	/* Tables, index, metadata. */
	size_t tables_len = 0;
	for (uint32_t k = 0; k < pk->ntables; k++)
		tables_len += wc_table_encoded_size(&pk->tables[k]);
	tables = malloc(tables_len ? tables_len : 1);
	dicts = malloc(pk->dicts_len ? pk->dicts_len : 1);
	index_bytes = malloc(pk->ntiles ? (size_t)pk->ntiles * WC_INDEX_ENTRY_BYTES : 1);
	size_t meta_len = 0;
	meta = metadata_section(pk, &meta_len);
	hs = XXH3_createState();
	if (pk->dicts_len > WC_LIMIT_DICT_BYTES) {
		e = wc_fail(WC_E_RANGE, "dictionaries of %llu bytes exceed the limit", (unsigned long long)pk->dicts_len);
		goto out;
	}
	if (!tables || !dicts || !index_bytes || !meta || !hs) {
		e = wc_fail(WC_E_NOMEM, "out of memory");
		goto out;
	}
	size_t pos = 0;
	for (uint32_t k = 0; k < pk->ntables; k++)
		pos += wc_table_encode(&pk->tables[k], tables + pos);
	for (uint32_t i = 0; i < pk->ntiles; i++)
		wc_index_entry_encode(&index[i], index_bytes + (size_t)i * WC_INDEX_ENTRY_BYTES);
	for (uint32_t t = 0; t < st->ntensors; t++) {
		const tensor_plan *tp = &pk->tensors[t];
		if (tp->use_dict)
			memcpy(dicts + tp->dict_off, tp->dict, (size_t)tp->dict_entries * tp->layout.elem_size);
		for (uint64_t k = 0; tp->lossy && k < wc_lossy_nscales(&tp->lp); k++) {
			uint32_t u;
			memcpy(&u, &tp->scales[k], 4);
			wc_put_u32(dicts + tp->dict_off + 4ull * k, u);
		}
	}
	h.tables_off = h.payload_off + h.payload_len;
	h.tables_len = tables_len;
	h.dicts_off = pk->dicts_len ? h.tables_off + tables_len : 0;
	h.dicts_len = pk->dicts_len;
	h.index_off = h.tables_off + tables_len + pk->dicts_len;
	h.index_len = (uint64_t)pk->ntiles * WC_INDEX_ENTRY_BYTES;
	h.meta_off = h.index_off + h.index_len;
	h.meta_len = meta_len;
	h.file_size = h.meta_off + meta_len;
	if (meta_len > WC_LIMIT_META_BYTES) {
		e = wc_fail(WC_E_RANGE, "metadata of %zu bytes exceeds the limit", meta_len);
		goto out;
	}
	wc_header_encode(&h, hdr);
	XXH3_64bits_reset(hs);
	XXH3_64bits_update(hs, hdr, WC_HEADER_HASH_OFF);
	XXH3_64bits_update(hs, pk->in, prefix_len);
	XXH3_64bits_update(hs, tables, tables_len);
	XXH3_64bits_update(hs, dicts, pk->dicts_len);
	XXH3_64bits_update(hs, index_bytes, h.index_len);
	XXH3_64bits_update(hs, meta, meta_len);
	h.check = XXH3_64bits_digest(hs);
	wc_header_encode(&h, hdr);
	if ((e = wc_pwrite_full(fd, tables, tables_len, h.tables_off, tmp)) ||
	    (e = wc_pwrite_full(fd, dicts, pk->dicts_len, h.tables_off + tables_len, tmp)) ||
	    (e = wc_pwrite_full(fd, index_bytes, h.index_len, h.index_off, tmp)) ||
	    (e = wc_pwrite_full(fd, meta, meta_len, h.meta_off, tmp)) || (e = wc_pwrite_full(fd, hdr, sizeof hdr, 0, tmp)))
		goto out;
	if (stats) {
		memset(stats, 0, sizeof *stats);
		stats->input_bytes = pk->in_size;
		stats->output_bytes = h.file_size;
		stats->data_bytes = st->data_size;
		stats->coded_data_bytes = h.payload_len;
		for (uint32_t t = 0; t < st->ntensors; t++) {
			const tensor_plan *tp = &pk->tensors[t];
			uint64_t n = tp->nbytes / tp->layout.elem_size;
			for (unsigned p = 0; !tp->own_hist && p < tp->layout.nplanes; p++)
				stats->entropy_bound_bytes += tp->entropy[p] * (double)n / 8.0;
			for (unsigned p = 0; tp->own_hist && p < tp->layout.nplanes; p++)
				stats->entropy_bound_bytes +=
					tp->own_entropy[p] * (double)(tp->own_bytes / tp->layout.elem_size) / 8.0;
			for (unsigned p = 0; tp->nbytes && !tp->own_hist && p < tp->plain_layout.nplanes; p++)
				stats->plain_entropy_bound_bytes += tp->plain_entropy[p] * (double)n / 8.0;
			for (unsigned p = 0; tp->own_hist && p < tp->layout.nplanes; p++)
				stats->plain_entropy_bound_bytes +=
					tp->own_entropy[p] * (double)(tp->own_bytes / tp->layout.elem_size) / 8.0;
			stats->dict_tensors += tp->use_dict != 0;
			stats->lossy_tensors += tp->lossy != 0;
			stats->lossy_bytes += tp->lossy ? tp->own_bytes : 0;
		}
		stats->dict_bytes = pk->dicts_len;
		stats->entropy_bound_bytes += (double)pk->dicts_len;
	}
	if (pk->opts->verify) {
		pk->passes_before = base + 3;
		atomic_store(&pk->pass_done, 0);
		e = wc_pk_verify(pk, tmp, prefix_len);
	}
out:
	if (pk->slots)
		for (uint32_t k = 0; k < pk->window; k++)
			free(pk->slots[k].buf);
	free(pk->slots);
	pk->slots = NULL;
	free(index);
	free(tables);
	free(dicts);
	free(index_bytes);
	free(meta);
	if (hs)
		XXH3_freeState(hs);
	return e;
}

static wc_err check_opts(const wc_pack_opts *o, packer *pk)
{
	pk->tile_size = o->tile_size ? o->tile_size : WC_TILE_SIZE_DEFAULT;
	pk->chunk = o->chunk_symbols ? o->chunk_symbols : WC_PACK_CHUNK_DEFAULT;
	if (pk->tile_size < WC_TILE_SIZE_MIN || pk->tile_size > WC_TILE_SIZE_MAX || pk->tile_size % 8)
		return wc_fail(WC_E_INVAL, "tile size %u must be a multiple of 8 in [%u, %u]", pk->tile_size,
			       WC_TILE_SIZE_MIN, WC_TILE_SIZE_MAX);
	if (pk->chunk < WC_RANS_CHUNK_MIN || pk->chunk > WC_RANS_CHUNK_MAX || pk->chunk % WC_RANS_LANES)
		return wc_fail(WC_E_INVAL, "chunk of %u symbols must be a multiple of 32 in [%u, %u]", pk->chunk,
			       WC_RANS_CHUNK_MIN, WC_RANS_CHUNK_MAX);
	if (o->lossy_bits != 0 && o->lossy_bits != 8 && o->lossy_bits != 4)
		return wc_fail(WC_E_INVAL, "lossy packing of %d bits: 0 (lossless), 8 (int8) or 4 (int4)", o->lossy_bits);
	if (o->lossy_group > WC_LOSSY_GROUP_MAX || (o->lossy_group && !o->lossy_bits))
		return wc_fail(WC_E_INVAL, "lossy group of %u: with lossy packing, at most %u", o->lossy_group,
			       WC_LOSSY_GROUP_MAX);
	pk->threads = o->threads ? o->threads : wc_cpu_count();
	if (pk->threads > 1024)
		pk->threads = 1024;
	return WC_OK;
}

wc_err wc_pack_safetensors(const char *in_path, const char *out_path, const wc_pack_opts *opts,
			   wc_pack_stats *stats)
{
	static const wc_pack_opts defaults = {0};
	packer pk = {0};
	pk.opts = opts ? opts : &defaults;
	wc_err e = check_opts(pk.opts, &pk);
	if (e)
		return e;
	pthread_mutex_init(&pk.lock, NULL);
	pthread_cond_init(&pk.cond, NULL);
	for (int i = 0; i < 64; i++)
		pthread_mutex_init(&pk.hist_lock[i], NULL);
	/* pk.threads workers: the encoders beside the writer (pass 2), and
	 * all but one of the analysis and verification workers. */
	if ((e = wc_threadpool_create(pk.threads, &pk.pool))) {
		pthread_cond_destroy(&pk.cond);
		pthread_mutex_destroy(&pk.lock);
		for (int i = 0; i < 64; i++)
			pthread_mutex_destroy(&pk.hist_lock[i]);
		return e;
	}

	wc_atomic_file out = {.fd = -1};
	int in_fd = -1;
	void *map = MAP_FAILED;
	if ((e = wc_check_output_not_input(in_path, out_path)))
		goto out;
	if ((e = wc_open_regular(in_path, &in_fd)))
		goto out;
	struct stat sb; /* a regular file: wc_open_regular */
	if (fstat(in_fd, &sb) != 0) {
		e = wc_fail(WC_E_IO, "%s: %s", in_path, strerror(errno));
		goto out;
	}
	pk.in_size = (uint64_t)sb.st_size;
	if (pk.in_size < 8) {
		e = wc_fail(WC_E_FORMAT, "%s: safetensors: file of %llu bytes is shorter than the 8-byte header length",
			    in_path, (unsigned long long)pk.in_size);
		goto out;
	}
	map = mmap(NULL, (size_t)pk.in_size, PROT_READ, MAP_PRIVATE, in_fd, 0);
	if (map == MAP_FAILED) {
		e = wc_fail(WC_E_IO, "%s: mmap: %s", in_path, strerror(errno));
		goto out;
	}
	pk.in = map;
	if ((e = wc_st_parse(pk.in, (size_t)pk.in_size, pk.in_size, &pk.st))) {
		char why[400];
		snprintf(why, sizeof why, "%s", wc_last_detail());
		e = wc_fail(e, "%s: %s", in_path, why);
		goto out;
	}
	madvise(map, (size_t)pk.in_size, MADV_SEQUENTIAL);

	if ((e = wc_atomic_create(&out, out_path)))
		goto out;
	if (pk.opts->temp_file)
		pk.opts->temp_file(out.tmp);
	if ((e = pack_into(&pk, out.fd, out.tmp, stats)) || (e = wc_atomic_commit(&out)))
		goto out;
out:
	wc_atomic_abort(&out);
	if (pk.opts->temp_file)
		pk.opts->temp_file(NULL);
	if (map != MAP_FAILED)
		munmap(map, (size_t)pk.in_size);
	if (in_fd >= 0)
		close(in_fd);
	if (pk.tensors)
		for (uint32_t t = 0; t < (pk.st ? pk.st->ntensors : 0); t++) {
			free(pk.tensors[t].hist);
			free(pk.tensors[t].own_hist);
			free(pk.tensors[t].dict);
			free(pk.tensors[t].index_hist);
			free(pk.tensors[t].codes);
			free(pk.tensors[t].scales);
		}
	free(pk.tensors);
	free(pk.tiles);
	free(pk.tables);
	wc_st_free(pk.st);
	wc_threadpool_destroy(pk.pool);
	pthread_mutex_destroy(&pk.lock);
	pthread_cond_destroy(&pk.cond);
	for (int i = 0; i < 64; i++)
		pthread_mutex_destroy(&pk.hist_lock[i]);
	return e;
}
