/*
 * readahead.h - sequential stream detection for one virtual file.
 *
 * Through the page cache the kernel sends reads of at most max_pages (128 KiB
 * to 1 MiB), from several worker threads and not always in order; several
 * readers (loader threads) may stream different parts of one file at once.
 * A file keeps WCFS_RA_SLOTS stream slots; a read joins the slot whose
 * frontier (end of the bytes read so far) it touches within a tolerance,
 * else it replaces the least recently used slot. A slot whose reads span
 * `min_run` bytes or more and asked for at least half of them (and for
 * min_run bytes) is a sequential stream: the caller then decodes
 * the next tiles ahead of it (wc_cache_prefetch), once per tile the stream
 * enters.
 * Same idea as the kernel's on-demand readahead and DwarFS's sequential
 * access detector; the tolerance absorbs reordering between FUSE threads.
 */
#ifndef WCFS_READAHEAD_H
#define WCFS_READAHEAD_H

#include <pthread.h>
#include <stdint.h>

/* Streams one file can have at once. Requests of concurrent streams come
 * round-robin, so with fewer slots than streams each request evicts the slot
 * another stream needs next: none is detected, nothing is prefetched and no
 * tile is released as consumed (16 dd readers of one file on 8 slots: 1,635
 * of 4,097 tile lookups missed against 20 with 4 readers on an H100). 64 covers a loader's worker threads; the scan of a
 * read costs well under a microsecond. */
#define WCFS_RA_SLOTS 64

typedef struct wcfs_ra_slot {
	uint64_t start, end;  /* virtual byte range the slot's reads span, [start, end) */
	uint64_t read;        /* bytes its reads asked for (overlaps counted again) */
	uint64_t issued_tile; /* span offset of the tile a prefetch was last issued for, +1; 0 = none */
	uint64_t stamp;       /* LRU clock */
} wcfs_ra_slot;

typedef struct wcfs_ra {
	pthread_mutex_t lock;
	uint64_t clock;
	wcfs_ra_slot slot[WCFS_RA_SLOTS];
} wcfs_ra;

void wcfs_ra_init(wcfs_ra *ra);
void wcfs_ra_destroy(wcfs_ra *ra);

/* Record a read of virtual bytes [off, off+len) whose last byte lies in the
 * span (tile) starting at virtual offset `last_span_off`. Returns 1 when the
 * read continues a stream of at least `min_run` bytes, at least half of
 * which its reads asked for (random reads that happen to land near each
 * other span much and read little), and no
 * prefetch was issued yet for that tile of that stream: the caller should
 * prefetch the tiles after off+len. `tolerance` is how far (bytes) a read may
 * start before or after the frontier and still join the stream. */
int wcfs_ra_note(wcfs_ra *ra, uint64_t off, uint64_t len, uint64_t last_span_off,
		 uint64_t tolerance, uint64_t min_run);

/* wcfs_ra_note(), also setting *streaming (if not NULL) to 1 when the read
 * belongs to a sequential stream of at least min_run bytes, else 0: the
 * tiles it read to their end can then be released as consumed
 * (wc_cache_release_consumed). */
int wcfs_ra_note_stream(wcfs_ra *ra, uint64_t off, uint64_t len, uint64_t last_span_off,
			uint64_t tolerance, uint64_t min_run, int *streaming);

#endif /* WCFS_READAHEAD_H */
