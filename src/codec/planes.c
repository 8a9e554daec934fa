/* planes.c - dtype -> plane layout, and splitting/merging byte planes
 * (docs/FORMAT.md section 2). */
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "codec/planes.h"
#include "codec/codec_internal.h"

static const struct {
	const char *dtype;
	wc_layout layout;
} dtype_layouts[] = {
	{"BF16", {WC_LAYOUT_BF16, 2, 2}},
	{"F32", {WC_LAYOUT_F32, 4, 4}},
	{"F16", {WC_LAYOUT_SHUFFLE, 2, 2}},
	{"I16", {WC_LAYOUT_SHUFFLE, 2, 2}},
	{"U16", {WC_LAYOUT_SHUFFLE, 2, 2}},
	{"I32", {WC_LAYOUT_SHUFFLE, 4, 4}},
	{"U32", {WC_LAYOUT_SHUFFLE, 4, 4}},
	{"F64", {WC_LAYOUT_SHUFFLE, 8, 8}},
	{"I64", {WC_LAYOUT_SHUFFLE, 8, 8}},
	{"U64", {WC_LAYOUT_SHUFFLE, 8, 8}},
	{"C64", {WC_LAYOUT_SHUFFLE, 8, 8}},
};

static const wc_layout bytes_layout = {WC_LAYOUT_BYTES, 1, 1};

wc_layout wc_layout_for_dtype(const char *dtype)
{
	for (size_t i = 0; dtype && i < sizeof dtype_layouts / sizeof dtype_layouts[0]; i++)
		if (strcmp(dtype, dtype_layouts[i].dtype) == 0)
			return dtype_layouts[i].layout;
	return bytes_layout;
}

static const struct {
	const char *name;
	wc_layout layout;
} layout_names[] = {
	{"bytes", {WC_LAYOUT_BYTES, 1, 1}},
	{"shuffle2", {WC_LAYOUT_SHUFFLE, 2, 2}},
	{"shuffle4", {WC_LAYOUT_SHUFFLE, 4, 4}},
	{"shuffle8", {WC_LAYOUT_SHUFFLE, 8, 8}},
	{"bf16", {WC_LAYOUT_BF16, 2, 2}},
	{"f32", {WC_LAYOUT_F32, 4, 4}},
};

const char *wc_layout_name(wc_layout l)
{
	if (l.kind == WC_LAYOUT_DICT)
		return "dict";
	for (size_t i = 0; i < sizeof layout_names / sizeof layout_names[0]; i++) {
		wc_layout k = layout_names[i].layout;
		if (k.kind == l.kind && k.elem_size == l.elem_size && k.nplanes == l.nplanes)
			return layout_names[i].name;
	}
	return "invalid";
}

int wc_layout_parse(const char *name, wc_layout *out)
{
	for (size_t i = 0; name && i < sizeof layout_names / sizeof layout_names[0]; i++) {
		if (strcmp(name, layout_names[i].name) == 0) {
			*out = layout_names[i].layout;
			return 0;
		}
	}
	return -1;
}

/* The splits run on every tile the packer codes and on every block it
 * takes a histogram of: SSE2, 16 elements per step, the inverse of the
 * merges below; scalar loops finish the tail. */
static void split_bf16(const uint8_t *in, size_t n, uint8_t *p0, uint8_t *p1)
{
	size_t i = 0;
#if defined(__SSE2__)
	const __m128i m_ff = _mm_set1_epi16(0x00ff), m_7f = _mm_set1_epi16(0x007f);
	const __m128i m_80 = _mm_set1_epi16(0x0080);
	for (; i + 16 <= n; i += 16) {
		__m128i w0 = _mm_loadu_si128((const __m128i *)(in + 2 * i));
		__m128i w1 = _mm_loadu_si128((const __m128i *)(in + 2 * i + 16));
		/* p0 = v >> 7 (the exponent byte); p1 = sign << 7 | mantissa */
		__m128i e0 = _mm_and_si128(_mm_srli_epi16(w0, 7), m_ff);
		__m128i e1 = _mm_and_si128(_mm_srli_epi16(w1, 7), m_ff);
		__m128i s0 = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(w0, 8), m_80), _mm_and_si128(w0, m_7f));
		__m128i s1 = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(w1, 8), m_80), _mm_and_si128(w1, m_7f));
		_mm_storeu_si128((__m128i *)(p0 + i), _mm_packus_epi16(e0, e1));
		_mm_storeu_si128((__m128i *)(p1 + i), _mm_packus_epi16(s0, s1));
	}
