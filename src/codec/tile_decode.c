/* tile_decode.c - validating tile payload decoder (docs/FORMAT.md section 3).
 *
 * The tile is produced in stripes of one rANS chunk (chunk_symbols elements):
 * each rANS plane decodes its chunk into a small per-thread scratch that stays
 * in L1/L2, and the stripe is merged into the output right away, so decoded
 * planes never make a round trip through memory. */
#include <zstd.h>

#include "codec/codec_internal.h"
#include "codec/tile_codec.h"

/* Chunks per stripe: the AVX2 decoder runs two chunks interleaved. */
#define STRIPE_CHUNKS 2u

/* State of one plane while the tile decodes. */
typedef struct plane_dec {
	const wc_plane_view *v;
	const uint8_t *src;       /* RAW/ZSTD: the whole plane */
	const wc_rans_dtab *dt;   /* RANS */
	wc_rans_body body;        /* RANS */
	int filled;               /* CONST: stripe scratch already holds the value */
	uint32_t chunk_symbols;   /* RANS */
} plane_dec;

typedef struct tile_ctx {
	const wc_freqtab *tables;
	size_t n;                 /* symbols per plane */
	uint32_t chunk_symbols;
	uint8_t *plane_scratch;   /* n bytes per plane, for whole-plane decoders */
} tile_ctx;

/* prepare: validate and set up a plane before the stripes;
 * stripe: make symbols [first, first + m) of stripe k available at *ptr,
 * using `scratch` (m bytes) if the plane must be decoded. */
typedef struct plane_ops {
	wc_err (*prepare)(plane_dec *pd, unsigned p, const tile_ctx *t);
	wc_err (*stripe)(plane_dec *pd, size_t k, size_t first, size_t m, uint8_t *scratch,
			 const uint8_t **ptr);
} plane_ops;

static wc_err raw_prepare(plane_dec *pd, unsigned p, const tile_ctx *t)
{
	(void)p, (void)t;
	pd->src = pd->v->body;
	return WC_OK;
}

static wc_err whole_stripe(plane_dec *pd, size_t k, size_t first, size_t m, uint8_t *scratch,
			   const uint8_t **ptr)
{
	(void)k, (void)m, (void)scratch;
	*ptr = pd->src + first;
	return WC_OK;
}

static wc_err const_prepare(plane_dec *pd, unsigned p, const tile_ctx *t)
{
	(void)p, (void)t;
	pd->filled = 0;
	return WC_OK;
}

static wc_err const_stripe(plane_dec *pd, size_t k, size_t first, size_t m, uint8_t *scratch,
			   const uint8_t **ptr)
{
	(void)k, (void)first;
	if (!pd->filled) { /* the first stripe is the longest */
		memset(scratch, pd->v->value, m);
		pd->filled = 1;
	}
	*ptr = scratch;
	return WC_OK;
}

static wc_err rans_prepare(plane_dec *pd, unsigned p, const tile_ctx *t)
{
	const wc_freqtab *ft = &t->tables[pd->v->table];
	if (wc_freq_validate(ft) != WC_OK)
		return wc_fail_context(WC_E_CORRUPT, "table %u", pd->v->table);
	pd->dt = wc_dtab_cached(ft, p);
	pd->chunk_symbols = t->chunk_symbols;
	if (!pd->dt)
		return wc_fail(WC_E_NOMEM, "no memory for a decoding table");
	return wc_rans_body_parse(pd->v->body, pd->v->size, t->n, t->chunk_symbols, &pd->body);
}

/* A stripe is STRIPE_CHUNKS chunks: chunks [k * STRIPE_CHUNKS, ...). */
static wc_err rans_stripe(plane_dec *pd, size_t k, size_t first, size_t m, uint8_t *scratch,
			  const uint8_t **ptr)
{
	(void)m;
	size_t k0 = k * STRIPE_CHUNKS, k1 = k0 + STRIPE_CHUNKS;
	if (k1 > pd->body.nchunks)
		k1 = pd->body.nchunks;
	wc_err e = wc_rans_decode_chunks(&pd->body, k0, k1, pd->dt, pd->chunk_symbols, first + m, scratch);
	if (e != WC_OK)
		return e;
	*ptr = scratch;
	return WC_OK;
}

