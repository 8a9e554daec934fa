/* qvq_files.c - the PPM, images.npy and labels.txt files a .qvq shows. */
#include "qvq/qvq_files.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qvq/qvq_internal.h"

static int ppm_header(const wc_qvq_image *im, char buf[64])
{
	return snprintf(buf, 64, "P6\n%u %u\n255\n", im->width, im->height);
}

wc_err wc_qvq_files_init(wc_qvq *q)
{
	uint32_t n = q->h.nimages;
	q->uniform = 1;
	for (uint32_t i = 1; i < n; i++)
		if (q->images[i].width != q->images[0].width ||
		    q->images[i].height != q->images[0].height)
			q->uniform = 0;
	if (q->uniform) {
		/* NPY format 1.0 (numpy.lib.format): magic, version, u16 header
		 * length, a Python dict literal padded with spaces and '\n' so the
		 * data starts at a multiple of 64. */
		char dict[100];
		int dl = snprintf(dict, sizeof dict,
				  "{'descr': '|u1', 'fortran_order': False, 'shape': (%u, %u, %u, 3), }",
				  n, q->images[0].height, q->images[0].width);
		uint32_t total = (10u + (uint32_t)dl + 1u + 63u) / 64u * 64u;
		memset(q->npy_header, ' ', total);
		memcpy(q->npy_header, "\x93NUMPY\x01\x00", 8);
		q->npy_header[8] = (char)((total - 10) & 0xff);
		q->npy_header[9] = (char)((total - 10) >> 8);
		memcpy(q->npy_header + 10, dict, (size_t)dl);
		q->npy_header[total - 1] = '\n';
		q->npy_header_len = total;
	}
	if (q->nlabels) {
		size_t len = 0;
		for (uint32_t i = 0; i < n; i++)
			len += (q->images[i].label == WC_QVQ_NO_LABEL ? 0
				: strlen(q->labels[q->images[i].label])) + 1;
		q->labels_txt = malloc(len + 1);
		if (!q->labels_txt)
			return wc_fail(WC_E_NOMEM, "qvq: no memory for labels.txt");
		char *p = q->labels_txt;
		for (uint32_t i = 0; i < n; i++) {
			if (q->images[i].label != WC_QVQ_NO_LABEL) {
				size_t l = strlen(q->labels[q->images[i].label]);
				memcpy(p, q->labels[q->images[i].label], l);
				p += l;
			}
			*p++ = '\n';
		}
		*p = 0;
		q->labels_len = len;
	}
	return WC_OK;
}

uint32_t wc_qvq_nfiles(const wc_qvq *q)
{
	return q->h.nimages + (q->uniform ? 1 : 0) + (q->labels_txt ? 1 : 0);
}

/* Which extra file f is: 0 images.npy, 1 labels.txt, -1 none. */
static int extra_kind(const wc_qvq *q, uint32_t f)
{
	if (f < q->h.nimages)
		return -1;
	uint32_t k = f - q->h.nimages;
	if (q->uniform && k == 0)
		return 0;
	if (q->labels_txt && k == (q->uniform ? 1u : 0u))
		return 1;
	return -2;
}

const char *wc_qvq_file_name(const wc_qvq *q, uint32_t f)
{
	if (f < q->h.nimages)
		return q->shown[f];
	switch (extra_kind(q, f)) {
	case 0: return "images.npy";
	case 1: return "labels.txt";
	default: return NULL;
	}
}

uint64_t wc_qvq_file_size(const wc_qvq *q, uint32_t f)
{
	if (f < q->h.nimages) {
		char hdr[64];
		const wc_qvq_image *im = &q->images[f];
		return (uint64_t)ppm_header(im, hdr) + (uint64_t)im->width * im->height * 3;
	}
	switch (extra_kind(q, f)) {
	case 0: return q->npy_header_len + q->tiles[q->h.ntiles - 1].voff +
		       q->tiles[q->h.ntiles - 1].dsize;
	case 1: return q->labels_len;
	default: return 0;
	}
}

/* Copy bytes [off, off+len) of the concatenation of decoded tiles, starting
 * in tile t. */
static wc_err copy_tiles(const wc_qvq *q, uint32_t t, uint64_t off, uint8_t *buf, size_t len,
			 const wc_qvq_tile_getter *g)
{
	while (len) {
		const wc_qvq_tile *tl = &q->tiles[t];
		uint64_t in = off - tl->voff;
		size_t n = tl->dsize - in < len ? (size_t)(tl->dsize - in) : len;
		const uint8_t *data;
		void *handle;
		wc_err e = g->get(g->ctx, t, &data, &handle);
		if (e)
			return e;
		memcpy(buf, data + in, n);
		g->put(g->ctx, handle);
		buf += n; len -= n; off += n; t++;
	}
	return WC_OK;
}