#endif
	for (; i < n; i++) {
		uint16_t v = (uint16_t)(in[2 * i] | in[2 * i + 1] << 8);
		p0[i] = (uint8_t)(v >> 7);
		p1[i] = (uint8_t)(((v >> 8) & 0x80) | (v & 0x7f));
	}
}

/*
 * The merges run on every decoded tile, so they are written with SSE2 (part
 * of every x86-64): interleaving plane bytes yields words/dwords whose bits
 * need only a few fixed shifts and masks. Scalar loops finish the tail.
 */
static void merge_bf16(const uint8_t *p0, const uint8_t *p1, size_t n, uint8_t *out)
{
	/* The decoders' instruction-set choice (and its test hook) picks AVX2. */
	size_t i = wc_rans_isa() >= WC_RANS_ISA_AVX2 ? wc_merge_bf16_avx2(p0, p1, n, out) : 0;
#if defined(__SSE2__)
	const __m128i m_mant = _mm_set1_epi16(0x007f), m_exp = _mm_set1_epi16(0x7f80);
	const __m128i m_sign = _mm_set1_epi16((short)0x8000);
	for (; i + 16 <= n; i += 16) {
		__m128i a = _mm_loadu_si128((const __m128i *)(p0 + i));
		__m128i b = _mm_loadu_si128((const __m128i *)(p1 + i));
		/* w = p1 | p0 << 8; v = (w & 0x7f) | ((w >> 1) & 0x7f80) | ((w << 8) & 0x8000) */
		__m128i w0 = _mm_unpacklo_epi8(b, a), w1 = _mm_unpackhi_epi8(b, a);
		__m128i v0 = _mm_or_si128(_mm_and_si128(w0, m_mant),
					  _mm_or_si128(_mm_and_si128(_mm_srli_epi16(w0, 1), m_exp),
						       _mm_and_si128(_mm_slli_epi16(w0, 8), m_sign)));
		__m128i v1 = _mm_or_si128(_mm_and_si128(w1, m_mant),
					  _mm_or_si128(_mm_and_si128(_mm_srli_epi16(w1, 1), m_exp),
						       _mm_and_si128(_mm_slli_epi16(w1, 8), m_sign)));
		_mm_storeu_si128((__m128i *)(out + 2 * i), v0);
		_mm_storeu_si128((__m128i *)(out + 2 * i + 16), v1);
	}
#endif
	for (; i < n; i++) {
		uint16_t v = (uint16_t)((p0[i] << 7) | ((p1[i] & 0x80) << 8) | (p1[i] & 0x7f));
		memcpy(out + 2 * i, &v, 2);
	}
}

#if defined(__SSE2__)
/* Bytes 0..3 of eight 32-bit lanes (each below 256) -> 8 bytes at dst. */
static inline void store8_from_dwords(uint8_t *dst, __m128i a, __m128i b)
{
	_mm_storel_epi64((__m128i *)dst, _mm_packus_epi16(_mm_packs_epi32(a, b), _mm_setzero_si128()));
}
#endif

