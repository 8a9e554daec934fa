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
 * any failure the temporary file is removed.
 */
#include "container/container.h"

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

#include <jansson.h>
#include <xxhash.h>
#include <zstd.h>

#include "codec/tile_codec.h"
#include "config.h"
#include "container/format.h"
#include "container/safetensors.h"
#include "core/fileio.h"
#include "core/hash.h"
#include "core/limits.h"

typedef struct tensor_plan {
	const wc_st_tensor *st;
	wc_layout layout;
	const uint8_t *data; /* the unit's bytes in the mapped input */
	uint64_t nbytes;     /* the unit's bytes: the tensor's, or its shared tile's */
	uint64_t own_bytes;  /* the tensor's own bytes */
	uint32_t unit;       /* the tensor carrying its unit: itself, or the first of its shared tile */
	/* A tensor of a shared tile: the histograms and order-0 entropy of its
	 * own planes (the unit's describe the whole tile), for the entropy
	 * bound a tensor-plane has on its own. */
	uint64_t (*own_hist)[256];
	double own_entropy[WC_MAX_PLANES];
	uint32_t first_tile, ntiles;
	int allow_zstd;
	uint64_t (*hist)[256]; /* nplanes histograms during pass 1 */
	wc_plane_plan plan[WC_MAX_PLANES];
	double entropy[WC_MAX_PLANES];
	uint64_t coded[WC_MAX_PLANES];
	/* dictionary candidate (pass 1b) and, if chosen, the dict layout */
	wc_layout plain_layout;                /* the dtype's byte-plane layout */
	double plain_entropy[WC_MAX_PLANES];   /* entropy of its planes */
	uint8_t *dict;                         /* dict_entries values, ascending */
	uint32_t dict_entries;
	uint64_t (*index_hist)[256];           /* histograms of the index planes */
	int use_dict;
	uint64_t dict_off;                     /* within the dictionary section */
} tensor_plan;

typedef struct tile_plan {
	uint32_t tensor;
	uint32_t dsize;
	uint64_t offset; /* within the tensor */
} tile_plan;

/* One encoded tile waiting in the reorder window. */
typedef struct slot {
	uint8_t *buf;
	size_t len;
	uint64_t chash, dhash;
	uint64_t plane_bytes[WC_MAX_PLANES];
	wc_err err;
	char why[256];
	int ready;
} slot;

typedef struct packer {
	const wc_pack_opts *opts;
	uint32_t tile_size, chunk;
	unsigned threads;
	const uint8_t *in;
	uint64_t in_size;
	wc_st_header *st;
	tensor_plan *tensors;
	tile_plan *tiles;
	uint32_t ntiles;
	wc_freqtab *tables;
	uint32_t ntables;
	uint64_t dicts_len;    /* dictionary section bytes */
	uint32_t version;      /* of the file: 2 with a shared tile, else 1 */
	pthread_mutex_t hist_lock[64];

	/* pass-2 window */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	slot *slots;
	uint32_t window;
	uint32_t next_tile;    /* next tile a worker takes */
	uint32_t written;      /* tiles the writer has consumed */
	size_t slot_cap;
	int abort;
	atomic_uint cursor;    /* pass 1 / verify work counter */
	atomic_int failed;
	wc_err first_err;
	char first_why[400];
	wc_container *check;   /* verify pass: the written file */
	/* Progress over all passes: each pass counts the data section once. */
	pthread_t caller;      /* the thread that may call opts->progress */
	atomic_uint_fast64_t pass_done;
	uint64_t passes_before, npasses;
} packer;

/* Report progress of the current pass (bytes of it done) from the caller's thread. */
static void report(packer *pk, uint64_t pass_bytes)
{
	if (!pk->opts->progress || !pthread_equal(pthread_self(), pk->caller))
		return;
	uint64_t d = pk->st->data_size;
	pk->opts->progress(pk->opts->progress_ctx, pk->passes_before * d + pass_bytes, pk->npasses * d);
}

/* ---- small helpers -------------------------------------------------- */

static void record_failure(packer *pk, wc_err e)
{
	pthread_mutex_lock(&pk->lock);
	if (!pk->first_err) {
		pk->first_err = e;
		snprintf(pk->first_why, sizeof pk->first_why, "%s", wc_last_detail());
	}
	pthread_mutex_unlock(&pk->lock);
	atomic_store(&pk->failed, 1);
}

