/*
 * qvq_decode.c - reference CPU decode of .qvq image tiles: tile-codec decode
 * of the index array, then a codebook gather per image. The CUDA kernel
 * cuda/vq_gather.cu computes the same bytes.
 */
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "codec/tile_codec.h"
#include "core/cpu.h"
#include "core/hash.h"
#include "qvq/qvq.h"
#include "qvq/qvq_tx_tile.h"
#include "qvq/qvq_gather.h"
#include "qvq/qvq_job.h"

int wc_qvq_gather_scalar_only;

/* The common shape, 2x2 patches of RGB: two rows of 6 bytes per entry.
 * Inside a row, each patch is written with one 8-byte store per pixel row
 * (the 2 extra bytes land where the next patch's store overwrites them);
 * the last full patch and an odd last column are copied exactly, so no
 * store leaves the row. Loads stay inside the 12-byte entry: row 0 is
 * bytes 0..7, row 1 is bytes 4..11 shifted down by two (little-endian). */
static inline uint64_t ld64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

static inline void st64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

/* The largest of n indices of ib bytes. SSE2 (part of x86-64) takes 16
 * bytes a step; -O2 does not vectorize the plain loop, which then costs
 * more than the per-patch test it replaces. */
static uint32_t max_index(const uint8_t *idx, uint32_t ib, size_t n)
{
	size_t i = 0;
	uint32_t m = 0;
#if defined(__SSE2__)
	size_t per = 16 / ib;
	if (n >= per) {
		uint8_t lanes[16];
		if (ib == 1) {
			__m128i acc = _mm_setzero_si128();
			for (; i + per <= n; i += per)
				acc = _mm_max_epu8(acc, _mm_loadu_si128((const __m128i *)(idx + i)));
			_mm_storeu_si128((__m128i *)lanes, acc);
			for (int j = 0; j < 16; j++)
				m = lanes[j] > m ? lanes[j] : m;
		} else {
			/* No unsigned 16-bit max in SSE2: flip the top bit, take the
			 * signed max, flip it back. */
			const __m128i flip = _mm_set1_epi16((short)0x8000);
			__m128i acc = flip;
			for (; i + per <= n; i += per)
				acc = _mm_max_epi16(acc, _mm_xor_si128(
					_mm_loadu_si128((const __m128i *)(idx + 2 * i)), flip));
			_mm_storeu_si128((__m128i *)lanes, _mm_xor_si128(acc, flip));
			for (int j = 0; j < 8; j++) {
				uint32_t v = wc_get_u16(lanes + 2 * j);
				m = v > m ? v : m;
			}
		}
	}
#endif
	for (; i < n; i++) {
		uint32_t v = wc_qvq_index_at(idx, ib, i);
		m = v > m ? v : m;
	}
	return m;
}

static inline __attribute__((always_inline)) wc_err gather_2x2x3_ib(
	const uint8_t *cb, uint32_t entries, const uint8_t *idx, const uint32_t ib, uint32_t w,
	uint32_t h, uint8_t *out)
{
	uint32_t gw = (w + 1) / 2, gh = (h + 1) / 2;
	/* Every index is checked before any is used, in one pass over the
	 * index array: the gather then needs no per-patch test (about a
	 * quarter of its time). */
	if (max_index(idx, ib, (size_t)gw * gh) >= entries) {
		uint32_t gy = 0;
		while (gy + 1 < gh && max_index(idx + (size_t)gy * gw * ib, ib, gw) < entries)
			gy++;
		return wc_fail(WC_E_CORRUPT, "qvq: codebook index out of range in patch row %u", gy);
	}
	size_t stride = (size_t)w * 3;
	uint32_t full = w / 2; /* patches whose both columns are inside the image */
	uint32_t fast = full > 0 ? full - 1 : 0;
	/* sixteen patches a step where the CPU has AVX-512 VBMI (qvq_gather.h) */
	const bool vbmi = !wc_qvq_gather_scalar_only && full >= 16 &&
			  (wc_cpu_features() & WC_CPU_AVX512VBMI);
	for (uint32_t gy = 0; gy < gh; gy++) {
		uint8_t *r0 = out + (size_t)(2 * gy) * stride;
		uint8_t *r1 = r0 + stride;
		int two = 2 * gy + 1 < h;
		const uint8_t *row = idx + (size_t)gy * gw * ib;
		uint32_t gx = 0;
		/* The output is usually cold (a recycled cache buffer): the
		 * patch stores, 8 bytes at a stride of 6, each wait for their
		 * line's read-for-ownership, a few lines at a time. Asking for
		 * the next patch row's lines now (prefetch for writing) has
		 * them arrive in parallel: 1.2x the whole tile decode into a 64
		 * MiB ring of buffers (qvq_bench ARCHIVE 5 64), no change when
		 * the output is in cache. */
		if (gy + 1 < gh) {
			const uint8_t *next = r0 + 2 * stride;
			size_t rows = 2 * gy + 3 < h ? 2 : 1;
			for (size_t o = 0; o < rows * stride; o += 64)
				__builtin_prefetch(next + o, 1, 3);
		}
		if (two && vbmi)
			gx = (uint32_t)wc_qvq_gather_pairs_avx512(cb, entries, row, ib, full, r0, r1);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
		if (two) {
			for (; gx < fast; gx++) {
				const uint8_t *p = cb + (size_t)wc_qvq_index_at(row, ib, gx) * 12;
				st64(r0 + 6 * gx, ld64(p));
				st64(r1 + 6 * gx, ld64(p + 4) >> 16);
			}
		}
#endif
		for (; gx < gw; gx++) {
			const uint8_t *p = cb + (size_t)wc_qvq_index_at(row, ib, gx) * 12;
			size_t n = gx < full ? 6 : 3;
			memcpy(r0 + 6 * gx, p, n);
			if (two)
				memcpy(r1 + 6 * gx, p + 6, n);
		}
	}
	return WC_OK;
}