static void split_f32(const uint8_t *in, size_t n, uint8_t *const pl[])
{
	size_t i = 0;
#if defined(__SSE2__)
	const __m128i m_ff = _mm_set1_epi32(0xff), m_low = _mm_set1_epi32(0x007fffff);
	for (; i + 8 <= n; i += 8) {
		__m128i u[2], r[2];
		for (int h = 0; h < 2; h++) {
			u[h] = _mm_loadu_si128((const __m128i *)(in + 4 * i + 16 * h));
			/* r = mantissa | sign << 23 */
			r[h] = _mm_or_si128(_mm_and_si128(u[h], m_low),
					    _mm_slli_epi32(_mm_srli_epi32(u[h], 31), 23));
		}
		store8_from_dwords(pl[0] + i, _mm_and_si128(_mm_srli_epi32(u[0], 23), m_ff),
				   _mm_and_si128(_mm_srli_epi32(u[1], 23), m_ff));
		store8_from_dwords(pl[1] + i, _mm_and_si128(r[0], m_ff), _mm_and_si128(r[1], m_ff));
		store8_from_dwords(pl[2] + i, _mm_and_si128(_mm_srli_epi32(r[0], 8), m_ff),
				   _mm_and_si128(_mm_srli_epi32(r[1], 8), m_ff));
		store8_from_dwords(pl[3] + i, _mm_srli_epi32(r[0], 16), _mm_srli_epi32(r[1], 16));
	}
#endif
	for (; i < n; i++) {
		uint32_t u;
		memcpy(&u, in + 4 * i, 4);
		uint32_t r = (u & 0x7fffff) | ((u >> 31) << 23);
		pl[0][i] = (uint8_t)(u >> 23);
		pl[1][i] = (uint8_t)r;
		pl[2][i] = (uint8_t)(r >> 8);
		pl[3][i] = (uint8_t)(r >> 16);
	}
}

#if defined(__SSE2__)
/* d = p1 | p2 << 8 | p3 << 16 | p0 << 24 -> the F32 bits */
static inline __m128i f32_bits(__m128i d)
{
	const __m128i m_low = _mm_set1_epi32(0x007fffff), m_exp = _mm_set1_epi32(0x7f800000);
	const __m128i m_sign = _mm_set1_epi32((int)0x80000000u);
	return _mm_or_si128(_mm_and_si128(d, m_low),
			    _mm_or_si128(_mm_and_si128(_mm_srli_epi32(d, 1), m_exp),
					 _mm_and_si128(_mm_slli_epi32(d, 8), m_sign)));
}
#endif

static void merge_f32(const uint8_t *const pl[], size_t n, uint8_t *out)
{
	const uint8_t *p0 = pl[0], *p1 = pl[1], *p2 = pl[2], *p3 = pl[3];
	size_t i = wc_rans_isa() >= WC_RANS_ISA_AVX2 ? wc_merge_f32_avx2(pl, n, out) : 0;
#if defined(__SSE2__)
	for (; i + 16 <= n; i += 16) {
		__m128i a0 = _mm_loadu_si128((const __m128i *)(p0 + i));
		__m128i a1 = _mm_loadu_si128((const __m128i *)(p1 + i));
		__m128i a2 = _mm_loadu_si128((const __m128i *)(p2 + i));
		__m128i a3 = _mm_loadu_si128((const __m128i *)(p3 + i));
		__m128i lo_l = _mm_unpacklo_epi8(a1, a2), lo_h = _mm_unpackhi_epi8(a1, a2);
		__m128i hi_l = _mm_unpacklo_epi8(a3, a0), hi_h = _mm_unpackhi_epi8(a3, a0);
		uint8_t *o = out + 4 * i;
		_mm_storeu_si128((__m128i *)(o + 0), f32_bits(_mm_unpacklo_epi16(lo_l, hi_l)));
		_mm_storeu_si128((__m128i *)(o + 16), f32_bits(_mm_unpackhi_epi16(lo_l, hi_l)));
		_mm_storeu_si128((__m128i *)(o + 32), f32_bits(_mm_unpacklo_epi16(lo_h, hi_h)));
		_mm_storeu_si128((__m128i *)(o + 48), f32_bits(_mm_unpackhi_epi16(lo_h, hi_h)));
	}
#endif
	for (; i < n; i++) {
		uint32_t u = ((uint32_t)p0[i] << 23) | ((uint32_t)(p3[i] & 0x80) << 24) |
			     ((uint32_t)(p3[i] & 0x7f) << 16) | ((uint32_t)p2[i] << 8) | p1[i];
		memcpy(out + 4 * i, &u, 4);
	}
}