uint32_t wc_qvq_find_tile(const wc_qvq *q, uint64_t voff)
{
	uint32_t lo = 0, hi = q->h.ntiles; /* invariant: tiles[lo].voff <= voff */
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (q->tiles[mid].voff <= voff)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

wc_err wc_qvq_file_layout_of(const wc_qvq *q, uint32_t f, char ppm_buf[64],
			     wc_qvq_file_layout *out)
{
	memset(out, 0, sizeof *out);
	if (f < q->h.nimages) {
		const wc_qvq_image *im = &q->images[f];
		out->prefix_len = (uint32_t)ppm_header(im, ppm_buf);
		out->prefix = (const uint8_t *)ppm_buf;
		out->data_voff = q->tiles[im->tile].voff + im->tile_off;
		out->data_len = (uint64_t)im->width * im->height * 3;
		return WC_OK;
	}
	switch (extra_kind(q, f)) {
	case 0:
		out->prefix = (const uint8_t *)q->npy_header;
		out->prefix_len = q->npy_header_len;
		out->data_voff = 0;
		out->data_len = q->tiles[q->h.ntiles - 1].voff + q->tiles[q->h.ntiles - 1].dsize;
		return WC_OK;
	case 1:
		out->prefix = (const uint8_t *)q->labels_txt;
		out->prefix_len = (uint32_t)q->labels_len;
		return WC_OK;
	default:
		return wc_fail(WC_E_NOTFOUND, "qvq: no file %u", f);
	}
}

wc_err wc_qvq_file_read(const wc_qvq *q, uint32_t f, uint8_t *buf, size_t len, uint64_t off,
			const wc_qvq_tile_getter *getter, size_t *nread)
{
	*nread = 0;
	char ppm[64];
	wc_qvq_file_layout lay;
	wc_err e = wc_qvq_file_layout_of(q, f, ppm, &lay);
	if (e)
		return e;
	uint64_t size = lay.prefix_len + lay.data_len;
	if (off >= size)
		return WC_OK;
	if (len > size - off)
		len = (size_t)(size - off);
	size_t done = 0;
	if (off < lay.prefix_len) {
		done = lay.prefix_len - off < len ? (size_t)(lay.prefix_len - off) : len;
		memcpy(buf, lay.prefix + off, done);
	}
	if (done < len) {
		uint64_t d = lay.data_voff + (off + done - lay.prefix_len);
		if ((e = copy_tiles(q, wc_qvq_find_tile(q, d), d, buf + done, len - done, getter)))
			return e;
	}
	*nread = len;
	return WC_OK;
}

static wc_err memo_get(void *ctx, uint32_t tile, const uint8_t **data, void **handle)
{
	wc_qvq_memo *m = ctx;
	*handle = NULL;
	if (m->tile != tile) {
		const wc_qvq_tile *tl = wc_qvq_tile_at(m->q, tile);
		if (!tl)
			return wc_fail(WC_E_RANGE, "qvq: tile %u out of range", tile);
		if (m->cap < tl->dsize) {
			uint8_t *nb = realloc(m->buf, tl->dsize);
			if (!nb)
				return wc_fail(WC_E_NOMEM, "qvq: no memory for a %u-byte tile", tl->dsize);
			m->buf = nb;
			m->cap = tl->dsize;
		}
		m->tile = UINT32_MAX;
		wc_err e = wc_qvq_decode_tile(m->q, tile, m->buf);
		if (e)
			return e;
		m->tile = tile;
	}
	*data = m->buf;
	return WC_OK;
}

static void memo_put(void *ctx, void *handle)
{
	(void)ctx;
	(void)handle;
}

void wc_qvq_memo_init(wc_qvq_memo *m, const wc_qvq *q, wc_qvq_tile_getter *getter)
{
	m->q = q;
	m->tile = UINT32_MAX;
	m->buf = NULL;
	m->cap = 0;
	getter->get = memo_get;
	getter->put = memo_put;
	getter->ctx = m;
}

void wc_qvq_memo_free(wc_qvq_memo *m)
{
	free(m->buf);
	m->buf = NULL;
	m->tile = UINT32_MAX;
}
