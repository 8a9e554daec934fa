/*
 * cache_impl.h - the tile cache's state, shared by its files (cache.c: the
 * table, the LRU lists, entries and the public calls; cache_buffers.c: tile
 * and payload buffers and their pool; cache_dispatch.c: batches, decodes and
 * the dispatcher threads). Not installed.
 */
#ifndef WC_CACHE_IMPL_H
#define WC_CACHE_IMPL_H

#include "engine/cache.h"

#include <limits.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/clock.h"
#include "engine/threadpool.h"

#define DEFAULT_BUDGET (1ull << 30)
#define DEFAULT_MAX_PREFETCH 8u
/* Tile buffers this big or bigger are mmap()ed so that freeing them returns
 * the memory to the OS at once (glibc's malloc may keep large freed chunks
 * in its heap once its dynamic mmap threshold has grown). */
#define MMAP_MIN_BYTES (64u << 10)
/* A batch stops growing at this many payload bytes (a single larger tile
 * is a batch of its own), and a dispatcher keeps its payload buffer between
 * batches up to a little more: re-faulting the buffer for every batch would
 * cost as much as decoding it, and two dispatchers' buffers (the CPU
 * backend's concurrency) stay well inside the daemon's RSS allowance of
 * 64 MiB over the cache budget. */
#define BATCH_PAYLOAD_MAX (16u << 20)
#define PAYLOAD_KEEP_BYTES (BATCH_PAYLOAD_MAX + (1u << 20))
#define PAYLOAD_ALIGN 16u
/* Tiles a sequential reader has read to their end (wc_cache_release_consumed)
 * stay on the consumed FIFO up to this many bytes (and at least the newest
 * one), for requests the kernel sends out of order; older ones are dropped
 * and their buffers go to the free-buffer pool, up to POOL_MAX_BYTES, for
 * the next tiles to decode into: a streaming reader then decodes into pages
 * already faulted in instead of faulting (and zeroing) a fresh mapping for
 * every tile. A request that comes after its tile left the window decodes
 * it again (0-2 of 1045 tiles for one cold reader of a .wcodec file).
 *
 * The pool hands out the buffer it got last, so the window also sets how
 * long ago a reused buffer was last touched. Where the CPU decodes into
 * ordinary memory the window is short: with 4 MiB a stream of qvq tiles
 * went round 15 buffers (13 MiB, plus as much page cache written in
 * between, past this machine's 32 MiB L3), with 1 MiB 12, and over twenty
 * alternating reads of images.npy the daemon used 6% less CPU (120 against
 * 128 ms) and read 4% faster (2-core machine). The backend's page-locked buffers are written by
 * the device, not through the CPU's caches: their window stays 4 MiB,
 * which sixteen concurrent streams on the GPU machine were tuned with. */
#define CONSUMED_KEEP_BYTES (1u << 20)
#define CONSUMED_KEEP_BACKEND_BYTES (4u << 20)
#define POOL_MAX_BYTES (48u << 20)
/* The pool's limit when the backend allocates the buffers (page-locked
 * memory: allocating and freeing it costs about 1.2 ms per MiB, and
 * freeing may wait for the device): room for every buffer four streams
 * keep in flight, so a steady read allocates and frees none. */
#define POOL_MAX_BACKEND_BYTES (128u << 20)
/* A prefetched tile t tiles past the first one asked for is due this much
 * later per tile (about the time a 2 GB/s stream takes to read 1 MiB): it
 * orders the prefetch queue across streams, it is no deadline. */
#define PREFETCH_STEP_NS 500000u
/* Waits and batches longer than this are traced at WC_LOG_DEBUG. */
#define SLOW_NS 2000000u

enum entry_state { E_QUEUED, E_DECODING, E_READY, E_FAILED };
enum entry_list { ON_NONE, ON_DEMAND, ON_PREFETCH, ON_LRU, ON_COLD, ON_CONSUMED };

