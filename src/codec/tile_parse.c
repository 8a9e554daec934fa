/* tile_parse.c - validating parser of a tile payload's header
 * (docs/FORMAT.md section 3). */
#include "codec/codec_internal.h"
#include "codec/tile_codec.h"

/* A layout as wc_layout_parse()/wc_layout_for_dtype() produce it. */
static int layout_ok(wc_layout l)
{
	switch (l.kind) {
	case WC_LAYOUT_BYTES: return l.elem_size == 1 && l.nplanes == 1;
	case WC_LAYOUT_SHUFFLE:
		return (l.elem_size == 2 || l.elem_size == 4 || l.elem_size == 8) && l.nplanes == l.elem_size;
	case WC_LAYOUT_BF16: return l.elem_size == 2 && l.nplanes == 2;
	case WC_LAYOUT_F32: return l.elem_size == 4 && l.nplanes == 4;
	case WC_LAYOUT_DICT:
		return (l.elem_size == 1 || l.elem_size == 2 || l.elem_size == 4 || l.elem_size == 8) &&
		       (l.nplanes == 1 || l.nplanes == 2);
	default: return 0;
	}
}

int wc_layout_valid(wc_layout l) { return layout_ok(l); }

wc_err wc_tile_parse(wc_layout l, const uint8_t *payload, size_t payload_len,
		     size_t nbytes, uint32_t ntables, wc_plane_view views[WC_MAX_PLANES])
{
	if (!layout_ok(l))
		return wc_fail(WC_E_CORRUPT, "tile: invalid layout (kind %u, %u-byte elements, %u planes)",
			       l.kind, l.elem_size, l.nplanes);
	if (nbytes % l.elem_size)
		return wc_fail(WC_E_CORRUPT, "tile: %zu bytes is not a whole number of %u-byte elements",
			       nbytes, l.elem_size);
	size_t n = nbytes / l.elem_size;
	size_t hdr = WC_TILE_HEADER_BYTES(l.nplanes);
	if (payload_len < hdr)
		return wc_fail(WC_E_CORRUPT, "tile: payload of %zu bytes shorter than its %zu-byte header",
			       payload_len, hdr);
	if (payload[0] != l.nplanes)
		return wc_fail(WC_E_CORRUPT, "tile: %u planes, layout %s has %u", payload[0],
			       wc_layout_name(l), l.nplanes);
	if (payload[1] | payload[2] | payload[3])
		return wc_fail(WC_E_CORRUPT, "tile: reserved header bytes are not 0");

	size_t off = hdr;
	for (unsigned p = 0; p < l.nplanes; p++) {
		const uint8_t *d = payload + 4 + 12 * p;
		wc_plane_view *v = &views[p];
		v->mode = d[0];
		v->value = d[1];
		v->table = wc_ld32(d + 4);
		v->size = wc_ld32(d + 8);
		if (v->mode >= WC_PLANE_MODES)
			return wc_fail(WC_E_CORRUPT, "tile: plane %u has unknown mode %u", p, v->mode);
		if (wc_ld16(d + 2) != 0 ||
		    (v->mode != WC_PLANE_CONST && v->mode != WC_PLANE_PACK && v->value != 0))
			return wc_fail(WC_E_CORRUPT, "tile: plane %u descriptor has non-zero reserved bits", p);
		if (v->mode == WC_PLANE_PACK && v->value != 1 && v->value != 2 && v->value != 4)
			return wc_fail(WC_E_CORRUPT, "tile: packed plane %u of %u bits a symbol (1, 2 or 4)",
				       p, v->value);
		if (v->mode == WC_PLANE_RANS ? v->table >= ntables : v->table != WC_NO_TABLE)
			return wc_fail(WC_E_CORRUPT, "tile: plane %u table index %u invalid (%u tables, mode %u)",
				       p, v->table, ntables, v->mode);
		if ((v->mode == WC_PLANE_RAW && v->size != n) || (v->mode == WC_PLANE_CONST && v->size != 0) ||
		    (v->mode == WC_PLANE_PACK && v->size != wc_pack_bytes(n, v->value)))
			return wc_fail(WC_E_CORRUPT, "tile: plane %u (mode %u) body of %u bytes for %zu symbols",
				       p, v->mode, v->size, n);
		if (v->mode == WC_PLANE_ZSTD && v->size == 0)
			return wc_fail(WC_E_CORRUPT, "tile: plane %u has an empty zstd body", p);
		size_t start = (off + 3) & ~(size_t)3;
		if (start > payload_len || payload_len - start < v->size)
			return wc_fail(WC_E_CORRUPT, "tile: plane %u body [%zu, +%u) beyond the %zu-byte payload",
				       p, start, v->size, payload_len);
		for (size_t i = off; i < start; i++)
			if (payload[i])
				return wc_fail(WC_E_CORRUPT, "tile: non-zero padding before plane %u", p);
		v->body = payload + start;
		off = start + v->size;
	}
	if (off != payload_len)
		return wc_fail(WC_E_CORRUPT, "tile: bodies end at %zu, payload is %zu bytes", off, payload_len);
	return WC_OK;
}
