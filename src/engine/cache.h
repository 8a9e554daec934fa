/*
 * cache.h - the decoded-tile cache: byte-budgeted LRU, refcounted entries,
 * one decode shared by concurrent readers, batched dispatch to a backend.
 *
 * Design after DwarFS's block cache and squashfuse's cache: an entry is
 * refcounted; eviction drops only the cache's reference, so bytes a reader
 * still holds are freed when it releases them. A miss is queued; dispatch
 * threads (backend->concurrency of them) take up to backend->max_batch queued
 * tiles at a time, read their payloads and decode them as one batch, so a
 * GPU receives a reader's miss together with prefetches and other readers'
 * misses. Readers of a tile being decoded wait for that decode.
 *
 * Budget: decoded bytes of all entries, referenced or not, are kept at or
 * below budget_bytes except while more than the budget is referenced by
 * readers at once. Tile buffers are mmap()ed so freed memory leaves the RSS.
 */
#ifndef WC_CACHE_H
#define WC_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/wc_error.h"
#include "engine/backend.h"
#include "engine/tile_source.h"

typedef struct wc_cache wc_cache;

/* A decoded tile held by a reader: data is valid until wc_cache_release(). */
typedef struct wc_tile_ref {
	const uint8_t *data;
	uint32_t size;
} wc_tile_ref;

typedef struct wc_cache_opts {
	uint64_t budget_bytes;  /* decoded bytes kept; 0 = 1 GiB */
	wc_backend *backend;    /* not owned */
	uint32_t max_prefetch;  /* prefetched tiles in flight at most; 0 = 8 */
	uint64_t max_prefetch_bytes; /* and at most this many of their decoded bytes (0: no
				 * byte limit), so a stream through small tiles has as many
				 * bytes decoded ahead as one through large tiles; unused
				 * prefetched tiles are spared up to 4 times as many bytes */
	uint32_t read_threads;  /* threads that read a batch's payloads together with its
				 * dispatcher (pread of the packed file); 0 = the
				 * dispatcher reads them one after another */
	uint32_t prefill_tile_bytes; /* a thread fills the free-buffer pool with buffers
				 * of this many bytes right after creation, and each
				 * dispatcher makes a payload buffer of 4 such tiles
				 * before its first batch, so the first tiles read wait
				 * for neither: the backend's own host memory where it
				 * has an allocator (the CUDA backend's page-locked
				 * memory, slow to allocate: about 1.2 ms per MiB), else
				 * ordinary memory, faulted in as it is made; 0 = none */
	bool decode_misses_on_caller; /* a get of a tile no dispatcher has taken yet
				 * decodes it on the CPU instead of waiting (the
				 * calling thread with the idle threads of the shared
				 * CPU backend, wc_decode_jobs_cpu): for a backend
				 * whose calls have a long round trip
				 * (a GPU's 0.65 ms or more), so a reader's miss costs
				 * one CPU decode of its tile, not a place in the
				 * queue behind other streams' prefetches */
} wc_cache_opts;

typedef struct wc_cache_stats {
	uint64_t hits;          /* gets served from a decoded entry at once */
	uint64_t misses;        /* gets that waited for a decode (queued or joined) */
	uint64_t wait_ns;       /* time those gets waited, summed over readers */
	uint64_t decodes;       /* tiles decoded successfully */
	uint64_t decode_errors; /* tiles whose payload read or decode failed */
	uint64_t evictions;     /* entries dropped to stay within the budget */
	uint64_t prefetches;    /* tiles queued by wc_cache_prefetch() */
	uint64_t batches, batch_tiles; /* decode batches dispatched, tiles in them */
	uint64_t read_ns, decode_ns;   /* dispatcher time in payload reads and in the
				        * backend's decode calls, summed over dispatchers */
	uint64_t bytes_cached;  /* decoded bytes held now (entries decoded or decoding) */
	uint64_t buf_allocs, buf_frees; /* tile buffers mapped and backend buffers (tile and
				    * payload) allocated; freed */
	uint64_t buf_ns;        /* time spent allocating and freeing them */
	uint64_t caller_decodes; /* misses decoded by their reader on the CPU
				  * (decode_misses_on_caller), also counted in decodes */
} wc_cache_stats;