/* Run fn(pk, worker) on pk->threads threads (the caller's included). */
static void run_workers(packer *pk, void *(*fn)(void *))
{
	unsigned n = pk->threads;
	pthread_t *tids = calloc(n, sizeof *tids);
	unsigned started = 0;
	if (tids)
		for (; started + 1 < n; started++)
			if (pthread_create(&tids[started], NULL, fn, pk) != 0)
				break;
	fn(pk);
	for (unsigned i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	free(tids);
}

static int is_float_dtype(const char *dtype)
{
	return dtype[0] == 'F' || strcmp(dtype, "BF16") == 0 || dtype[0] == 'C';
}

/* ---- pass 1: tensor-plane histograms -------------------------------- */

static void *hist_worker(void *arg)
{
	packer *pk = arg;
	uint64_t (*local)[256] = malloc(sizeof(uint64_t[WC_MAX_PLANES][256]));
	if (!local) {
		record_failure(pk, wc_fail(WC_E_NOMEM, "out of memory"));
		return NULL;
	}
	for (;;) {
		uint32_t i = atomic_fetch_add(&pk->cursor, 1);
		if (i >= pk->ntiles || atomic_load(&pk->failed))
			break;
		const tile_plan *tp = &pk->tiles[i];
		tensor_plan *t = &pk->tensors[tp->tensor];
		unsigned np = t->layout.nplanes;
		memset(local, 0, np * sizeof local[0]);
		wc_planes_histogram(t->layout, t->data + tp->offset, tp->dsize / t->layout.elem_size, local);
		/* a shared tile is one tile, taken by this worker alone: its
		 * tensors' own histograms need no lock */
		for (uint32_t j = tp->tensor; t->own_hist && j < pk->st->ntensors && pk->tensors[j].unit == tp->tensor; j++) {
			tensor_plan *m = &pk->tensors[j];
			wc_planes_histogram(m->layout, m->data, m->own_bytes / m->layout.elem_size, m->own_hist);
			for (unsigned p = 0; p < np; p++)
				m->own_entropy[p] = wc_entropy_bits(m->own_hist[p]);
		}
		pthread_mutex_t *l = &pk->hist_lock[tp->tensor % 64];
		pthread_mutex_lock(l);
		for (unsigned p = 0; p < np; p++)
			for (int s = 0; s < 256; s++)
				t->hist[p][s] += local[p][s];
		pthread_mutex_unlock(l);
		report(pk, atomic_fetch_add(&pk->pass_done, tp->dsize) + tp->dsize);
	}
	free(local);
	return NULL;
}

/* ---- pass 1b: dictionaries ------------------------------------------ */

/* Workers take tensors in turn: the sorted distinct values of each tensor of
 * 2-, 4- or 8-byte elements (wc_dict_build gives up past 65536 values, after
 * about 65536 elements of a tensor of continuous values) and the
 * histograms of its index planes. */
static void *dict_worker(void *arg)
{
	packer *pk = arg;
	uint8_t *dict = malloc((size_t)WC_DICT_MAX_ENTRIES * 8);
	uint64_t *counts = malloc((size_t)WC_DICT_MAX_ENTRIES * sizeof *counts);
	if (!dict || !counts) {
		record_failure(pk, wc_fail(WC_E_NOMEM, "out of memory"));
		goto done;
	}
	for (;;) {
		uint32_t i = atomic_fetch_add(&pk->cursor, 1);
		if (i >= pk->st->ntensors || atomic_load(&pk->failed))
			break;
		tensor_plan *t = &pk->tensors[i];
		unsigned w = t->plain_layout.elem_size;
		/* a shared tile has one layout for all its tensors: no dictionary */
		if (t->nbytes && w >= 2 && t->unit == i && t->nbytes == t->own_bytes) {
			uint32_t k = 0;
			wc_err e = wc_dict_build(t->data, t->nbytes / w, w, dict, &k, counts);
			if (e == WC_OK) {
				t->dict = malloc((size_t)k * w);
				t->index_hist = calloc(2, sizeof *t->index_hist);
				if (!t->dict || !t->index_hist) {
					record_failure(pk, wc_fail(WC_E_NOMEM, "out of memory"));
					break;
				}
				memcpy(t->dict, dict, (size_t)k * w);
				t->dict_entries = k;
				for (uint32_t j = 0; j < k; j++) {
					if (k <= 256) {
						t->index_hist[0][j] += counts[j];
					} else {
						t->index_hist[0][j >> 8] += counts[j];
						t->index_hist[1][j & 0xff] += counts[j];
					}
				}
			} else if (e != WC_E_RANGE) {
				record_failure(pk, e);
				break;
			}
		}
		report(pk, atomic_fetch_add(&pk->pass_done, t->own_bytes) + t->own_bytes);
	}
done:
	free(dict);
	free(counts);
	return NULL;
}

/* Estimated bytes of a tensor-plane of n symbols in tiles of tile_syms:
 * nothing if constant, else the cheaper of RAW and rANS at its entropy plus
 * chunk headers and a table of its own; plus a plane descriptor per tile. */
static double plane_cost(const uint64_t hist[256], uint64_t n, uint32_t chunk, uint32_t tile_syms)
{
	uint64_t tiles = (n + tile_syms - 1) / tile_syms;
	unsigned distinct = 0;
	for (int s = 0; s < 256; s++)
		distinct += hist[s] != 0;
	double desc = 12.0 * (double)tiles;
	if (distinct <= 1)
		return desc;
	uint64_t full = n / tile_syms, rest = n % tile_syms;
	uint64_t chunks = full * ((tile_syms + chunk - 1) / chunk) + (rest + chunk - 1) / chunk;
	double rans = wc_entropy_bits(hist) * (double)n / 8.0 + (double)chunks * (4 + 4 * WC_RANS_LANES + 2) +
		      WC_TABLE_BITMAP_BYTES + 2.0 * distinct;
	return desc + (rans < (double)n ? rans : (double)n);
}

/* A dictionary must save this fraction of the byte planes' estimate: the
 * estimate is only that, and a dict tile's gather is a little slower than
 * a merge. */
#define DICT_MIN_SAVING 0.01

/* Per tensor: keep the byte planes, or switch to layout "dict" when the
 * estimate says it is smaller; lay out the dictionary section. Runs before
 * the tables are built, so a dict tensor's histograms become those of its
 * index planes. */
static void choose_layouts(packer *pk)
{
	pk->dicts_len = 0;
	for (uint32_t i = 0; i < pk->st->ntensors; i++) {
		tensor_plan *t = &pk->tensors[i];
		const wc_layout pl = t->plain_layout;
		if (!t->hist)
			continue;
		uint64_t n = t->nbytes / pl.elem_size;
		uint32_t tile_syms = pk->tile_size / pl.elem_size;
		double plain = 0;
		for (unsigned p = 0; p < pl.nplanes; p++) {
			t->plain_entropy[p] = wc_entropy_bits(t->hist[p]);
			plain += plane_cost(t->hist[p], n, pk->chunk, tile_syms);
		}
		if (!t->dict)
			continue;
		wc_layout dl = wc_layout_dict(pl.elem_size, t->dict_entries);
		double cost = (double)t->dict_entries * pl.elem_size + 48.0; /* + its JSON */
		for (unsigned p = 0; p < dl.nplanes; p++)
			cost += plane_cost(t->index_hist[p], n, pk->chunk, tile_syms);
		if (cost < (1.0 - DICT_MIN_SAVING) * plain) {
			t->use_dict = 1;
			t->layout = dl;
			t->dict_off = pk->dicts_len;
			pk->dicts_len += (uint64_t)t->dict_entries * pl.elem_size;
			for (unsigned p = 0; p < dl.nplanes; p++)
				memcpy(t->hist[p], t->index_hist[p], sizeof t->hist[p]);
		} else {
			free(t->dict);
			t->dict = NULL;
			t->dict_entries = 0;
		}
		free(t->index_hist);
		t->index_hist = NULL;
	}
}

/* Chunk overhead of RANS bodies of a plane of n symbols cut in tiles of
 * tile_syms symbols: each chunk stores a u32 end offset and 32 u32 lane
 * states, plus at most one u16 of padding. */
static double chunk_overhead(uint64_t n, uint32_t chunk, uint32_t tile_syms)
{
	uint64_t full = n / tile_syms, rest = n % tile_syms;
	uint64_t chunks = full * ((tile_syms + chunk - 1) / chunk) + (rest + chunk - 1) / chunk;
	return (double)chunks * (4 + 4 * WC_RANS_LANES + 2);
}

/* Bytes of n symbols with histogram hist coded with table ft (cross-entropy). */
static double coded_bytes(const uint64_t hist[256], const wc_freqtab *ft)
{
	const double *L = wc_log2_freq_table();
	double bits = 0;
	for (int s = 0; s < 256; s++)
		if (hist[s])
			bits += (double)hist[s] * ((double)WC_RANS_PROB_BITS - L[ft->freq[s]]);
	return bits / 8.0;
}

/* A table shared by the tensor-planes of one (layout, plane): built from
 * their summed histogram, stored once, used where it costs less than a
 * tensor-plane's own table plus that table's bytes (small tensors). */
typedef struct pool {
	uint8_t kind, elem_size, plane;
	uint64_t hist[256];
	wc_freqtab ft;
	int valid;
	uint32_t id; /* WC_NO_TABLE until first used */
} pool;

#define MAX_POOLS 64

static pool *pool_for(pool *pools, unsigned *npools, wc_layout l, unsigned p)
{
	for (unsigned i = 0; i < *npools; i++)
		if (pools[i].kind == l.kind && pools[i].elem_size == l.elem_size && pools[i].plane == p)
			return &pools[i];
	if (*npools == MAX_POOLS)
		return NULL;
	pool *q = &pools[(*npools)++];
	memset(q, 0, sizeof *q);
	q->kind = l.kind;
	q->elem_size = l.elem_size;
	q->plane = (uint8_t)p;
	q->id = WC_NO_TABLE;
	return q;
}

/* Choose for each tensor-plane with at least two symbols: its own table, the
 * shared table of its (layout, plane), or none (RAW/CONST/ZSTD only), by
 * estimated bytes including the tables' own. */
static wc_err build_tables(packer *pk)
{
	uint32_t cap = MAX_POOLS;
	for (uint32_t t = 0; t < pk->st->ntensors; t++)
		cap += pk->tensors[t].layout.nplanes;
	pk->tables = calloc(cap, sizeof *pk->tables);
	pool *pools = calloc(MAX_POOLS, sizeof *pools);
	if (!pk->tables || !pools) {
		free(pools);
		return wc_fail(WC_E_NOMEM, "out of memory");
	}
	unsigned npools = 0;
	for (uint32_t t = 0; t < pk->st->ntensors; t++) {
		tensor_plan *tp = &pk->tensors[t];
		for (unsigned p = 0; tp->hist && p < tp->layout.nplanes; p++) {
			pool *q = pool_for(pools, &npools, tp->layout, p);
			for (int s = 0; q && s < 256; s++)
				q->hist[s] += tp->hist[p][s];
		}
	}
	for (unsigned i = 0; i < npools; i++)
		pools[i].valid = wc_freq_normalize(pools[i].hist, &pools[i].ft) == WC_OK;

	wc_err e = WC_OK;
	for (uint32_t t = 0; t < pk->st->ntensors && !e; t++) {
		tensor_plan *tp = &pk->tensors[t];
		for (unsigned p = 0; p < tp->layout.nplanes; p++) {
			tp->plan[p].table = NULL;
			tp->plan[p].table_id = WC_NO_TABLE;
			tp->plan[p].allow_zstd = tp->allow_zstd;
			if (!tp->hist)
				continue;
			uint64_t n = tp->nbytes / tp->layout.elem_size;
			tp->entropy[p] = wc_entropy_bits(tp->hist[p]);
			int distinct = 0;
			for (int s = 0; s < 256; s++)
				distinct += tp->hist[p][s] != 0;
			if (distinct < 2)
				continue;
			wc_freqtab *own = &pk->tables[pk->ntables];
			if ((e = wc_freq_normalize(tp->hist[p], own)))
				break;
			double over = chunk_overhead(n, pk->chunk, pk->tile_size / tp->layout.elem_size);
			double own_cost = coded_bytes(tp->hist[p], own) + over + (double)wc_table_encoded_size(own);
			pool *q = pool_for(pools, &npools, tp->layout, p);
			double pool_cost = 1e300;
			if (q && q->valid)
				pool_cost = coded_bytes(tp->hist[p], &q->ft) + over +
					    (q->id == WC_NO_TABLE ? (double)wc_table_encoded_size(&q->ft) : 0);
			double best = own_cost < pool_cost ? own_cost : pool_cost;
			if (best >= 0.995 * (double)n)
				continue;
			if (own_cost <= pool_cost) {
				tp->plan[p].table = own;
				tp->plan[p].table_id = pk->ntables++;
			} else {
				if (q->id == WC_NO_TABLE) {
					pk->tables[pk->ntables] = q->ft;
					q->id = pk->ntables++;
				}
				tp->plan[p].table = &pk->tables[q->id];
				tp->plan[p].table_id = q->id;
			}
		}
		free(tp->hist);
		tp->hist = NULL;
	}
	free(pools);
	return e;
}

/* ---- pass 2: encoding through the reorder window -------------------- */

static void *encode_worker(void *arg)
{
	packer *pk = arg;
	for (;;) {
		pthread_mutex_lock(&pk->lock);
		while (!pk->abort && pk->next_tile < pk->ntiles && pk->next_tile >= pk->written + pk->window)
			pthread_cond_wait(&pk->cond, &pk->lock);
		if (pk->abort || pk->next_tile >= pk->ntiles) {
			pthread_mutex_unlock(&pk->lock);
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
		if (s->err) {
			snprintf(s->why, sizeof s->why, "tile %u of tensor \"%s\": %s", i, t->st->name, wc_last_detail());
		} else {
			s->chash = wc_xxh3_64(s->buf, s->len);
			s->dhash = wc_xxh3_64(src, tp->dsize);
		}
		pthread_mutex_lock(&pk->lock);
		s->ready = 1;
		pthread_cond_broadcast(&pk->cond);
		pthread_mutex_unlock(&pk->lock);
	}
}

static void *encode_thread_main(void *arg)
{
	return encode_worker(arg);
}

/* The writer: consume tiles in order, append payloads, fill the index. */
static wc_err write_payloads(packer *pk, int fd, const char *path, uint64_t off, wc_tile_info *index,
			     uint64_t prefix_len)
{
	unsigned nworkers = pk->threads;
	pthread_t *tids = calloc(nworkers, sizeof *tids);
	if (!tids)
		return wc_fail(WC_E_NOMEM, "out of memory");
	unsigned started = 0;
	for (; started < nworkers; started++)
		if (pthread_create(&tids[started], NULL, encode_thread_main, pk) != 0)
			break;
	wc_err e = WC_OK;
	if (started == 0)
		e = wc_fail(WC_E_NOMEM, "cannot start encoder threads");
	uint64_t done = 0;
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
			e = wc_pwrite_full(fd, s->buf, s->len, off, path);
			wc_tile_info *x = &index[i];
			x->voff = prefix_len + t->st->begin + tp->offset;
			x->coff = off;
			x->csize = (uint32_t)s->len;
			x->dsize = tp->dsize;
			x->tensor = tp->tensor;
			x->flags = 0;
			x->chash = s->chash;
			x->dhash = s->dhash;
			off += s->len;
			for (unsigned p = 0; p < t->layout.nplanes; p++)
				t->coded[p] += s->plane_bytes[p];
		}
		done += tp->dsize;
		if (!e)
			report(pk, done);
		pthread_mutex_lock(&pk->lock);
		s->ready = 0;
		pk->written = i + 1;
		if (e)
			pk->abort = 1;
		pthread_cond_broadcast(&pk->cond);
		pthread_mutex_unlock(&pk->lock);
	}
	pthread_mutex_lock(&pk->lock);
	pk->abort = 1;
	pthread_cond_broadcast(&pk->cond);
	pthread_mutex_unlock(&pk->lock);
	for (unsigned k = 0; k < started; k++)
		pthread_join(tids[k], NULL);
	free(tids);
	return e;
}