static wc_err gather_2x2x3(const uint8_t *cb, uint32_t entries, const uint8_t *idx,
			   uint32_t ib, uint32_t w, uint32_t h, uint8_t *out)
{
	return ib == 1 ? gather_2x2x3_ib(cb, entries, idx, 1, w, h, out)
		       : gather_2x2x3_ib(cb, entries, idx, 2, w, h, out);
}

wc_err wc_qvq_gather(const uint8_t *codebook, uint32_t entries, uint32_t ph, uint32_t pw,
		     uint32_t channels, const uint8_t *idx, uint32_t index_bytes,
		     uint32_t w, uint32_t h, uint8_t *out)
{
	if (ph == 2 && pw == 2 && channels == 3)
		return gather_2x2x3(codebook, entries, idx, index_bytes, w, h, out);
	uint32_t gw = (w + pw - 1) / pw;
	size_t psize = (size_t)ph * pw * channels;
	for (uint32_t y = 0; y < h; y++) {
		for (uint32_t x = 0; x < w; x++) {
			size_t j = (size_t)(y / ph) * gw + x / pw;
			uint32_t k = wc_qvq_index_at(idx, index_bytes, j);
			if (k >= entries)
				return wc_fail(WC_E_CORRUPT, "qvq: codebook index %u >= %u entries",
					       k, entries);
			const uint8_t *p = codebook + k * psize + ((y % ph) * pw + x % pw) * channels;
			memcpy(out + ((size_t)y * w + x) * channels, p, channels);
		}
	}
	return WC_OK;
}

wc_err wc_qvq_decode_job(wc_tile_job *job)
{
	wc_err e = WC_OK;
	uint8_t *idx = NULL;
	const wc_qvq_job *v = wc_qvq_job_of(job);
	if (!v) {
		e = wc_fail(WC_E_FORMAT, "qvq: not a VQ job");
		goto out;
	}
	uint32_t ph = v->patch_h, pw = v->patch_w, ch = v->channels;
	uint32_t ib = v->index_bytes;
	if (!v->codebook || !v->dims || ph == 0 || pw == 0 || ch == 0 || (ib != 1 && ib != 2) ||
	    job->layout.elem_size != ib) {
		e = wc_fail(WC_E_FORMAT, "qvq: inconsistent VQ job");
		goto out;
	}
	/* The images' geometry must add up to the job's sizes. */
	uint64_t nidx = 0, dsize = 0;
	for (uint32_t i = 0; i < v->nimages; i++) {
		uint32_t w = v->dims[2 * i], h = v->dims[2 * i + 1];
		nidx += wc_qvq_patches(w, h, pw, ph);
		dsize += (uint64_t)w * h * ch;
	}
	if (nidx != v->nindices || dsize != job->out_size) {
		e = wc_fail(WC_E_FORMAT, "qvq: VQ job geometry (%llu indices, %llu bytes) does not "
			    "match its sizes (%u, %u)", (unsigned long long)nidx,
			    (unsigned long long)dsize, v->nindices, job->out_size);
		goto out;
	}
	idx = malloc(nidx * ib + 1);
	if (!idx) {
		e = wc_fail(WC_E_NOMEM, "qvq: no memory for %llu indices", (unsigned long long)nidx);
		goto out;
	}
	e = wc_tile_decode(job->layout, job->payload, job->payload_size, job->tables,
			   job->ntables, job->chunk_symbols, idx, nidx * ib);
	if (e)
		goto out;
	const uint8_t *ip = idx;
	uint8_t *op = job->out;
	for (uint32_t i = 0; i < v->nimages && !e; i++) {
		uint32_t w = v->dims[2 * i], h = v->dims[2 * i + 1];
		e = wc_qvq_gather(v->codebook, v->entries, ph, pw, ch, ip, ib, w, h, op);
		ip += wc_qvq_patches(w, h, pw, ph) * ib;
		op += (size_t)w * h * ch;
	}
	if (!e && wc_xxh3_64(job->out, job->out_size) != job->dhash)
		e = wc_fail(WC_E_CORRUPT, "qvq: decoded image tile fails its checksum");
out:
	free(idx);
	if (e) /* the reason travels with the job (backends decode on their own threads) */
		return wc_job_fail(job, e, "%s", wc_last_detail());
	job->status = WC_OK;
	job->detail[0] = '\0';
	return WC_OK;
}

wc_err wc_qvq_tx_decode_job(wc_tile_job *job)
{
	wc_err e = WC_OK;
	const wc_qvq_job *v = wc_qvq_tx_job_of(job);
	uint64_t dsize = 0;
	for (uint32_t i = 0; v && v->dims && i < v->nimages; i++)
		dsize += (uint64_t)v->dims[2 * i] * v->dims[2 * i + 1] * 3;
	if (!v || !v->dims || !v->dtabs || dsize != job->out_size)
		e = wc_fail(WC_E_FORMAT, "qvq: inconsistent transform job");
	else
		e = qvq_tx_tile_decode(job->payload, job->payload_size, v->dims, v->nimages, v->dtabs,
				       job->chunk_symbols, v->step_luma, v->step_chroma, job->out);
	if (!e && wc_xxh3_64(job->out, job->out_size) != job->dhash)
		e = wc_fail(WC_E_CORRUPT, "qvq: decoded image tile fails its checksum");
	if (e) /* the reason travels with the job (backends decode on their own threads) */
		return wc_job_fail(job, e, "%s", wc_last_detail());
	job->status = WC_OK;
	job->detail[0] = '\0';
	return WC_OK;
}
