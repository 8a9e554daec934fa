/* decode_tiles.c - decoding a whole container through a decode backend, in
 * tile order, for unpack, verify and cat.
 *
 * Double-buffered: while the backend decodes one batch on a helper thread,
 * the calling thread hands the previous batch to the sink (which writes it)
 * and reads the next batch's payloads, so reading, decoding and writing
 * overlap. Memory: two batches of at most BATCH_BYTES decoded bytes plus
 * their payloads, allocated once.
 *
 * A batch holds the decoded bytes of the backend's preferred call
 * (max_batch tiles of the nominal tile size): a count of tiles would make
 * batches of small tiles tiny. On two cores the CPU backend prefers 4
 * tiles; this file's 1,045 tiles of 139 KB on average then made 260
 * batches, each a thread start, a join and the pool's hand-offs: `wcodec
 * cat` took 138 ms, against 111 ms with 4 MiB batches (2-core machine). */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "container/container.h"
#include "engine/backend.h"

#define BATCH_BYTES (64u << 20) /* decoded bytes per batch */
#define BATCH_TILES_MAX 1024u

enum { TILE_JOB, TILE_DONE, TILE_REPEAT };

/* Tile t is the same as tile t - 1 as far as the index says: same tensor
 * (so layout and tables), payload size and checksum, decoded size and
 * checksum. Its payload, once read and checked, is the same bytes, so it
 * decodes to the same bytes: with skip_repeats it is not decoded again (a
 * constant tensor, or a file that claims terabytes of one tile). */
static bool same_as_previous(const wc_container *c, bool skip, uint32_t t)
{
	if (!skip || t == 0)
		return false;
	const wc_tile_info *a = wc_container_tile(c, t - 1), *b = wc_container_tile(c, t);
	return a->tensor == b->tensor && a->csize == b->csize && a->chash == b->chash && a->dsize == b->dsize &&
	       a->dhash == b->dhash;
}

/* Tiles in one run, across batches (cli_decode_opts.skip_repeats). */
typedef struct run_state {
	bool skip_repeats;
	bool prev_payload_ok;   /* the last tile filled had its payload read and checked */
	wc_err last_status;     /* the last tile decoded (or decoded on the CPU by fill) */
	char last_why[400];
	uint32_t decoded;       /* tiles decoded */
} run_state;

typedef struct batch {
	wc_backend *be;
	const wc_container *c;
	run_state *run;
	uint8_t *kind;         /* per tile: TILE_JOB, TILE_DONE (status final), TILE_REPEAT */
	uint32_t first, n, njobs;
	wc_tile_job *jobs;
	uint32_t *slot_of_job; /* jobs[q] decodes tile first + slot_of_job[q] */
	wc_err *status;        /* per tile of the batch */
	char (*why)[400];
	uint32_t *out_off;     /* per tile: offset of its bytes in outs */
	uint8_t *payloads, *outs;
	size_t pcap, ocap;
	wc_err decode_err;
	pthread_t thread;
	int running;
} batch;

static void batch_free(batch *b)
{
	free(b->jobs);
	free(b->slot_of_job);
	free(b->status);
	free(b->why);
	free(b->out_off);
	free(b->kind);
	wc_backend_buf_free(b->be, b->payloads, b->pcap);
	wc_backend_buf_free(b->be, b->outs, b->ocap);
}

static wc_err batch_alloc(batch *b, uint32_t cap)
{
	b->jobs = calloc(cap, sizeof *b->jobs);
	b->slot_of_job = calloc(cap, sizeof *b->slot_of_job);
	b->status = calloc(cap, sizeof *b->status);
	b->why = calloc(cap, sizeof *b->why);
	b->out_off = calloc(cap, sizeof *b->out_off);
	b->kind = calloc(cap, sizeof *b->kind);
	if (!b->jobs || !b->slot_of_job || !b->status || !b->why || !b->out_off || !b->kind)
		return wc_fail(WC_E_NOMEM, "out of memory for a batch of %u tiles", cap);
	return WC_OK;
}

/* Page-locked with cuda (the plugin DMAs straight from and into them):
 * allocated once, by cli_decode_tiles() for its largest batch, since the
 * driver pins and unpins every such buffer at a cost above a batch's decode. */
static wc_err batch_buffers(batch *b, size_t pbytes, size_t obytes)
{
	b->payloads = wc_backend_buf_alloc(b->be, pbytes);
	b->pcap = b->payloads ? pbytes : 0;
	b->outs = wc_backend_buf_alloc(b->be, obytes);
	b->ocap = b->outs ? obytes : 0;
	if (!b->payloads || !b->outs)
		return wc_fail(WC_E_NOMEM, "out of memory for %zu bytes of tiles", pbytes + obytes);
	return WC_OK;
}

