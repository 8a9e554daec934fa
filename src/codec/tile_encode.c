/* tile_encode.c - tile payload writer: per plane the smallest of CONST,
 * PACK, RANS, ZSTD and RAW (docs/FORMAT.md section 3). */
#include <stdlib.h>
#include <zstd.h>

#include "codec/codec_internal.h"
#include "codec/tile_codec.h"

static size_t align4(size_t x) { return (x + 3) & ~(size_t)3; }

size_t wc_tile_encode_bound(wc_layout l, size_t nbytes, uint32_t chunk_symbols)
{
	(void)chunk_symbols; /* RAW is always a candidate, so no body exceeds n */
	size_t np = l.nplanes ? l.nplanes : 1;
	size_t w = l.elem_size ? l.elem_size : 1;
	return WC_TILE_HEADER_BYTES(np) + np * align4(nbytes / w);
}

static int plane_is_const(const uint8_t *p, size_t n)
{
	for (size_t i = 1; i < n; i++)
		if (p[i] != p[0])
			return 0;
	return n > 0;
}

/* The chosen encoding of one plane; body points at the plane, or at tmp. */
typedef struct choice {
	uint8_t mode, value;
	uint32_t table;
	size_t size;
	const uint8_t *body;
} choice;

/*
 * An entropy-coded plane must beat RAW by 1/128 of its size: a near-random
 * plane (the sign|mantissa plane of BF16 weights: 7.97 bits of entropy)
 * would otherwise go rANS for a 0.2% gain at twice the decode time.
 */
#define MIN_SAVING_SHIFT 7

static wc_err choose(const uint8_t *pl, size_t n, const wc_plane_plan *plan, uint32_t chunk_symbols,
		     uint8_t *rans_tmp, uint8_t *zstd_tmp, size_t zstd_cap, choice *c)
{
	/* size is the bar to beat; RAW's real size is n */
	*c = (choice){WC_PLANE_RAW, 0, WC_NO_TABLE, n - (n >> MIN_SAVING_SHIFT), pl};
	if (plane_is_const(pl, n)) {
		*c = (choice){WC_PLANE_CONST, pl[0], WC_NO_TABLE, 0, NULL};
		return WC_OK;
	}
	/* PACK decodes at memory speed, as RAW does: it is the bar for the
	 * entropy coders when every symbol fits in 4 bits or fewer (the high
	 * planes of 12-bit qvq indices: 4 bits a symbol packed against 4.03
	 * rANS-coded, which took a third of the decode) */
	const unsigned pack_b = n ? wc_pack_bits_for(pl, n) : 0;
	if (pack_b) {
		size_t len = wc_pack_bytes(n, pack_b);
		if (len - (len >> MIN_SAVING_SHIFT) < c->size)
			*c = (choice){WC_PLANE_PACK, (uint8_t)pack_b, WC_NO_TABLE,
				      len - (len >> MIN_SAVING_SHIFT), NULL};
	}
	if (plan->table) {
		size_t len;
		wc_err e = wc_rans_encode(pl, n, plan->table, chunk_symbols, rans_tmp,
					  wc_rans_bound(n, chunk_symbols), &len);
		if (e != WC_OK)
			return e;
		if (len < c->size)
			*c = (choice){WC_PLANE_RANS, 0, plan->table_id, len, rans_tmp};
	}
	if (plan->allow_zstd && n) {
		/* The frame checksum lets the decoder itself reject a damaged body. */
		ZSTD_CCtx *cctx = ZSTD_createCCtx();
		if (!cctx)
			return wc_fail(WC_E_NOMEM, "no memory for a zstd context");
		size_t len = ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, WC_ZSTD_LEVEL);
		if (!ZSTD_isError(len))
			len = ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
		if (!ZSTD_isError(len))
			len = ZSTD_compress2(cctx, zstd_tmp, zstd_cap, pl, n);
		ZSTD_freeCCtx(cctx);
		if (!ZSTD_isError(len) && len < c->size)
			*c = (choice){WC_PLANE_ZSTD, 0, WC_NO_TABLE, len, zstd_tmp};
	}
	if (c->mode == WC_PLANE_RAW)
		c->size = n;
	if (c->mode == WC_PLANE_PACK) { /* rANS lost: its scratch is free */
		c->size = wc_pack_bytes(n, pack_b);
		wc_pack_bits(pl, n, pack_b, rans_tmp);
		c->body = rans_tmp;
	}
	return WC_OK;
}

/* Check the arguments common to both encoders; *n gets the element count. */
static wc_err encode_args(wc_layout l, size_t nbytes, const wc_plane_plan *plan, uint32_t chunk_symbols, size_t *n)
{
	if (!wc_layout_valid(l))
		return wc_fail(WC_E_INVAL, "tile encode: invalid layout");
	if (nbytes % l.elem_size)
		return wc_fail(WC_E_INVAL, "tile encode: %zu bytes is not a whole number of %u-byte elements",
			       nbytes, l.elem_size);
	*n = nbytes / l.elem_size;
	if (*n > UINT32_MAX)
		return wc_fail(WC_E_INVAL, "tile encode: %zu elements exceed a plane's 32-bit size", *n);
	for (unsigned p = 0; p < l.nplanes; p++)
		if (plan[p].table && !wc_rans_chunk_symbols_ok(chunk_symbols))
			return wc_fail(WC_E_INVAL, "tile encode: chunk_symbols %u invalid", chunk_symbols);
	return WC_OK;
}

