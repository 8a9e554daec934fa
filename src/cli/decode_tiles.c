/* decode_tiles.c - decoding a whole container through a decode backend, in
 * tile order, for unpack, verify and cat. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "container/container.h"
#include "engine/backend.h"

#define BATCH_BYTES_MAX (256u << 20) /* decoded bytes in flight per batch */
#define BATCH_TILES_MAX 1024u

wc_err cli_decode_tiles(wc_container *c, const cli_decode_opts *o, cli_tile_sink sink, void *ctx,
			cli_progress *progress)
{
	wc_backend_opts bo = {.threads = o->threads};
	wc_backend *be;
	wc_err e = wc_backend_create(o->backend ? o->backend : "auto", &bo, &be);
	if (e)
		return e;
	wc_tile_source *src = wc_container_source(c);
	uint32_t ntiles = wc_container_ntiles(c), tile_size = wc_container_tile_size(c);
	uint32_t batch = be->max_batch ? be->max_batch : 64;
	if (batch > BATCH_TILES_MAX)
		batch = BATCH_TILES_MAX;
	if (batch > BATCH_BYTES_MAX / tile_size)
		batch = BATCH_BYTES_MAX / tile_size;
	if (batch > ntiles)
		batch = ntiles ? ntiles : 1;

	size_t pcap = 2ull * tile_size + 65536u;
	wc_tile_job *jobs = calloc(batch, sizeof *jobs);
	uint32_t *tile_of = calloc(batch, sizeof *tile_of);
	wc_err *read_err = calloc(batch, sizeof *read_err);
	char (*why)[400] = calloc(batch, sizeof *why);
	uint8_t *payloads = malloc(batch * pcap), *outs = malloc((size_t)batch * tile_size);
	if (!jobs || !tile_of || !read_err || !why || !payloads || !outs) {
		e = wc_fail(WC_E_NOMEM, "out of memory for a batch of %u tiles", batch);
		goto out;
	}
	uint64_t done = 0, total = wc_container_virtual_size(c);
	size_t plen;
	wc_container_prefix(c, &plen);
	done = plen;
	int stop = 0;
	for (uint32_t first = 0; first < ntiles && !stop; first += batch) {
		uint32_t n = ntiles - first < batch ? ntiles - first : batch, njobs = 0;
		/* Read and hash-check the payloads; damaged ones never reach the backend. */
		for (uint32_t k = 0; k < n; k++) {
			uint32_t t = first + k;
			uint8_t *payload = payloads + k * pcap;
			read_err[k] = src->ops->read_payload(src, t, payload);
			if (read_err[k]) {
				snprintf(why[k], sizeof why[k], "%s", wc_last_detail());
				continue;
			}
			wc_tile_job *j = &jobs[njobs];
			memset(j, 0, sizeof *j);
			src->ops->describe_job(src, t, j);
			j->payload = payload;
			j->payload_size = src->ops->tile_csize(src, t);
			j->out = outs + (size_t)k * tile_size;
			j->out_size = src->ops->tile_dsize(src, t);
			tile_of[njobs++] = k;
		}
		if (njobs && (e = wc_backend_decode(be, jobs, njobs)))
			goto out;
		for (uint32_t q = 0; q < njobs; q++) {
			uint32_t k = tile_of[q];
			read_err[k] = jobs[q].status;
			if (read_err[k]) {
				/* Redo it here for the reason: the backend's thread had it. */
				uint8_t *scratch = malloc(tile_size);
				wc_err re = scratch ? wc_container_decode_tile(c, first + k, jobs[q].payload, scratch)
						    : WC_E_NOMEM;
				snprintf(why[k], sizeof why[k], "%s",
					 re ? wc_last_detail() : "the decode backend failed on it (the CPU decoder did not)");
				free(scratch);
			}
		}
		for (uint32_t k = 0; k < n && !stop; k++) {
			uint32_t t = first + k, ds = src->ops->tile_dsize(src, t);
			stop = sink(ctx, t, outs + (size_t)k * tile_size, ds, read_err[k], why[k]);
			done += ds;
		}
		if (progress)
			cli_progress_update(progress, done, total);
	}
out:
	free(jobs);
	free(tile_of);
	free(read_err);
	free(why);
	free(payloads);
	free(outs);
	wc_backend_destroy(be);
	return e;
}
