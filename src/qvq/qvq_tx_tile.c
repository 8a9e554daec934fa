/* qvq_tx_tile.c - transform-mode tile payloads (qvq_tx_tile.h,
 * docs/FORMAT.md 6.8). */
#include "qvq/qvq_tx_tile.h"

#include <stdlib.h>
#include <string.h>

#include "core/le.h"
#include "qvq/qvq_dct.h"

#define ROUND 32u

void qvq_tx_image_layout(uint32_t w, uint32_t h, qvq_tx_layout *L)
{
	qvq_tx_plane_counts(w, h, L->count);
	size_t at = 0;
	for (unsigned p = 0; p < QVQ_TX_PLANES; p++) {
		L->start[p] = at;
		at += (L->count[p] + ROUND - 1) / ROUND * ROUND;
		L->end[p] = at;
	}
	L->nsym = at;
}

void qvq_tx_image_free(qvq_tx_image *im)
{
	free(im->sym);
	for (unsigned p = 0; p < QVQ_TX_PLANES; p++) {
		free(im->esc.pos[p]);
		free(im->esc.val[p]);
	}
	memset(im, 0, sizeof *im);
}

wc_err qvq_tx_image_make(const uint8_t *rgb, uint32_t w, uint32_t h, uint32_t step_luma, uint32_t step_chroma,
			 qvq_tx_image *im)
{
	memset(im, 0, sizeof *im);
	if (w < 1 || h < 1 || w > QVQ_DCT_SIDE_MAX || h > QVQ_DCT_SIDE_MAX)
		return wc_fail(WC_E_INVAL, "transform: image of %ux%u", w, h);
	qvq_tx_layout L;
	qvq_tx_image_layout(w, h, &L);
	qvq_dct_geom g;
	qvq_dct_geometry(w, h, &g);
	int16_t *coef = malloc(g.blocks * 64 * sizeof *coef);
	void *scratch = malloc(qvq_dct_scratch_bytes(w, h));
	int ok = coef && scratch && (im->sym = calloc(L.nsym, 1));
	for (unsigned p = 0; ok && p < QVQ_TX_PLANES; p++)
		ok = (im->esc.pos[p] = malloc((L.count[p] + 1) * sizeof *im->esc.pos[p])) &&
		     (im->esc.val[p] = malloc((L.count[p] + 1) * sizeof *im->esc.val[p]));
	wc_err e = ok ? qvq_dct_encode(rgb, w, h, step_luma, step_chroma, coef, scratch)
		      : wc_fail(WC_E_NOMEM, "transform: no memory for a %ux%u image", w, h);
	if (!e) {
		uint8_t *plane[QVQ_TX_PLANES];
		size_t pos[QVQ_TX_PLANES];
		for (unsigned p = 0; p < QVQ_TX_PLANES; p++)
			plane[p] = im->sym, pos[p] = L.start[p];
		qvq_tx_to_symbols(coef, w, h, plane, pos, &im->esc);
	}
	free(coef);
	free(scratch);
	if (e)
		qvq_tx_image_free(im);
	return e;
}

void qvq_tx_image_count(const qvq_tx_image *im, uint32_t w, uint32_t h, uint64_t hist[QVQ_TX_PLANES][256])
{
	qvq_tx_layout L;
	qvq_tx_image_layout(w, h, &L);
	for (unsigned p = 0; p < QVQ_TX_PLANES; p++)
		for (size_t i = L.start[p]; i < L.end[p]; i++)
			hist[p][im->sym[i]]++;
}

static size_t escapes_bytes(size_t n) { return 4 + 6 * n + 2 * (n & 1); }

size_t qvq_tx_tile_bound(const uint32_t *dims, uint32_t nimages, uint32_t chunk_symbols)
{
	size_t b = 4 * (size_t)nimages;
	for (uint32_t i = 0; i < nimages; i++) {
		qvq_tx_layout L;
		qvq_tx_image_layout(dims[2 * i], dims[2 * i + 1], &L);
		b += escapes_bytes(L.nsym) + wc_rans_bound(L.nsym, chunk_symbols);
	}
	return b;
}