/* Encode l.nplanes planes of n symbols each (already split) into a payload. */
static wc_err encode_planes(wc_layout l, uint8_t *const planes[], size_t n, const wc_plane_plan *plan,
			    uint32_t chunk_symbols, uint8_t *rans_tmp, uint8_t *zstd_tmp, size_t zstd_cap,
			    uint8_t *out, size_t cap, size_t *out_len, uint64_t *plane_bytes)
{
	size_t hdr = WC_TILE_HEADER_BYTES(l.nplanes);
	if (cap < hdr)
		return wc_fail(WC_E_RANGE, "tile encode: capacity %zu below the %zu-byte header", cap, hdr);
	out[0] = l.nplanes;
	out[1] = out[2] = out[3] = 0;
	size_t pos = hdr;
	for (unsigned p = 0; p < l.nplanes; p++) {
		choice c;
		wc_err e = choose(planes[p], n, &plan[p], chunk_symbols, rans_tmp, zstd_tmp, zstd_cap, &c);
		if (e != WC_OK)
			return wc_fail_context(e, "tile encode: plane %u", p);
		size_t start = align4(pos);
		if (start > cap || cap - start < c.size)
			return wc_fail(WC_E_RANGE, "tile encode: capacity %zu too small", cap);
		memset(out + pos, 0, start - pos);
		if (c.size)
			memcpy(out + start, c.body, c.size);
		uint8_t *d = out + 4 + 12 * p;
		d[0] = c.mode;
		d[1] = c.value;
		wc_st16(d + 2, 0);
		wc_st32(d + 4, c.table);
		wc_st32(d + 8, (uint32_t)c.size);
		if (plane_bytes)
			plane_bytes[p] = c.size;
		pos = start + c.size;
	}
	*out_len = pos;
	return WC_OK;
}

/* Both encoders: allocate planes and coder scratch, split the tile into
 * planes (byte planes, or dictionary indices when dict), encode them. */
static wc_err encode_tile(wc_layout l, const uint8_t *data, size_t nbytes, const uint8_t *dict, uint32_t entries,
			  const wc_plane_plan *plan, uint32_t chunk_symbols, uint8_t *out, size_t cap,
			  size_t *out_len, uint64_t *plane_bytes)
{
	size_t n = 0;
	wc_err e = encode_args(l, nbytes, plan, chunk_symbols, &n);
	if (e != WC_OK)
		return e;
	size_t zstd_cap = ZSTD_compressBound(n);
	size_t rans_cap = wc_rans_bound(n, wc_rans_chunk_symbols_ok(chunk_symbols) ? chunk_symbols : 32);
	uint8_t *planes_mem = malloc(l.nplanes * n + rans_cap + zstd_cap + 1);
	if (!planes_mem)
		return wc_fail(WC_E_NOMEM, "tile encode: no memory for %zu bytes of planes", nbytes);
	uint8_t *planes[WC_MAX_PLANES];
	for (unsigned p = 0; p < l.nplanes; p++)
		planes[p] = planes_mem + p * n;
	uint8_t *rans_tmp = planes_mem + l.nplanes * n;
	uint8_t *zstd_tmp = rans_tmp + rans_cap;
	if (dict)
		e = wc_dict_index(l, dict, entries, data, n, planes);
	else
		wc_planes_split(l, data, n, planes);
	if (e == WC_OK)
		e = encode_planes(l, planes, n, plan, chunk_symbols, rans_tmp, zstd_tmp, zstd_cap, out, cap, out_len,
				  plane_bytes);
	free(planes_mem);
	return e;
}

wc_err wc_tile_encode(wc_layout l, const uint8_t *data, size_t nbytes,
		      const wc_plane_plan *plan, uint32_t chunk_symbols,
		      uint8_t *out, size_t cap, size_t *out_len, uint64_t *plane_bytes)
{
	if (l.kind == WC_LAYOUT_DICT)
		return wc_fail(WC_E_INVAL, "tile encode: the dict layout needs wc_tile_encode_dict");
	return encode_tile(l, data, nbytes, NULL, 0, plan, chunk_symbols, out, cap, out_len, plane_bytes);
}

wc_err wc_tile_encode_dict(wc_layout l, const uint8_t *data, size_t nbytes, const uint8_t *dict,
			   uint32_t entries, const wc_plane_plan *plan, uint32_t chunk_symbols,
			   uint8_t *out, size_t cap, size_t *out_len, uint64_t *plane_bytes)
{
	if (l.kind != WC_LAYOUT_DICT || !dict)
		return wc_fail(WC_E_INVAL, "tile encode: not a dict layout with a dictionary");
	return encode_tile(l, data, nbytes, dict, entries, plan, chunk_symbols, out, cap, out_len, plane_bytes);
}
