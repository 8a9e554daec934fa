/* readahead.c - sequential stream detection (readahead.h). */
#include "fuse/readahead.h"

#include <string.h>

void wcfs_ra_init(wcfs_ra *ra)
{
	memset(ra, 0, sizeof *ra);
	pthread_mutex_init(&ra->lock, NULL);
}

void wcfs_ra_destroy(wcfs_ra *ra) { pthread_mutex_destroy(&ra->lock); }

int wcfs_ra_note(wcfs_ra *ra, uint64_t off, uint64_t len, uint64_t last_span_off,
		 uint64_t tolerance, uint64_t min_run)
{
	return wcfs_ra_note_stream(ra, off, len, last_span_off, tolerance, min_run, NULL);
}

int wcfs_ra_note_stream(wcfs_ra *ra, uint64_t off, uint64_t len, uint64_t last_span_off,
			uint64_t tolerance, uint64_t min_run, int *streaming)
{
	if (streaming)
		*streaming = 0;
	uint64_t end = off + len;
	int fire = 0;
	pthread_mutex_lock(&ra->lock);
	uint64_t now = ++ra->clock;
	wcfs_ra_slot *hit = NULL, *lru = &ra->slot[0];
	for (int i = 0; i < WCFS_RA_SLOTS; i++) {
		wcfs_ra_slot *s = &ra->slot[i];
		if (s->stamp && off <= s->end + tolerance && end + tolerance >= s->end &&
		    end > s->start) {
			hit = s;
			break;
		}
		if (s->stamp < lru->stamp)
			lru = s;
	}
	if (!hit) {
		*lru = (wcfs_ra_slot){ .start = off, .end = end, .read = len, .stamp = now };
		pthread_mutex_unlock(&ra->lock);
		return 0;
	}
	hit->stamp = now;
	if (off < hit->start && hit->start - off <= tolerance)
		hit->start = off;
	if (end > hit->end)
		hit->end = end;
	hit->read += len;
	/* A stream reads most of what it spans. Random reads of a file only a
	 * few hundred tolerances long also land near some slot's frontier and
	 * stretch it by up to a tolerance each, but read a small share of it:
	 * such a slot starts again at this read, so a stream that joins it is
	 * found as soon as in a fresh slot. */
	if (hit->read < (hit->end - hit->start) / 2) {
		hit->start = off;
		hit->end = end;
		hit->read = len;
	}
	const uint64_t span = hit->end - hit->start;
	const int stream = span >= min_run && hit->read >= min_run;
	if (streaming)
		*streaming = stream;
	if (stream && hit->issued_tile != last_span_off + 1) {
		hit->issued_tile = last_span_off + 1;
		fire = 1;
	}
	pthread_mutex_unlock(&ra->lock);
	return fire;
}
