/* writer_lossy.c - lossy tensors of the packer (writer_impl.h): which
 * tensors, their int8 codes and scales (codec/lossy.h), and the decoded
 * bytes of their tiles, for the index's hashes and the verify pass. */
#include "container/writer_impl.h"

#include <stdatomic.h>
#include <stdlib.h>

/* Whether the n elements of w bytes at p take at most 256 distinct values
 * (an open-addressing set of 512 slots; gives up at the 257th value, within
 * a few hundred elements of continuous weights). */
static int few_values(const uint8_t *p, uint64_t n, unsigned w)
{
	uint32_t set[512];
	uint8_t used[512] = {0};
	unsigned k = 0;
	for (uint64_t i = 0; i < n; i++) {
		uint32_t v = w == 4 ? (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
					      (uint32_t)p[4 * i + 3] << 24
				    : (uint32_t)p[2 * i] | (uint32_t)p[2 * i + 1] << 8;
		unsigned h = (v * 2654435761u) >> 23; /* 9 bits */
		while (used[h] && set[h] != v)
			h = (h + 1) & 511;
		if (!used[h]) {
			if (++k > 256)
				return 0;
			used[h] = 1;
			set[h] = v;
		}
	}
	return 1;
}

int wc_pk_lossy_wanted(const packer *pk, const wc_st_tensor *st)
{
	const wc_pack_opts *o = pk->opts;
	if (!o->lossy_bits || st->ndim < 2 || wc_lossy_dtype_of(st->dtype) < 0 || st->end == st->begin)
		return 0;
	if (o->lossy_select && !o->lossy_select(o->lossy_ctx, st->name, st->dtype, st->ndim, st->shape))
		return 0;
	/* Weights shipped quantized (at most 256 values) stay exact: a
	 * dictionary codes them in 8 bits or fewer (docs/FORMAT.md 2.1). */
	const unsigned w = wc_lossy_dtype_size((wc_lossy_dtype)wc_lossy_dtype_of(st->dtype));
	return !few_values(pk->in + pk->st->data_offset + st->begin, (st->end - st->begin) / w, w);
}

void *wc_pk_lossy_worker(void *arg)
{
	packer *pk = arg;
	for (;;) {
		uint32_t i = atomic_fetch_add(&pk->cursor, 1);
		if (i >= pk->st->ntensors || atomic_load(&pk->failed))
			break;
		tensor_plan *t = &pk->tensors[i];
		if (!t->lossy)
			continue;
		const wc_st_tensor *st = t->st;
		const uint32_t group = pk->opts->lossy_group ? pk->opts->lossy_group : pk->opts->lossy_bits == 8 ? 0 : 128;
		t->codes = malloc(t->nbytes);
		t->scales = malloc(wc_lossy_scales_room(st->shape, st->ndim, group) * sizeof *t->scales);
		if (!t->codes || !t->scales) {
			wc_pk_fail(pk, wc_fail(WC_E_NOMEM, "out of memory for tensor \"%s\"'s codes", st->name));
			break;
		}
		wc_err e = wc_lossy_quantize(pk->in + pk->st->data_offset + st->begin,
					     (wc_lossy_dtype)wc_lossy_dtype_of(st->dtype), st->shape, st->ndim,
					     (unsigned)pk->opts->lossy_bits, group, t->codes, t->scales, &t->lp, &t->ls);
		if (e) {
			wc_pk_fail(pk, wc_fail(e, "tensor \"%s\": %s", st->name, wc_last_detail()));
			break;
		}
		t->data = (const uint8_t *)t->codes;
		wc_pk_report(pk, atomic_fetch_add(&pk->pass_done, t->own_bytes) + t->own_bytes);
	}
	return NULL;
}

void wc_pk_lossy_tile(const tensor_plan *t, const tile_plan *tp, uint8_t *out)
{
	wc_lossy_dequant(&t->lp, t->codes + tp->offset, tp->offset, tp->dsize, out);
}