/* The segments of an image's stream: one a plane. */
static void segments(const qvq_tx_layout *L, wc_rans_segs *sg)
{
	sg->n = QVQ_TX_PLANES;
	sg->end = L->end;
}

wc_err qvq_tx_tile_encode(const qvq_tx_image *im, const uint32_t *dims, uint32_t nimages,
			  const wc_freqtab tabs[QVQ_TX_PLANES], uint32_t chunk_symbols, uint8_t *out, size_t *len)
{
	const wc_freqtab *ft[QVQ_TX_PLANES];
	for (unsigned p = 0; p < QVQ_TX_PLANES; p++)
		ft[p] = &tabs[p];
	uint8_t *const base = out + 4 * (size_t)nimages;
	size_t at = 0;
	for (uint32_t i = 0; i < nimages; i++) {
		qvq_tx_layout L;
		qvq_tx_image_layout(dims[2 * i], dims[2 * i + 1], &L);
		size_t n = 0;
		for (unsigned p = 0; p < QVQ_TX_PLANES; p++)
			n += im[i].esc.n[p];
		uint8_t *q = base + at;
		wc_put_u32(q, (uint32_t)n);
		size_t k = 0; /* places, then values, plane by plane: ascending places */
		for (unsigned p = 0; p < QVQ_TX_PLANES; p++)
			for (size_t j = 0; j < im[i].esc.n[p]; j++, k++) {
				wc_put_u32(q + 4 + 4 * k, im[i].esc.pos[p][j]);
				wc_put_u16(q + 4 + 4 * n + 2 * k, (uint16_t)im[i].esc.val[p][j]);
			}
		if (n & 1)
			wc_put_u16(q + 4 + 6 * n, 0);
		at += escapes_bytes(n);
		wc_rans_segs sg = {.ft = ft};
		segments(&L, &sg);
		size_t body = 0;
		wc_err e = wc_rans_encode_segs(im[i].sym, L.nsym, &sg, chunk_symbols, base + at,
					       wc_rans_bound(L.nsym, chunk_symbols), &body);
		if (e)
			return wc_fail_context(e, "transform: image %u of the tile", i);
		at += body;
		wc_put_u32(out + 4 * (size_t)i, (uint32_t)at);
	}
	*len = 4 * (size_t)nimages + at;
	return WC_OK;
}

/* Split an image's escape list (places ascending) into the planes' views,
 * each place inside its plane's symbols. */
static wc_err split_escapes(const uint8_t *q, size_t n, const qvq_tx_layout *L, uint32_t *pos, int16_t *val,
			    qvq_tx_escapes *esc)
{
	unsigned p = 0;
	memset(esc, 0, sizeof *esc);
	for (unsigned k = 0; k < QVQ_TX_PLANES; k++)
		esc->pos[k] = pos, esc->val[k] = val;
	for (size_t k = 0; k < n; k++) {
		pos[k] = wc_get_u32(q + 4 * k);
		val[k] = (int16_t)wc_get_u16(q + 4 * n + 2 * k);
		if (k && pos[k] <= pos[k - 1])
			return wc_fail(WC_E_CORRUPT, "escape places not ascending at %zu", k);
		while (p < QVQ_TX_PLANES && pos[k] >= L->start[p] + L->count[p])
			p++;
		if (p == QVQ_TX_PLANES || pos[k] < L->start[p])
			return wc_fail(WC_E_CORRUPT, "escape place %u outside the planes' symbols", pos[k]);
		if (esc->n[p] == 0)
			esc->pos[p] = pos + k, esc->val[p] = val + k;
		esc->n[p]++;
	}
	return WC_OK;
}

