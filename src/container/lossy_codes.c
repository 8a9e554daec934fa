/* lossy_codes.c - a lossy tensor's codes and scales as stored
 * (container.h: wc_container_lossy_desc, wc_container_lossy_codes). */
#include <stdlib.h>
#include <string.h>

#include "codec/lossy.h"
#include "codec/tile_codec.h"
#include "container/container_impl.h"
#include "container/lossy_job.h"
#include "core/hash.h"

wc_err wc_container_lossy_desc(const wc_container *c, uint32_t i, wc_lossy_desc *out)
{
	if (i >= c->h.ntensors)
		return wc_fail(WC_E_RANGE, "tensor %u of %u", i, c->h.ntensors);
	const wc_tensor_info *t = &c->tensors[i];
	if (!t->lossy)
		return wc_fail(WC_E_INVAL, "tensor %u is not lossy", i);
	*out = (wc_lossy_desc){.bits = (uint32_t)t->lossy, .axis = t->lossy_axis, .channels = t->lossy_channels,
			       .group = t->lossy_group, .nscales = t->lossy_nscales,
			       .elems = (t->end - t->begin) / t->plain_layout.elem_size};
	return WC_OK;
}

wc_err wc_container_lossy_codes(const wc_container *c, uint32_t i, int8_t *codes, float *scales)
{
	wc_lossy_desc d;
	wc_err e = wc_container_lossy_desc(c, i, &d);
	if (e)
		return e;
	const wc_tensor_info *t = &c->tensors[i];
	const unsigned w = t->plain_layout.elem_size;
	uint8_t *payload = NULL, *values = malloc(c->h.tile_size);
	uint32_t cap = 0;
	if (!values)
		return wc_fail(WC_E_NOMEM, "out of memory for a tile");
	for (uint32_t k = 0; k < t->ntiles && !e; k++) {
		const uint32_t ti = t->first_tile + k;
		const wc_tile_info *x = &c->tiles[ti];
		const wc_lossy_job *lj = &c->lossy_jobs[ti]; /* the tensor's parameters, the tile's first element */
		const uint64_t at = lj->first;
		const size_t n = x->dsize / w;
		if (x->csize > cap) {
			uint8_t *b = realloc(payload, x->csize);
			if (!b) {
				e = wc_fail(WC_E_NOMEM, "out of memory for a %u-byte payload", x->csize);
				break;
			}
			payload = b;
			cap = x->csize;
		}
		if ((e = wc_container_read_payload(c, ti, payload)))
			break;
		wc_clear_detail();
		e = wc_tile_decode(t->layout, payload, x->csize, c->tables, c->h.ntables, c->h.chunk_symbols,
				   (uint8_t *)codes + at, n);
		if (e) {
			char why[300];
			snprintf(why, sizeof why, "%s", wc_last_detail());
			e = wc_fail(e == WC_E_NOMEM ? e : WC_E_CORRUPT, "tile %u: %s", ti, why);
			break;
		}
		/* the codes are returned only if they decode to the file's bytes */
		wc_lossy_dequant(&lj->p, codes + at, at, n, values);
		if (wc_xxh3_64(values, x->dsize) != x->dhash)
			e = wc_fail(WC_E_CORRUPT, "tile %u: its codes do not decode to the bytes its checksum names", ti);
	}
	if (!e)
		memcpy(scales, t->lossy_scales, d.nscales * sizeof *scales);
	free(payload);
	free(values);
	return e;
}
