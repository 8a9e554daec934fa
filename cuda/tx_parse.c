/* tx_parse.c - an image's part of a transform-mode tile payload parsed and
 * checked on the host (tx_decode.h, wcc_tx_parse_image): what the GPU path
 * and the resident archives both build their descriptors from. */
#include <string.h>

#include "codec/rans.h"
#include "core/le.h"
#include "qvq/qvq_job.h"
#include "tx_decode.h"

/* An image's stream planes (docs/FORMAT.md 6.8). */
static void stream_layout(wcc_tx_image *im)
{
	static const uint32_t width[4] = {1, 5, 15, 43};
	const uint32_t nb = im->mw * im->mh;
	uint32_t at = 0;
	for (unsigned p = 0; p < WCC_TX_PLANES; p++) {
		im->count[p] = (p < 4 ? 4 * nb : 2 * nb) * width[p % 4];
		im->start[p] = at;
		at += (im->count[p] + 31) / 32 * 32;
		im->end[p] = at;
	}
}

int wcc_tx_parse_image(wc_tile_job *j, uint32_t i, wcc_tx_image *im, wcc_tx_chunk *ch, uint32_t *nch,
		       const uint8_t *h_base, const uint8_t *d_base, uint32_t img)
{
	const wc_qvq_job *q = wc_qvq_tx_job_of(j);
	const uint8_t *pay = j->payload;
	const size_t size = j->payload_size, n = q->nimages;
	if (size / 4 < n) {
		wc_job_fail(j, WC_E_CORRUPT, "transform: payload of %zu bytes for %zu images", size, n);
		return -1;
	}
	const size_t data = size - 4 * n;
	size_t prev = 0, end = 0, last = 0;
	for (uint32_t k = 0; k < n; k++) { /* every image's end, as the CPU checks them */
		const size_t e = wc_get_u32(pay + 4 * (size_t)k);
		if (e < last || e > data || e % 4 || (k + 1 == n && e != data)) {
			wc_job_fail(j, WC_E_CORRUPT, "transform: image %u of the tile ends at %zu", k, e);
			return -1;
		}
		if (k == i)
			prev = last, end = e;
		last = e;
	}
	const uint8_t *part = pay + 4 * n + prev;
	const size_t psize = end - prev;
	im->w = q->dims[2 * i];
	im->h = q->dims[2 * i + 1];
	im->mw = (im->w + 15) / 16;
	im->mh = (im->h + 15) / 16;
	stream_layout(im);
	const size_t nsym = im->end[WCC_TX_PLANES - 1];
	const size_t nesc = psize >= 4 ? wc_get_u32(part) : 0;
	const size_t eb = 4 + 6 * nesc + 2 * (nesc & 1);
	if (psize < 4 || nesc > nsym || eb > psize) {
		wc_job_fail(j, WC_E_CORRUPT, "transform: image %u: escapes do not fit its part", i);
		return -1;
	}
	unsigned p = 0;
	for (size_t k = 0; k < nesc; k++) {
		const uint32_t at = wc_get_u32(part + 4 + 4 * k);
		while (p < WCC_TX_PLANES && at >= im->start[p] + im->count[p])
			p++;
		if ((k && at <= wc_get_u32(part + 4 * k)) || p == WCC_TX_PLANES || at < im->start[p]) {
			wc_job_fail(j, WC_E_CORRUPT, "transform: image %u: escape place %u", i, at);
			return -1;
		}
	}
	im->nesc = (uint32_t)nesc;
	im->places = (const uint32_t *)(d_base + (part + 4 - h_base));
	im->values = (const int16_t *)(d_base + (part + 4 + 4 * nesc - h_base));
	/* the rANS body: chunk ends, sizes (docs/FORMAT.md 4) */
	const uint8_t *body = part + eb;
	const size_t blen = psize - eb, C = j->chunk_symbols, nchunks = (nsym + C - 1) / C;
	if (blen / 4 < nchunks) {
		wc_job_fail(j, WC_E_CORRUPT, "transform: image %u: rANS body of %zu bytes", i, blen);
		return -1;
	}
	const size_t dlen = blen - 4 * nchunks;
	const uint32_t nch0 = *nch; /* a chunk refused: the image's chunks taken back */
	size_t cprev = 0;
	for (size_t k = 0; k < nchunks; k++) {
		const size_t cend = wc_get_u32(body + 4 * k), m = nsym - k * C < C ? nsym - k * C : C;
		const size_t csz = cend - cprev;
		if (cend <= cprev || cend > dlen || csz % 4 || csz < 128 || csz > 128 + 2 * m + 2 ||
		    (k + 1 == nchunks && cend != dlen)) {
			wc_job_fail(j, WC_E_CORRUPT, "transform: image %u: rANS chunk %zu of %zu bytes", i, k, csz);
			*nch = nch0;
			return -1;
		}
		ch[*nch] = (wcc_tx_chunk){.data = d_base + (body + 4 * nchunks + cprev - h_base),
					  .nw = (uint32_t)((csz - 128) / 2), .first = (uint32_t)(k * C),
					  .m = (uint32_t)m, .img = img};
		(*nch)++;
		cprev = cend;
	}
	im->step_luma = q->step_luma;
	im->step_chroma = q->step_chroma;
	return 0;
}