static wc_err zstd_prepare(plane_dec *pd, unsigned p, const tile_ctx *t)
{
	const wc_plane_view *v = pd->v;
	unsigned long long csize = ZSTD_getFrameContentSize(v->body, v->size);
	if (csize != t->n)
		return wc_fail(WC_E_CORRUPT, "zstd frame content size %llu, plane has %zu bytes", csize, t->n);
	size_t fsize = ZSTD_findFrameCompressedSize(v->body, v->size);
	if (ZSTD_isError(fsize) || fsize != v->size)
		return wc_fail(WC_E_CORRUPT, "zstd body of %u bytes is not exactly one frame", v->size);
	ZSTD_DCtx *dctx = wc_zstd_dctx();
	if (!dctx)
		return wc_fail(WC_E_NOMEM, "no memory for a zstd context");
	uint8_t *dst = t->plane_scratch + p * t->n;
	size_t got = ZSTD_decompressDCtx(dctx, dst, t->n, v->body, v->size);
	if (ZSTD_isError(got) || got != t->n)
		return wc_fail(WC_E_CORRUPT, "zstd: %s", ZSTD_isError(got) ? ZSTD_getErrorName(got) : "short frame");
	pd->src = dst;
	return WC_OK;
}

static const plane_ops plane_decoders[WC_PLANE_MODES] = {
	[WC_PLANE_RAW] = {raw_prepare, whole_stripe},
	[WC_PLANE_CONST] = {const_prepare, const_stripe},
	[WC_PLANE_RANS] = {rans_prepare, rans_stripe},
	[WC_PLANE_ZSTD] = {zstd_prepare, whole_stripe},
};

/* Stripe length when no plane is chunked: long enough to amortise calls,
 * short enough that CONST scratch stays in cache. */
#define PLAIN_STRIPE 16384u

wc_err wc_tile_decode(wc_layout l, const uint8_t *payload, size_t payload_len,
		      const wc_freqtab *tables, uint32_t ntables, uint32_t chunk_symbols,
		      uint8_t *out, size_t nbytes)
{
	wc_plane_view views[WC_MAX_PLANES];
	wc_err e = wc_tile_parse(l, payload, payload_len, nbytes, ntables, views);
	if (e != WC_OK)
		return e;
	tile_ctx t = {tables, nbytes / l.elem_size, chunk_symbols, NULL};
	int any_rans = 0, any_zstd = 0;
	for (unsigned p = 0; p < l.nplanes; p++) {
		any_rans |= views[p].mode == WC_PLANE_RANS;
		any_zstd |= views[p].mode == WC_PLANE_ZSTD;
	}
	if (any_rans && !wc_rans_chunk_symbols_ok(chunk_symbols))
		return wc_fail(WC_E_CORRUPT, "tile: chunk size %u invalid", chunk_symbols);
	size_t stripe = any_rans ? (size_t)chunk_symbols * STRIPE_CHUNKS : PLAIN_STRIPE;
	if (stripe > t.n)
		stripe = t.n;
	if (any_zstd && !(t.plane_scratch = wc_scratch_get(WC_SCRATCH_PLANES, l.nplanes * t.n)))
		return wc_fail(WC_E_NOMEM, "tile: no memory for %zu bytes of planes", nbytes);
	uint8_t *sscratch = wc_scratch_get(WC_SCRATCH_STRIPE, l.nplanes * stripe + 1);
	if (!sscratch)
		return wc_fail(WC_E_NOMEM, "tile: no memory for stripe scratch");

	plane_dec pd[WC_MAX_PLANES];
	for (unsigned p = 0; p < l.nplanes; p++) {
		pd[p] = (plane_dec){.v = &views[p]};
		e = plane_decoders[views[p].mode].prepare(&pd[p], p, &t);
		if (e != WC_OK)
			return wc_fail_context(e, "tile plane %u", p);
	}
	for (size_t k = 0, first = 0; first < t.n; k++, first += stripe) {
		size_t m = t.n - first < stripe ? t.n - first : stripe;
		const uint8_t *ptr[WC_MAX_PLANES];
		for (unsigned p = 0; p < l.nplanes; p++) {
			e = plane_decoders[views[p].mode].stripe(&pd[p], k, first, m, sscratch + p * stripe,
								 &ptr[p]);
			if (e != WC_OK)
				return wc_fail_context(e, "tile plane %u", p);
		}
		wc_planes_merge(l, ptr, m, out + first * l.elem_size);
	}
	return WC_OK;
}
