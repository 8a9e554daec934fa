/* writer_verify.c - the written file reopened with the reader and every
 * tile decoded against the input, before the rename (writer_impl.h). */
#include "container/writer_impl.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- pass 3: verification of the written file ----------------------- */

static void *verify_worker(void *arg)
{
	packer *pk = arg;
	size_t cap = 2ull * pk->tile_size + 65536u;
	uint8_t *payload = malloc(cap), *out = malloc(pk->tile_size), *want = malloc(pk->tile_size);
	if (!payload || !out || !want) {
		wc_pk_fail(pk, wc_fail(WC_E_NOMEM, "out of memory"));
		goto done;
	}
	for (;;) {
		uint32_t i = atomic_fetch_add(&pk->cursor, 1);
		if (i >= pk->ntiles || atomic_load(&pk->failed))
			break;
		const wc_tile_info *x = wc_container_tile(pk->check, i);
		wc_err e = wc_container_read_payload(pk->check, i, payload);
		if (!e)
			e = wc_container_decode_tile(pk->check, i, payload, out);
		if (!e) {
			const tile_plan *tp = &pk->tiles[i];
			const tensor_plan *t = &pk->tensors[tp->tensor];
			const uint64_t bytes = wc_pk_tile_bytes(t, tp);
			const uint8_t *orig = t->data + tp->offset;
			if (t->lossy) { /* what the codes and scales decode to */
				wc_pk_lossy_tile(t, tp, want);
				orig = want;
			}
			if (x->dsize != bytes || memcmp(out, orig, bytes) != 0)
				e = wc_fail(WC_E_CORRUPT, "verification: tile %u decodes to different bytes", i);
			wc_pk_report(pk, atomic_fetch_add(&pk->pass_done, bytes) + bytes);
		}
		if (e) {
			wc_pk_fail(pk, e);
			break;
		}
	}
done:
	free(payload);
	free(out);
	free(want);
	return NULL;
}

wc_err wc_pk_verify(packer *pk, const char *tmp, size_t prefix_len)
{
	wc_err e = wc_container_open(tmp, &pk->check);
	if (e) {
		char why[400];
		snprintf(why, sizeof why, "%s", wc_last_detail());
		return wc_fail(e, "verification: cannot reopen the written file: %s", why);
	}
	size_t plen;
	const uint8_t *prefix = wc_container_prefix(pk->check, &plen);
	if (plen != prefix_len || memcmp(prefix, pk->in, plen) != 0 ||
	    wc_container_virtual_size(pk->check) != pk->in_size || wc_container_ntiles(pk->check) != pk->ntiles) {
		e = wc_fail(WC_E_CORRUPT, "verification: the written prefix or tile count differs from the input");
	} else {
		atomic_store(&pk->cursor, 0);
		wc_pk_run(pk, verify_worker);
		if (atomic_load(&pk->failed))
			e = wc_fail(pk->first_err, "%s", pk->first_why);
	}
	wc_container_release(pk->check);
	pk->check = NULL;
	return e;
}