wc_err wc_cache_create(const wc_cache_opts *opts, wc_cache **out);
/* Waits for queued decodes, frees every entry. No reference may be held. */
void wc_cache_destroy(wc_cache *cache);

/* Get tile `tile` of src decoded; blocks until it is. The source is retained
 * while a decode of it is queued. (A .wcodec container's source is
 * wc_container_source(c), container.h.) Errors: the decode's (WC_E_IO,
 * WC_E_CORRUPT with a reason logged once per tile), WC_E_RANGE (bad index),
 * WC_E_NOMEM. Failed decodes are not cached. */
wc_err wc_cache_get(wc_cache *cache, wc_tile_source *src, uint32_t tile, wc_tile_ref **out);
/* wc_cache_get for a reader that holds `held` bytes of other tiles (earlier
 * tiles of the same request) and no other reference. Its miss is decoded
 * only when the tile fits in the budget beside the tiles charged and not
 * yet freed, or when nothing is charged but what readers waiting like this
 * one hold: so with such readers alone, decoded tiles and decodes in flight
 * stay within the budget, or within one tile plus what those readers hold
 * when tiles are larger than the budget, whatever their number (misses wait
 * for room). A plain wc_cache_get, whose caller may hold anything, is
 * decoded at once (a wait could wait for the caller itself). */
wc_err wc_cache_get_holding(wc_cache *cache, wc_tile_source *src, uint32_t tile, uint64_t held,
			    wc_tile_ref **out);
void wc_cache_release(wc_cache *cache, wc_tile_ref *ref);
/* Release like wc_cache_release(), with a hint: a sequential reader has read
 * this tile to its end and is unlikely to want it again (the kernel's page
 * cache now holds those bytes). Such tiles are kept only a few MiB deep (for
 * requests that arrive out of order), are evicted before any other, and the
 * buffers of older ones are reused for the next tiles decoded, so streaming
 * decodes into memory already faulted in. A get of such a tile still hits
 * while it is kept. The hint sticks to the tile: it is filed as consumed
 * when its last reference goes, even if that one is a plain release (two
 * requests of one stream, on two FUSE threads, may share a tile). */
void wc_cache_release_consumed(wc_cache *cache, wc_tile_ref *ref);

/* Queue decodes of tiles [first, first+count) not cached or in flight, up to
 * max_prefetch tiles and max_prefetch_bytes in flight; returns at once.
 * Prefetched entries enter the LRU at its cold end until a reader uses
 * them: unused prefetched tiles beyond 4 * max_prefetch (or 4 *
 * max_prefetch_bytes) are evicted first, oldest first; up to that many are
 * spared while used tiles can be evicted instead (so a streaming reader's
 * readahead survives until it arrives). A prefetch that would need to evict
 * tiles readers hold is dropped. */
void wc_cache_prefetch(wc_cache *cache, wc_tile_source *src, uint32_t first, uint32_t count);

/* Count `bytes` of memory that the cache's users hold outside it because
 * of what they read through it (an open container's tensor table, tile
 * index and header: a file of thousands of tensors holds megabytes) against
 * the budget, so that the whole stays within it: tiles are evicted to make
 * room at once. A negative `bytes` gives back what an earlier call charged
 * (the container was closed). Thread-safe. */
void wc_cache_charge(wc_cache *cache, int64_t bytes);

/* The bytes decoded tiles may take now: the budget less what was charged
 * (wc_cache_charge). Thread-safe. */
uint64_t wc_cache_room(wc_cache *cache);

/* Drop every unreferenced entry of source id `id` (a file being closed):
 * decoded tiles, queued prefetches (releasing the source), and tiles being
 * decoded once their decode ends unless a reader waits for them. Tiles
 * readers hold stay until released, then age out of the LRU. */
void wc_cache_drop_source(wc_cache *cache, uint64_t id);

void wc_cache_get_stats(wc_cache *cache, wc_cache_stats *out);

#endif /* WC_CACHE_H */