/* Decode image i of a tile from its part [q, q + size). */
static wc_err decode_image(const uint8_t *q, size_t size, uint32_t w, uint32_t h,
			   const wc_rans_dtab *const dtabs[QVQ_TX_PLANES], uint32_t chunk_symbols, uint32_t step_luma,
			   uint32_t step_chroma, uint8_t *out)
{
	qvq_tx_layout L;
	qvq_tx_image_layout(w, h, &L);
	if (size < 4)
		return wc_fail(WC_E_CORRUPT, "a part of %zu bytes", size);
	const size_t n = wc_get_u32(q);
	if (n > L.nsym || escapes_bytes(n) > size)
		return wc_fail(WC_E_CORRUPT, "%zu escapes in a part of %zu bytes", n, size);
	qvq_dct_geom g;
	qvq_dct_geometry(w, h, &g);
	uint8_t *sym = malloc(L.nsym);
	uint32_t *pos = malloc((n + 1) * sizeof *pos);
	int16_t *val = malloc((n + 1) * sizeof *val);
	int16_t *coef = malloc(g.blocks * 64 * sizeof *coef);
	void *scratch = malloc(qvq_dct_scratch_bytes(w, h));
	wc_err e = sym && pos && val && coef && scratch ? WC_OK
			: wc_fail(WC_E_NOMEM, "no memory for a %ux%u image", w, h);
	qvq_tx_escapes esc;
	if (!e)
		e = split_escapes(q + 4, n, &L, pos, val, &esc);
	const size_t eb = escapes_bytes(n);
	if (!e) {
		wc_rans_segs sg = {.dt = dtabs};
		segments(&L, &sg);
		e = wc_rans_decode_segs(q + eb, size - eb, &sg, chunk_symbols, sym, L.nsym);
	}
	if (!e) {
		const uint8_t *plane[QVQ_TX_PLANES];
		size_t at[QVQ_TX_PLANES], cursor[QVQ_TX_PLANES] = {0};
		for (unsigned p = 0; p < QVQ_TX_PLANES; p++)
			plane[p] = sym, at[p] = L.start[p];
		e = qvq_tx_from_symbols(plane, at, &esc, cursor, w, h, coef);
		for (unsigned p = 0; !e && p < QVQ_TX_PLANES; p++)
			if (cursor[p] != esc.n[p])
				e = wc_fail(WC_E_CORRUPT, "plane %u: %zu escapes for %zu escape symbols", p, esc.n[p],
					    cursor[p]);
	}
	if (!e)
		e = qvq_dct_decode(coef, w, h, step_luma, step_chroma, out, scratch);
	free(sym);
	free(pos);
	free(val);
	free(coef);
	free(scratch);
	return e;
}

wc_err qvq_tx_tile_decode(const uint8_t *payload, size_t size, const uint32_t *dims, uint32_t nimages,
			  const wc_rans_dtab *const dtabs[QVQ_TX_PLANES], uint32_t chunk_symbols, uint32_t step_luma,
			  uint32_t step_chroma, uint8_t *out)
{
	if (size / 4 < nimages)
		return wc_fail(WC_E_CORRUPT, "transform: payload of %zu bytes for %u images", size, nimages);
	const size_t data = size - 4 * (size_t)nimages;
	size_t prev = 0;
	for (uint32_t i = 0; i < nimages; i++) {
		const size_t end = wc_get_u32(payload + 4 * (size_t)i);
		if (end < prev || end > data || end % 4 || (i + 1 == nimages && end != data))
			return wc_fail(WC_E_CORRUPT, "transform: image %u of the tile ends at %zu (previous %zu, "
				       "data %zu bytes)", i, end, prev, data);
		const uint32_t w = dims[2 * i], h = dims[2 * i + 1];
		wc_err e = decode_image(payload + 4 * (size_t)nimages + prev, end - prev, w, h, dtabs, chunk_symbols,
					step_luma, step_chroma, out);
		if (e)
			return wc_fail_context(e, "transform: image %u of the tile", i);
		out += (size_t)w * h * 3;
		prev = end;
	}
	return WC_OK;
}