typedef struct entry {
	wc_tile_ref ref;          /* what readers get; first so a ref is the entry */
	uint64_t id;              /* source id */
	uint32_t tile;
	uint8_t state;            /* entry_state */
	uint8_t list;             /* entry_list */
	bool prefetch_in_flight;  /* counts in cache->prefetch_in_flight (and _bytes) */
	bool in_table;
	bool dropped;             /* its source was dropped while it was decoding */
	bool consumed;            /* a sequential reader read it to its end */
	bool waited;              /* a reader waited for it when its decode began */
	uint64_t due;             /* prefetch queue order: when its reader should want it (ns) */
	uint32_t refs;            /* readers holding or waiting */
	uint64_t charge;          /* bytes counted in cache->bytes */
	uint64_t dying;           /* discarded: its charge, in cache->dying_bytes until freed */
	bool unbounded;           /* wanted by a plain wc_cache_get: decoded whatever the room */
	uint32_t csize;           /* payload bytes */
	struct entry *hnext;      /* hash chain; the free list once out of the table */
	struct entry *prev, *next;
	wc_tile_source *src;      /* retained while QUEUED or DECODING */
	uint8_t *buf;             /* ref.size bytes used */
	size_t buf_cap;           /* bytes mapped at buf (>= ref.size; tile_free's size) */
	bool buf_backend;         /* buf is the backend's memory (buf_alloc), else mmap()ed or malloc()ed */
	bool buf_fresh;           /* buf was mapped for this decode and not faulted in yet */
	wc_err err;               /* FAILED: the decode's error and reason */
	char *reason;
} entry;

/* A free tile buffer in the pool: the struct lives in the buffer itself. */
typedef struct free_buf {
	struct free_buf *next;
	size_t cap;
	bool backend; /* the backend's memory (buf_alloc), else mmap()ed */
} free_buf;

typedef struct entry_list_head {
	entry *head, *tail;
	size_t n;
} entry_list_head;

/* A dispatch thread and its scratch, allocated once. */
typedef struct dispatcher {
	struct wc_cache *cache;
	pthread_t thread;
	entry **batch;        /* max_batch */
	wc_tile_job *jobs;    /* max_batch */
	uint32_t *job_entry;  /* job index -> batch index */
	wc_tile_source **srcs;
	uint8_t *payload;     /* payload buffer (wc_backend_buf_alloc) */
	size_t payload_cap;
	uint64_t read_ns, decode_ns; /* the last batch's, added to the stats when it is published */
	size_t *payload_off;  /* max_batch: where entry i's payload goes in the buffer */
} dispatcher;

struct wc_cache {
	pthread_mutex_t lock;
	pthread_cond_t work; /* dispatchers: something queued, or stop */
	pthread_cond_t done; /* readers: a batch was published */
	entry **buckets;
	size_t nbuckets;     /* power of two */
	size_t count;        /* entries in the table */
	entry_list_head demand, prefetch, lru, cold, consumed;
	uint64_t consumed_bytes; /* decoded bytes on the consumed FIFO */
	uint64_t cold_bytes;     /* decoded bytes on the cold FIFO */
	struct free_buf *pool;   /* free tile buffers, smallest first */
	uint64_t pool_bytes;     /* bytes mapped in the pool; counted against the budget */
	size_t cold_keep; /* unused prefetched entries spared while the LRU has victims */
	uint64_t cold_keep_bytes; /* ... and their bytes (with max_prefetch_bytes) */
	uint64_t budget, bytes;
	/* Bytes held by readers now waiting for another tile of the same read
	 * (wc_cache_get_holding): they cannot be freed before that tile is
	 * decoded, so they never keep its decode from starting (wc_tc_room). */
	uint64_t waiting_held;
	bool room_wait;    /* a demand waits for room: signal work when bytes go */
	/* Charges of discarded entries whose buffers are not freed yet (that
	 * happens without the lock, in wc_tc_free_chain): still memory. */
	uint64_t dying_bytes;
	uint64_t external; /* memory held for the cache's users outside it (wc_cache_charge) */
	uint32_t max_prefetch, prefetch_in_flight;
	uint64_t max_prefetch_bytes, prefetch_bytes_in_flight; /* decoded bytes of those tiles */
	uint32_t max_batch;
	wc_backend *backend;
	bool stop;
	unsigned ndispatch;
	dispatcher *dispatchers;
	wc_threadpool *readers; /* payload reads of a batch in parallel; NULL: serial */
	uint32_t ndecoding;     /* entries DECODING now (in dispatchers' batches) */
	uint32_t prefill_bytes; /* wc_cache_opts.prefill_tile_bytes, page-rounded; 0: none */
	size_t payload_prealloc; /* each dispatcher's first payload buffer (dispatch_main); 0: none */
	pthread_t prefill;      /* fills the pool (pool_prefill_main); joined by destroy */
	bool prefilling;        /* the prefill thread was started */
	bool caller_decodes;    /* wc_cache_opts.decode_misses_on_caller */
	uint64_t t_created;     /* wc_mono_ns() at creation, for the debug trace */
	_Atomic uint64_t buf_allocs, buf_frees, buf_ns; /* buffers mapped and freed, and the time: stats */
	wc_cache_stats st;
};