/* ---- metadata JSON -------------------------------------------------- */

static json_t *tensor_json(const packer *pk, uint32_t i, uint64_t prefix_len)
{
	const tensor_plan *t = &pk->tensors[i];
	const tensor_plan *u = &pk->tensors[t->unit]; /* whose tiles and tables it uses */
	json_t *shape = json_array(), *planes = json_array();
	for (uint32_t d = 0; d < t->st->ndim; d++)
		json_array_append_new(shape, json_integer((json_int_t)t->st->shape[d]));
	/* a tensor of a shared tile: its share of the tile's bytes (informative) */
	const double share = u->nbytes ? (double)t->own_bytes / (double)u->nbytes : 0;
	for (unsigned p = 0; p < u->layout.nplanes; p++)
		json_array_append_new(
			planes, json_pack("{s:o, s:f, s:I}", "table",
					  u->plan[p].table ? json_integer(u->plan[p].table_id) : json_null(), "entropy",
					  t->own_hist ? t->own_entropy[p] : u->entropy[p], "coded_bytes",
					  (json_int_t)((double)u->coded[p] * share + 0.5)));
	json_t *o = json_pack("{s:s, s:s, s:o, s:I, s:I, s:s, s:I, s:I, s:o}", "name", t->st->name, "dtype",
			      t->st->dtype, "shape", shape, "begin", (json_int_t)(prefix_len + t->st->begin), "end",
			      (json_int_t)(prefix_len + t->st->end), "layout", wc_layout_name(u->layout), "first_tile",
			      (json_int_t)u->first_tile, "tiles", (json_int_t)u->ntiles, "planes", planes);
	if (o && t->unit != i && json_object_set_new(o, "shared", json_true())) {
		json_decref(o);
		return NULL;
	}
	if (o && t->use_dict) {
		json_t *pe = json_array();
		for (unsigned p = 0; p < t->plain_layout.nplanes; p++)
			json_array_append_new(pe, json_real(t->plain_entropy[p]));
		if (json_object_set_new(o, "dict", json_pack("{s:I, s:I}", "offset", (json_int_t)t->dict_off, "entries",
							     (json_int_t)t->dict_entries)) ||
		    json_object_set_new(o, "plain_entropy", pe)) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

static char *metadata_json(const packer *pk, uint64_t prefix_len, size_t *len)
{
	json_t *tensors = json_array();
	for (uint32_t i = 0; i < pk->st->ntensors; i++) {
		json_t *t = tensor_json(pk, i, prefix_len);
		if (!t || json_array_append_new(tensors, t)) {
			json_decref(tensors);
			return NULL;
		}
	}
	json_t *root = json_pack("{s:s, s:i, s:s, s:o}", "format", "wcodec", "version", (int)pk->version,
				 "writer", PACKAGE_NAME " " PACKAGE_VERSION, "tensors", tensors);
	if (!root)
		return NULL;
	char *s = json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(6));
	json_decref(root);
	if (!s)
		return NULL;
	/* Stored as one zstd frame: the JSON repeats keys per tensor and
	 * compresses several times, which matters for small models. */
	size_t n = strlen(s), cap = ZSTD_compressBound(n);
	char *z = malloc(cap);
	size_t zl = z ? ZSTD_compress(z, cap, s, n, n < (4u << 20) ? 19 : 3) : 0;
	free(s);
	if (!z || ZSTD_isError(zl)) {
		free(z);
		return NULL;
	}
	*len = zl;
	return z;
}

/* ---- pass 3: verification of the written file ----------------------- */

static void *verify_worker(void *arg)
{
	packer *pk = arg;
	size_t cap = 2ull * pk->tile_size + 65536u;
	uint8_t *payload = malloc(cap), *out = malloc(pk->tile_size);
	if (!payload || !out) {
		record_failure(pk, wc_fail(WC_E_NOMEM, "out of memory"));
		goto done;
	}
	for (;;) {
		uint32_t i = atomic_fetch_add(&pk->cursor, 1);
		if (i >= pk->ntiles || atomic_load(&pk->failed))
			break;
		const wc_tile_info *x = wc_container_tile(pk->check, i);
		wc_err e = wc_container_read_payload(pk->check, i, payload);
		if (!e)
			e = wc_container_decode_tile(pk->check, i, payload, out);
		if (!e) {
			const tile_plan *tp = &pk->tiles[i];
			const uint8_t *orig = pk->tensors[tp->tensor].data + tp->offset;
			if (x->dsize != tp->dsize || memcmp(out, orig, tp->dsize) != 0)
				e = wc_fail(WC_E_CORRUPT, "verification: tile %u decodes to different bytes", i);
			report(pk, atomic_fetch_add(&pk->pass_done, tp->dsize) + tp->dsize);
		}
		if (e) {
			record_failure(pk, e);
			break;
		}
	}
done:
	free(payload);
	free(out);
	return NULL;
}

static wc_err verify_file(packer *pk, const char *tmp, size_t prefix_len)
{
	wc_err e = wc_container_open(tmp, &pk->check);
	if (e) {
		char why[400];
		snprintf(why, sizeof why, "%s", wc_last_detail());
		return wc_fail(e, "verification: cannot reopen the written file: %s", why);
	}
	size_t plen;
	const uint8_t *prefix = wc_container_prefix(pk->check, &plen);
	if (plen != prefix_len || memcmp(prefix, pk->in, plen) != 0 ||
	    wc_container_virtual_size(pk->check) != pk->in_size || wc_container_ntiles(pk->check) != pk->ntiles) {
		e = wc_fail(WC_E_CORRUPT, "verification: the written prefix or tile count differs from the input");
	} else {
		atomic_store(&pk->cursor, 0);
		run_workers(pk, verify_worker);
		if (atomic_load(&pk->failed))
			e = wc_fail(pk->first_err, "%s", pk->first_why);
	}
	wc_container_release(pk->check);
	pk->check = NULL;
	return e;
}

/* ---- planning ------------------------------------------------------- */

/* Tensors under this fraction of the tile size share tiles with their
 * neighbours of the same dtype: each tile costs an index entry, a payload
 * header, a chunk's 32 lane states per rANS plane and a decode
 * (docs/BENCHMARKS.md, "Many small tensors", measured the choice). */
#define SHARE_BELOW_DIV 128u

/* May tensor t join the shared tile that tensor u (its unit so far, bytes
 * `unit_bytes`) carries? */
static int can_share(const packer *pk, const tensor_plan *u, uint64_t unit_bytes, const tensor_plan *t)
{
	const uint64_t small = pk->tile_size / SHARE_BELOW_DIV;
	return u->own_bytes < small && t->nbytes && t->nbytes < small && unit_bytes + t->nbytes <= pk->tile_size &&
	       strcmp(u->st->dtype, t->st->dtype) == 0 && u->layout.kind == t->layout.kind &&
	       u->layout.elem_size == t->layout.elem_size;
}

static wc_err plan_tiles(packer *pk)
{
	const wc_st_header *st = pk->st;
	pk->tensors = calloc(st->ntensors ? st->ntensors : 1, sizeof *pk->tensors);
	if (!pk->tensors)
		return wc_fail(WC_E_NOMEM, "out of memory");
	pk->version = 1;
	uint64_t ntiles = 0;
	uint32_t unit = UINT32_MAX; /* the tensor carrying the last unit, while it may still grow */
	for (uint32_t i = 0; i < st->ntensors; i++) {
		tensor_plan *t = &pk->tensors[i];
		t->st = &st->tensors[i];
		t->nbytes = t->own_bytes = t->st->end - t->st->begin;
		t->data = pk->in + st->data_offset + t->st->begin;
		t->layout = wc_layout_for_dtype(t->st->dtype);
		if (t->nbytes % t->layout.elem_size)
			t->layout = wc_layout_for_dtype("U8"); /* odd byte count: keep it as bytes */
		t->plain_layout = t->layout;
		t->allow_zstd = !is_float_dtype(t->st->dtype);
		t->unit = i;
		if (unit != UINT32_MAX && can_share(pk, &pk->tensors[unit], pk->tensors[unit].nbytes, t)) {
			tensor_plan *u = &pk->tensors[unit];
			u->nbytes += t->nbytes; /* its bytes follow the unit's in the input */
			t->unit = unit;
			t->first_tile = u->first_tile;
			t->ntiles = 1;
			pk->version = WC_FORMAT_VERSION_SHARED;
			continue;
		}
		unit = t->nbytes ? i : UINT32_MAX; /* an empty tensor ends a shared tile */
		t->first_tile = (uint32_t)ntiles;
		uint64_t n = (t->nbytes + pk->tile_size - 1) / pk->tile_size;
		if (ntiles + n > WC_LIMIT_TILES)
			return wc_fail(WC_E_RANGE, "more than %u tiles of %u bytes: use a larger --tile-size",
				       WC_LIMIT_TILES, pk->tile_size);
		t->ntiles = (uint32_t)n;
		ntiles += n;
		if (t->nbytes) {
			t->hist = calloc(t->layout.nplanes, sizeof *t->hist);
			if (!t->hist)
				return wc_fail(WC_E_NOMEM, "out of memory");
		}
	}
	pk->ntiles = (uint32_t)ntiles;
	pk->tiles = calloc(ntiles ? ntiles : 1, sizeof *pk->tiles);
	if (!pk->tiles)
		return wc_fail(WC_E_NOMEM, "out of memory");
	for (uint32_t i = 0; i < st->ntensors; i++) {
		tensor_plan *t = &pk->tensors[i];
		if (pk->tensors[t->unit].nbytes != pk->tensors[t->unit].own_bytes &&
		    !(t->own_hist = calloc(t->layout.nplanes, sizeof *t->own_hist)))
			return wc_fail(WC_E_NOMEM, "out of memory");
	}
	for (uint32_t i = 0; i < st->ntensors; i++) {
		const tensor_plan *t = &pk->tensors[i];
		for (uint32_t k = 0; t->unit == i && k < t->ntiles; k++) {
			tile_plan *tp = &pk->tiles[t->first_tile + k];
			tp->tensor = i;
			tp->offset = (uint64_t)k * pk->tile_size;
			uint64_t left = t->nbytes - tp->offset;
			tp->dsize = (uint32_t)(left < pk->tile_size ? left : pk->tile_size);
		}
	}
	return WC_OK;
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
	if ((e = plan_tiles(pk)))
		return e;

	pk->caller = pthread_self();
	pk->npasses = pk->opts->verify ? 4 : 3;
	pk->passes_before = 0;
	atomic_store(&pk->pass_done, 0);
	atomic_store(&pk->cursor, 0);
	run_workers(pk, hist_worker);
	pk->passes_before = 1;
	if (atomic_load(&pk->failed))
		return wc_fail(pk->first_err, "%s", pk->first_why);
	atomic_store(&pk->pass_done, 0);
	atomic_store(&pk->cursor, 0);
	run_workers(pk, dict_worker);
	pk->passes_before = 2;
	if (atomic_load(&pk->failed))
		return wc_fail(pk->first_err, "%s", pk->first_why);
	choose_layouts(pk);
	if ((e = build_tables(pk)))
		return e;

	/* Header placeholder and the prefix, then the payloads. */
	wc_file_header h = {0};
	h.version = pk->version;
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
	char *meta = NULL;
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
	meta = metadata_json(pk, prefix_len, &meta_len);
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
	if (fsync(fd) != 0) {
		e = wc_fail(WC_E_IO, "fsync %s: %s", tmp, strerror(errno));
		goto out;
	}
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
		}
		stats->dict_bytes = pk->dicts_len;
		stats->entropy_bound_bytes += (double)pk->dicts_len;
	}
	if (pk->opts->verify) {
		pk->passes_before = 3;
		atomic_store(&pk->pass_done, 0);
		e = verify_file(pk, tmp, prefix_len);
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

	char *tmp = NULL;
	int in_fd = -1, out_fd = -1;
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

	size_t tl = strlen(out_path) + 16;
	if (!(tmp = malloc(tl))) {
		e = wc_fail(WC_E_NOMEM, "out of memory");
		goto out;
	}
	snprintf(tmp, tl, "%s.tmp.XXXXXX", out_path);
	out_fd = mkostemp(tmp, O_CLOEXEC);
	if (out_fd < 0) {
		e = wc_fail(WC_E_IO, "creating %s: %s", tmp, strerror(errno));
		free(tmp);
		tmp = NULL;
		goto out;
	}
	if (pk.opts->temp_file)
		pk.opts->temp_file(tmp);
	mode_t mask = umask(0);
	umask(mask);
	fchmod(out_fd, 0666 & ~mask);
	if ((e = pack_into(&pk, out_fd, tmp, stats)))
		goto out;
	if (close(out_fd) != 0) {
		out_fd = -1;
		e = wc_fail(WC_E_IO, "closing %s: %s", tmp, strerror(errno));
		goto out;
	}
	out_fd = -1;
	if (rename(tmp, out_path) != 0) {
		e = wc_fail(WC_E_IO, "renaming %s to %s: %s", tmp, out_path, strerror(errno));
		goto out;
	}
	if (pk.opts->temp_file)
		pk.opts->temp_file(NULL);
	free(tmp);
	tmp = NULL;
	/* Make the rename durable: fsync the directory. */
	char *dir = strdup(out_path);
	if (dir) {
		char *slash = strrchr(dir, '/');
		const char *d = slash ? (slash == dir ? "/" : (*slash = 0, dir)) : ".";
		int dfd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd >= 0) {
			fsync(dfd);
			close(dfd);
		}
		free(dir);
	}
out:
	if (out_fd >= 0)
		close(out_fd);
	if (tmp) {
		unlink(tmp);
		if (pk.opts->temp_file)
			pk.opts->temp_file(NULL);
		free(tmp);
	}
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
		}
	free(pk.tensors);
	free(pk.tiles);
	free(pk.tables);
	wc_st_free(pk.st);
	pthread_mutex_destroy(&pk.lock);
	pthread_cond_destroy(&pk.cond);
	for (int i = 0; i < 64; i++)
		pthread_mutex_destroy(&pk.hist_lock[i]);
	return e;
}