void wc_planes_split(wc_layout l, const uint8_t *in, size_t nelem, uint8_t *const planes[])
{
	switch (l.kind) {
	case WC_LAYOUT_BF16:
		split_bf16(in, nelem, planes[0], planes[1]);
		return;
	case WC_LAYOUT_F32:
		split_f32(in, nelem, planes);
		return;
	default:
		break;
	}
	unsigned w = l.elem_size;
	if (w == 1) {
		memcpy(planes[0], in, nelem);
		return;
	}
	size_t i0 = 0;
#if defined(__SSE2__)
	if (w == 2) { /* F16, I16, U16: plane 0 the high bytes, plane 1 the low */
		const __m128i m_ff = _mm_set1_epi16(0x00ff);
		for (; i0 + 16 <= nelem; i0 += 16) {
			__m128i w0 = _mm_loadu_si128((const __m128i *)(in + 2 * i0));
			__m128i w1 = _mm_loadu_si128((const __m128i *)(in + 2 * i0 + 16));
			_mm_storeu_si128((__m128i *)(planes[0] + i0),
					 _mm_packus_epi16(_mm_srli_epi16(w0, 8), _mm_srli_epi16(w1, 8)));
			_mm_storeu_si128((__m128i *)(planes[1] + i0),
					 _mm_packus_epi16(_mm_and_si128(w0, m_ff), _mm_and_si128(w1, m_ff)));
		}
	}
#endif
	for (unsigned k = 0; k < w; k++) {
		uint8_t *dst = planes[k];
		const uint8_t *src = in + (w - 1 - k);
		for (size_t i = i0; i < nelem; i++)
			dst[i] = src[i * w];
	}
}

/* part[k][b] += occurrences of b among bytes[j], j = k mod 4, of
 * bytes[0..n). Four partial counts, so that a run of one value (an
 * exponent plane has a few) does not chain every increment through one
 * counter's store and load. */
static void histogram_add4(uint32_t part[4][256], const uint8_t *bytes, size_t n)
{
	size_t j = 0;
	for (; j + 4 <= n; j += 4) {
		part[0][bytes[j]]++;
		part[1][bytes[j + 1]]++;
		part[2][bytes[j + 2]]++;
		part[3][bytes[j + 3]]++;
	}
	for (; j < n; j++)
		part[0][bytes[j]]++;
}

/* hist[b] += the four partial counts of b; they restart at 0. */
static void histogram_flush(uint64_t hist[256], uint32_t part[4][256])
{
	for (int b = 0; b < 256; b++)
		hist[b] += (uint64_t)part[0][b] + part[1][b] + part[2][b] + part[3][b];
	memset(part, 0, 4 * 256 * sizeof part[0][0]);
}

/* Shuffle merges: plane k is byte w-1-k, so interleaving the planes in
 * reverse order rebuilds little-endian elements. */
static void merge_shuffle2(const uint8_t *const pl[], size_t n, uint8_t *out)
{
	size_t i = 0;
#if defined(__SSE2__)
	for (; i + 16 <= n; i += 16) {
		__m128i hi = _mm_loadu_si128((const __m128i *)(pl[0] + i));
		__m128i lo = _mm_loadu_si128((const __m128i *)(pl[1] + i));
		_mm_storeu_si128((__m128i *)(out + 2 * i), _mm_unpacklo_epi8(lo, hi));
		_mm_storeu_si128((__m128i *)(out + 2 * i + 16), _mm_unpackhi_epi8(lo, hi));
	}
#endif
	for (; i < n; i++) {
		out[2 * i] = pl[1][i];
		out[2 * i + 1] = pl[0][i];
	}
}

