/* writer_impl.h - the packer's state, shared by the files of the writer
 * (writer.c: orchestration, encoding, metadata; writer_analyse.c: tiling,
 * histograms, layouts, tables; writer_verify.c: the written file decoded
 * against the input). Not installed. */
#ifndef WC_WRITER_IMPL_H
#define WC_WRITER_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "codec/lossy.h"
#include "codec/tile_codec.h"
#include "container/container.h"
#include "container/safetensors.h"
#include "engine/threadpool.h"

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
	uint64_t dict_off;                     /* within the dictionary section (dictionary or scales) */
	/* Lossy (layout "int8", docs/FORMAT.md 2.2): data is codes, nbytes the
	 * element count, and the tensor's tiles count codes too (tile k holds
	 * codes [k * tile_size / lw, ...)); own_bytes stays the input's. */
	int lossy;
	unsigned lw;                           /* bytes per element of the dtype */
	int8_t *codes;
	float *scales;
	wc_lossy_params lp;
	wc_lossy_stats ls;
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
	wc_threadpool *pool;   /* threads workers, for every parallel pass */
	const uint8_t *in;
	uint64_t in_size;
	wc_st_header *st;
	tensor_plan *tensors;
	tile_plan *tiles;
	uint32_t ntiles;
	wc_freqtab *tables;
	uint32_t ntables;
	uint64_t dicts_len;    /* dictionary section bytes */
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

/* Report progress of the current pass (pass_bytes of it done) from the
 * caller's thread (opts->progress); other threads' calls do nothing. */
void wc_pk_report(packer *pk, uint64_t pass_bytes);
/* Record the first failure (its reason from wc_last_detail()) and make
 * every worker stop. */
void wc_pk_fail(packer *pk, wc_err e);
/* Run fn(pk) pk->threads times at once on pk->pool, the caller's thread
 * among them, and return when all have. */
void wc_pk_run(packer *pk, void *(*fn)(void *));

/* Analysis (writer_analyse.c). Cut the tensors into units and tiles
 * (shared tiles of small tensors, docs/FORMAT.md 1.6). Errors: WC_E_NOMEM,
 * WC_E_RANGE (too many tiles). */
wc_err wc_pk_plan_tiles(packer *pk);
/* Workers for wc_pk_run: pass 1, the tensor-plane histograms (and a shared
 * tile's tensors' own); pass 1b, the dictionary candidates. */
void *wc_pk_hist_worker(void *arg);
void *wc_pk_dict_worker(void *arg);
/* Per unit: byte planes or a dictionary, by estimated size. */
void wc_pk_choose_layouts(packer *pk);
/* Per unit-plane: its own table, a pooled one, or none. Errors: WC_E_NOMEM. */
wc_err wc_pk_build_tables(packer *pk);

/* Lossy tensors (writer_lossy.c). Whether the options take tensor st
 * lossy (not when it takes 256 values or fewer: lossless is exact and no
 * larger); the worker quantizing each lossy tensor into t->codes and
 * t->scales (taking tensors in turn); the decoded bytes of tile tp of
 * lossy tensor t (tp->dsize * t->lw bytes) into out. */
int wc_pk_lossy_wanted(const packer *pk, const wc_st_tensor *st);
void *wc_pk_lossy_worker(void *arg);
void wc_pk_lossy_tile(const tensor_plan *t, const tile_plan *tp, uint8_t *out);
/* A tile's decoded bytes (the virtual file's): tp->dsize, times lw when lossy. */
static inline uint64_t wc_pk_tile_bytes(const tensor_plan *t, const tile_plan *tp)
{
	return t->lossy ? (uint64_t)tp->dsize * t->lw : tp->dsize;
}

/* Reopen the written temporary file and decode every tile against the
 * input (writer_verify.c). Errors: the reader's, WC_E_CORRUPT. */
wc_err wc_pk_verify(packer *pk, const char *tmp, size_t prefix_len);

#endif /* WC_WRITER_IMPL_H */
