/* writer_analyse.c - what the packer decides before it encodes
 * (writer_impl.h): units and tiles, tensor-plane histograms, dictionaries,
 * layouts and frequency tables. */
#include "container/writer_impl.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "container/format.h"
#include "core/limits.h"

static int is_float_dtype(const char *dtype)
{
	return dtype[0] == 'F' || strcmp(dtype, "BF16") == 0 || dtype[0] == 'C';
}

/* ---- pass 1: tensor-plane histograms -------------------------------- */

void *wc_pk_hist_worker(void *arg)
{
	packer *pk = arg;
	uint64_t (*local)[256] = malloc(sizeof(uint64_t[WC_MAX_PLANES][256]));
	if (!local) {
		wc_pk_fail(pk, wc_fail(WC_E_NOMEM, "out of memory"));
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
		const uint64_t bytes = wc_pk_tile_bytes(t, tp);
		wc_pk_report(pk, atomic_fetch_add(&pk->pass_done, bytes) + bytes);
	}
	free(local);
	return NULL;
}

/* ---- pass 1b: dictionaries ------------------------------------------ */

/* Workers take tensors in turn: the sorted distinct values of each tensor of
 * 2-, 4- or 8-byte elements (wc_dict_build gives up past 65536 values, after
 * about 65536 elements of a tensor of continuous values) and the
 * histograms of its index planes. */
void *wc_pk_dict_worker(void *arg)
{
	packer *pk = arg;
	uint8_t *dict = malloc((size_t)WC_DICT_MAX_ENTRIES * 8);
	uint64_t *counts = malloc((size_t)WC_DICT_MAX_ENTRIES * sizeof *counts);
	if (!dict || !counts) {
		wc_pk_fail(pk, wc_fail(WC_E_NOMEM, "out of memory"));
		goto done;
	}
	for (;;) {
		uint32_t i = atomic_fetch_add(&pk->cursor, 1);
		if (i >= pk->st->ntensors || atomic_load(&pk->failed))
			break;
		tensor_plan *t = &pk->tensors[i];
		unsigned w = t->plain_layout.elem_size;
		/* a shared tile has one layout for all its tensors: no dictionary */
		if (!t->lossy && t->nbytes && w >= 2 && t->unit == i && t->nbytes == t->own_bytes) {
			uint32_t k = 0;
			wc_err e = wc_dict_build(t->data, t->nbytes / w, w, dict, &k, counts);
			if (e == WC_OK) {
				t->dict = malloc((size_t)k * w);
				t->index_hist = calloc(2, sizeof *t->index_hist);
				if (!t->dict || !t->index_hist) {
					wc_pk_fail(pk, wc_fail(WC_E_NOMEM, "out of memory"));
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
				wc_pk_fail(pk, e);
				break;
			}
		}
		wc_pk_report(pk, atomic_fetch_add(&pk->pass_done, t->own_bytes) + t->own_bytes);
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
void wc_pk_choose_layouts(packer *pk)
{
	pk->dicts_len = 0;
	for (uint32_t i = 0; i < pk->st->ntensors; i++) {
		tensor_plan *t = &pk->tensors[i];
		const wc_layout pl = t->plain_layout;
		if (t->lossy) { /* its scales, where a dictionary would be */
			t->dict_off = pk->dicts_len;
			pk->dicts_len += 4ull * wc_lossy_nscales(&t->lp);
			continue;
		}
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
		double cost = (double)t->dict_entries * pl.elem_size + 48.0; /* + its record */
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
wc_err wc_pk_build_tables(packer *pk)
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
	return !u->lossy && !t->lossy && u->own_bytes < small && t->nbytes && t->nbytes < small &&
	       unit_bytes + t->nbytes <= pk->tile_size &&
	       strcmp(u->st->dtype, t->st->dtype) == 0 && u->layout.kind == t->layout.kind &&
	       u->layout.elem_size == t->layout.elem_size;
}

wc_err wc_pk_plan_tiles(packer *pk)
{
	const wc_st_header *st = pk->st;
	pk->tensors = calloc(st->ntensors ? st->ntensors : 1, sizeof *pk->tensors);
	if (!pk->tensors)
		return wc_fail(WC_E_NOMEM, "out of memory");
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
		if (wc_pk_lossy_wanted(pk, t->st)) { /* its codes are coded, one byte plane */
			t->lossy = 1;
			t->lw = t->plain_layout.elem_size;
			t->nbytes = t->own_bytes / t->lw;
			t->layout = wc_layout_for_dtype("U8");
			t->allow_zstd = 0;
		}
		if (unit != UINT32_MAX && can_share(pk, &pk->tensors[unit], pk->tensors[unit].nbytes, t)) {
			tensor_plan *u = &pk->tensors[unit];
			u->nbytes += t->nbytes; /* its bytes follow the unit's in the input */
			t->unit = unit;
			t->first_tile = u->first_tile;
			t->ntiles = 1;
			continue;
		}
		unit = t->nbytes ? i : UINT32_MAX; /* an empty tensor ends a shared tile */
		t->first_tile = (uint32_t)ntiles;
		uint64_t n = (t->own_bytes + pk->tile_size - 1) / pk->tile_size;
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
		if (!t->lossy && pk->tensors[t->unit].nbytes != pk->tensors[t->unit].own_bytes && /* a shared tile */
		    !(t->own_hist = calloc(t->layout.nplanes, sizeof *t->own_hist)))
			return wc_fail(WC_E_NOMEM, "out of memory");
	}
	for (uint32_t i = 0; i < st->ntensors; i++) {
		const tensor_plan *t = &pk->tensors[i];
		const uint32_t per = pk->tile_size / (t->lossy ? t->lw : 1); /* a lossy tile's codes */
		for (uint32_t k = 0; t->unit == i && k < t->ntiles; k++) {
			tile_plan *tp = &pk->tiles[t->first_tile + k];
			tp->tensor = i;
			tp->offset = (uint64_t)k * per;
			uint64_t left = t->nbytes - tp->offset;
			tp->dsize = (uint32_t)(left < per ? left : per);
		}
	}
	return WC_OK;
}