/* Read tiles [first, first+n): payloads (hash-checked) and jobs, into
 * buffers batch_buffers() sized for any batch. A tile whose payload cannot
 * be read gets its status here and no job. */
static wc_err batch_fill(batch *b, uint32_t first, uint32_t n)
{
	wc_tile_source *src = wc_container_source((wc_container *)b->c);
	b->first = first;
	b->n = n;
	b->njobs = 0;
	size_t poff = 0, ooff = 0;
	run_state *r = b->run;
	for (uint32_t k = 0; k < n; k++) {
		uint32_t t = first + k, cs = src->ops->tile_csize(src, t), ds = src->ops->tile_dsize(src, t);
		const bool same = same_as_previous(b->c, r->skip_repeats, t);
		uint8_t *payload = b->payloads + poff;
		b->out_off[k] = (uint32_t)ooff;
		poff += cs;
		ooff += same ? 0 : ds; /* batch_tiles counts no output for it */
		b->why[k][0] = 0;
		b->kind[k] = TILE_DONE;
		b->status[k] = src->ops->read_payload(src, t, payload);
		const bool prev_ok = r->prev_payload_ok;
		r->prev_payload_ok = b->status[k] == WC_OK;
		if (b->status[k]) {
			snprintf(b->why[k], sizeof b->why[k], "%s", wc_last_detail());
			continue;
		}
		if (same && prev_ok) {
			b->kind[k] = TILE_REPEAT; /* the previous tile's status, in batch_finish */
			continue;
		}
		if (same) {
			/* Its predecessor's payload is damaged, so this one is the
			 * run's first good one: decoded here, on the CPU. */
			uint8_t *scratch = malloc(ds ? ds : 1);
			b->status[k] = scratch ? wc_container_decode_tile(b->c, t, payload, scratch)
					       : wc_fail(WC_E_NOMEM, "out of memory");
			if (b->status[k])
				snprintf(b->why[k], sizeof b->why[k], "%s", wc_last_detail());
			free(scratch);
			r->decoded++;
			continue;
		}
		b->kind[k] = TILE_JOB;
		wc_tile_job *j = &b->jobs[b->njobs];
		memset(j, 0, sizeof *j);
		src->ops->describe_job(src, t, j);
		j->payload = payload;
		j->payload_size = cs;
		j->out = b->outs + b->out_off[k];
		j->out_size = ds;
		b->slot_of_job[b->njobs++] = k;
	}
	return WC_OK;
}

/* Tiles of the batch that starts at tile `first`: while its decoded bytes
 * are under `target`, at most BATCH_BYTES (unless one tile) and
 * BATCH_TILES_MAX tiles. */
static uint32_t batch_tiles(const wc_container *c, bool skip, uint32_t first, uint32_t ntiles, uint64_t target)
{
	wc_tile_source *src = wc_container_source((wc_container *)c);
	uint32_t n = 0;
	uint64_t bytes = 0;
	while (first + n < ntiles && n < BATCH_TILES_MAX && bytes < target) {
		uint32_t ds = same_as_previous(c, skip, first + n) ? 0 : src->ops->tile_dsize(src, first + n);
		if (n && bytes + ds > BATCH_BYTES)
			break;
		bytes += ds;
		n++;
	}
	return n;
}

static void *batch_decode(void *arg)
{
	batch *b = arg;
	b->decode_err = b->njobs ? wc_backend_decode(b->be, b->jobs, b->njobs) : WC_OK;
	if (b->decode_err) {
		char why[400];
		snprintf(why, sizeof why, "%s", wc_last_detail());
		wc_fail(b->decode_err, "decode backend: %s", why);
		snprintf(b->why[0], sizeof b->why[0], "%s", wc_last_detail());
	}
	return NULL;
}

static wc_err batch_start(batch *b)
{
	if (pthread_create(&b->thread, NULL, batch_decode, b) != 0) {
		batch_decode(b); /* no thread: decode here */
		return WC_OK;
	}
	b->running = 1;
	return WC_OK;
}

/* Wait for the decode, then give every tile of the batch to the sink in order.
 * Returns nonzero in *stop if the sink asked to stop. */