static void merge_shuffle4(const uint8_t *const pl[], size_t n, uint8_t *out)
{
	size_t i = 0;
#if defined(__SSE2__)
	for (; i + 16 <= n; i += 16) {
		__m128i b3 = _mm_loadu_si128((const __m128i *)(pl[0] + i));
		__m128i b2 = _mm_loadu_si128((const __m128i *)(pl[1] + i));
		__m128i b1 = _mm_loadu_si128((const __m128i *)(pl[2] + i));
		__m128i b0 = _mm_loadu_si128((const __m128i *)(pl[3] + i));
		__m128i l_l = _mm_unpacklo_epi8(b0, b1), l_h = _mm_unpackhi_epi8(b0, b1);
		__m128i h_l = _mm_unpacklo_epi8(b2, b3), h_h = _mm_unpackhi_epi8(b2, b3);
		uint8_t *o = out + 4 * i;
		_mm_storeu_si128((__m128i *)(o + 0), _mm_unpacklo_epi16(l_l, h_l));
		_mm_storeu_si128((__m128i *)(o + 16), _mm_unpackhi_epi16(l_l, h_l));
		_mm_storeu_si128((__m128i *)(o + 32), _mm_unpacklo_epi16(l_h, h_h));
		_mm_storeu_si128((__m128i *)(o + 48), _mm_unpackhi_epi16(l_h, h_h));
	}
#endif
	for (; i < n; i++)
		for (unsigned k = 0; k < 4; k++)
			out[4 * i + 3 - k] = pl[k][i];
}

static void merge_shuffle8(const uint8_t *const pl[], size_t n, uint8_t *out)
{
	for (size_t i = 0; i < n; i++)
		for (unsigned k = 0; k < 8; k++)
			out[8 * i + 7 - k] = pl[k][i];
}

void wc_planes_merge(wc_layout l, const uint8_t *const planes[], size_t nelem, uint8_t *out)
{
	switch (l.kind) {
	case WC_LAYOUT_BF16:
		merge_bf16(planes[0], planes[1], nelem, out);
		return;
	case WC_LAYOUT_F32:
		merge_f32(planes, nelem, out);
		return;
	default:
		break;
	}
	switch (l.elem_size) {
	case 2: merge_shuffle2(planes, nelem, out); return;
	case 4: merge_shuffle4(planes, nelem, out); return;
	case 8: merge_shuffle8(planes, nelem, out); return;
	default: memmove(out, planes[0], nelem); return;
	}
}

/* Split a block at a time into a small stack buffer and count: one pass over
 * the input, no allocation, layouts handled by wc_planes_split itself. */
void wc_planes_histogram(wc_layout l, const uint8_t *in, size_t nelem, uint64_t hist[][256])
{
	enum { BLOCK = 1024 };
	/* Elements between flushes of the 32-bit partial counts: each of the
	 * four counts at most a quarter of them, far below 2^32. */
	const size_t flush_every = (size_t)1 << 30;
	uint8_t buf[WC_MAX_PLANES][BLOCK];
	uint8_t *planes[WC_MAX_PLANES];
	uint32_t part[WC_MAX_PLANES][4][256];
	unsigned np = l.nplanes <= WC_MAX_PLANES ? l.nplanes : WC_MAX_PLANES;
	for (unsigned p = 0; p < WC_MAX_PLANES; p++)
		planes[p] = buf[p];
	memset(part, 0, sizeof part);
	size_t since = 0;
	for (size_t i = 0; i < nelem; i += BLOCK) {
		size_t m = nelem - i < BLOCK ? nelem - i : BLOCK;
		wc_planes_split(l, in + i * l.elem_size, m, planes);
		for (unsigned p = 0; p < np; p++)
			histogram_add4(part[p], buf[p], m);
		if ((since += m) >= flush_every) {
			for (unsigned p = 0; p < np; p++)
				histogram_flush(hist[p], part[p]);
			since = 0;
		}
	}
	for (unsigned p = 0; p < np; p++)
		histogram_flush(hist[p], part[p]);
}