/* Shared between the cache's files (each defined where its name says). */
uint64_t wc_tc_budget_of(const wc_cache *c);
/* Whether the decode of e may start: a reader that did not say what it
 * holds wants it (e->unbounded), or it fits in the budget beside what is
 * charged and not yet freed, or nothing is but bytes that readers waiting
 * for a decode hold (then one tile decodes at a time, whatever its size:
 * memory stays within it plus what those readers hold). `dead`: entries
 * just evicted for e, whose buffers are freed or lent to it before it
 * decodes. Lock held. */
bool wc_tc_room(const wc_cache *c, const entry *e, const entry *dead);
void *wc_tc_buf_alloc(wc_cache *c, size_t bytes);
uint8_t *wc_tc_buf_alloc_ready(wc_cache *c, size_t bytes);
bool wc_tc_buf_fits(size_t cap, size_t n);
void wc_tc_buf_free(wc_cache *c, void *p, size_t bytes);
bool wc_tc_entry_alloc_buf(wc_cache *c, entry *e);
void wc_tc_entry_discard(wc_cache *c, entry *e, entry **dead);
void wc_tc_entry_job(const entry *e, const uint8_t *payload, wc_tile_job *job);
void wc_tc_entry_set_failed(wc_cache *c, entry *e, wc_err err, const char *reason);
void wc_tc_fault_in_fresh(entry *e);
void wc_tc_free_chain(wc_cache *c, entry *e);
void wc_tc_list_push_head(wc_cache *c, entry *e, int which);
/* On queue `which` at its tail; the prefetch queue in order of `due`. */
void wc_tc_list_push_tail(wc_cache *c, entry *e, int which);
void wc_tc_list_insert_by_due(wc_cache *c, entry *e, int which);
/* The hash table of entries by (source id, tile). */
entry *wc_tc_table_find(const wc_cache *c, uint64_t id, uint32_t tile);
void wc_tc_table_insert(wc_cache *c, entry *e);
/* Free an entry out of the table and off every list, without the lock. */
void wc_tc_entry_free(wc_cache *c, entry *e);
/* Bytes were freed: wake the dispatchers if a demand waits for room. Lock held. */
void wc_tc_room_freed(wc_cache *c);
void wc_tc_list_unlink(wc_cache *c, entry *e);
void wc_tc_make_room(wc_cache *c, uint64_t need, entry **dead);
uint64_t wc_tc_pool_max(const wc_cache *c);
void wc_tc_pool_put(wc_cache *c, uint8_t **buf, size_t *cap, bool *backend);
void wc_tc_pool_shrink(wc_cache *c, uint64_t bytes);
uint8_t *wc_tc_pool_take(wc_cache *c, size_t n, size_t *cap, bool *backend);
void wc_tc_prefetch_done(wc_cache *c, entry *e);
void wc_tc_publish_entry(wc_cache *c, entry *e, entry **dead);
void wc_tc_recycle_buffers(entry **batch, size_t nb, entry *dead);
void wc_tc_start_decode(wc_cache *c, entry *e, entry **dead);
void wc_tc_table_remove(wc_cache *c, entry *e);
void wc_tc_tile_free(wc_cache *c, uint8_t *p, size_t n, bool backend);
void *wc_tc_dispatch_main(void *arg);
void *wc_tc_pool_prefill_main(void *arg);

#endif /* WC_CACHE_IMPL_H */