static wc_err batch_finish(batch *b, cli_tile_sink sink, void *ctx, int *stop)
{
	if (b->running) {
		pthread_join(b->thread, NULL);
		b->running = 0;
	}
	if (b->decode_err)
		return wc_fail(b->decode_err, "%s", b->why[0]);
	uint8_t *scratch = NULL;
	for (uint32_t q = 0; q < b->njobs; q++) {
		uint32_t k = b->slot_of_job[q];
		b->status[k] = b->jobs[q].status;
		if (!b->status[k])
			continue;
		/* The reason was on the backend's thread: decode it again here for it. */
		if (!scratch && !(scratch = malloc(wc_container_tile_size(b->c))))
			return wc_fail(WC_E_NOMEM, "out of memory");
		wc_err re = wc_container_decode_tile(b->c, b->first + k, b->jobs[q].payload, scratch);
		snprintf(b->why[k], sizeof b->why[k], "%s",
			 re ? wc_last_detail() : "the decode backend failed on it (the CPU decoder did not)");
	}
	free(scratch);
	run_state *r = b->run;
	r->decoded += b->njobs;
	for (uint32_t k = 0; k < b->n && !*stop; k++) {
		uint32_t t = b->first + k;
		const uint8_t *data = b->outs + b->out_off[k];
		if (b->kind[k] == TILE_REPEAT) {
			b->status[k] = r->last_status;
			snprintf(b->why[k], sizeof b->why[k], "%s", r->last_why);
			data = NULL;
		} else if (b->kind[k] == TILE_JOB || b->status[k] == WC_OK) {
			r->last_status = b->status[k];
			snprintf(r->last_why, sizeof r->last_why, "%s", b->why[k]);
		}
		*stop = sink(ctx, t, data, wc_container_tile(b->c, t)->dsize, b->status[k], b->why[k]);
	}
	return WC_OK;
}

wc_err cli_decode_tiles(wc_container *c, const cli_decode_opts *o, cli_tile_sink sink, void *ctx,
			cli_progress *progress, uint32_t *decoded)
{
	run_state run = {.skip_repeats = o->skip_repeats};
	if (decoded)
		*decoded = 0;
	uint32_t ntiles = wc_container_ntiles(c), tile_size = wc_container_tile_size(c);
	if (ntiles == 0)
		return WC_OK;
	wc_backend_opts bo = {.threads = o->threads};
	wc_backend *be;
	wc_err e = wc_backend_create(o->backend ? o->backend : "auto", &bo, &be);
	if (e)
		return e;
	uint64_t target = (uint64_t)(be->max_batch ? be->max_batch : 64) * tile_size;
	if (target > BATCH_BYTES)
		target = BATCH_BYTES;

	batch bufs[2] = {{.be = be, .c = c, .run = &run}, {.be = be, .c = c, .run = &run}};
	batch *cur = &bufs[0], *next = &bufs[1];
	size_t plen;
	wc_container_prefix(c, &plen);
	uint64_t done = plen, total = wc_container_virtual_size(c);
	int stop = 0;
	/* the largest batch's payload and decoded bytes, so that the buffers
	 * are allocated once */
	wc_tile_source *src = wc_container_source(c);
	size_t pmax = 1, omax = 1;
	uint32_t nmax = 1, n;
	for (uint32_t first = 0; first < ntiles; first += n) {
		size_t ps = 0, os = 0;
		n = batch_tiles(c, run.skip_repeats, first, ntiles, target);
		for (uint32_t t = first; t < first + n; t++) {
			ps += src->ops->tile_csize(src, t);
			os += same_as_previous(c, run.skip_repeats, t) ? 0 : src->ops->tile_dsize(src, t);
		}
		pmax = ps > pmax ? ps : pmax;
		omax = os > omax ? os : omax;
		nmax = n > nmax ? n : nmax;
	}
	for (int i = 0; i < 2; i++)
		if ((e = batch_alloc(&bufs[i], nmax)) || (e = batch_buffers(&bufs[i], pmax, omax)))
			goto out;
	n = batch_tiles(c, run.skip_repeats, 0, ntiles, target);
	if ((e = batch_fill(cur, 0, n)))
		goto out;
	batch_start(cur);
	for (uint32_t first = n;; first += n) {
		n = batch_tiles(c, run.skip_repeats, first, ntiles, target);
		wc_err fe = n ? batch_fill(next, first, n) : WC_OK; /* overlaps cur's decode */
		if ((e = batch_finish(cur, sink, ctx, &stop)))
			goto out;
		for (uint32_t k = 0; k < cur->n; k++)
			done += wc_container_tile(c, cur->first + k)->dsize;
		if (progress)
			cli_progress_update(progress, done, total);
		if ((e = fe) || stop || !n)
			goto out;
		batch_start(next);
		batch *tmp = cur;
		cur = next;
		next = tmp;
	}
out:
	for (int i = 0; i < 2; i++) {
		if (bufs[i].running)
			pthread_join(bufs[i].thread, NULL);
		batch_free(&bufs[i]);
	}
	wc_backend_destroy(be);
	if (decoded)
		*decoded = run.decoded;
	return e;
}
