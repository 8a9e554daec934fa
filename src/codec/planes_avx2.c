/* planes_avx2.c - the BF16 and F32 plane merges with AVX2: 16 (BF16) or 8
 * (F32) elements per 256-bit vector, each plane byte widened to the
 * element's width on load and shifted into place, so a step is about half
 * the instructions of the SSE2 merges (which interleave first and then
 * mask). Built for any x86-64 (target attribute); planes.c
 * calls it only when the CPU has AVX2. */
#include "codec/codec_internal.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

__attribute__((target("avx2"))) size_t wc_merge_bf16_avx2(const uint8_t *p0, const uint8_t *p1,
							    size_t n, uint8_t *out)
{
	/* BF16 bits: sign 15, exponent 14..7, mantissa 6..0; plane 0 is the
	 * exponent byte, plane 1 sign (bit 7) and mantissa (docs/FORMAT.md 2). */
	const __m256i m_mant = _mm256_set1_epi16(0x007f), m_sign = _mm256_set1_epi16((short)0x8000);
	size_t i = 0;
	for (; i + 32 <= n; i += 32) {
		for (size_t h = 0; h < 32; h += 16) {
			__m256i e = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(p0 + i + h)));
			__m256i s = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(p1 + i + h)));
			__m256i v = _mm256_or_si256(_mm256_slli_epi16(e, 7),
						    _mm256_or_si256(_mm256_and_si256(s, m_mant),
								    _mm256_and_si256(_mm256_slli_epi16(s, 8), m_sign)));
			_mm256_storeu_si256((__m256i *)(out + 2 * (i + h)), v);
		}
	}
	return i;
}

__attribute__((target("avx2"))) size_t wc_merge_f32_avx2(const uint8_t *const pl[], size_t n,
							   uint8_t *out)
{
	/* F32 bits: sign 31, exponent 30..23, mantissa 22..0; plane 0 is the
	 * exponent byte, planes 1-3 the mantissa's low, middle and high
	 * bytes with the sign in plane 3's bit 7 (docs/FORMAT.md 2). */
	const uint8_t *p0 = pl[0], *p1 = pl[1], *p2 = pl[2], *p3 = pl[3];
	const __m256i m_mant = _mm256_set1_epi32(0x7f), m_sign = _mm256_set1_epi32(0x80);
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p0 + i)));
		__m256i b1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p1 + i)));
		__m256i b2 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p2 + i)));
		__m256i b3 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p3 + i)));
		__m256i hi = _mm256_or_si256(_mm256_slli_epi32(e, 23),
					     _mm256_slli_epi32(_mm256_and_si256(b3, m_sign), 24));
		__m256i lo = _mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(b3, m_mant), 16),
					     _mm256_or_si256(_mm256_slli_epi32(b2, 8), b1));
		_mm256_storeu_si256((__m256i *)(out + 4 * i), _mm256_or_si256(hi, lo));
	}
	return i;
}
#else
size_t wc_merge_bf16_avx2(const uint8_t *p0, const uint8_t *p1, size_t n, uint8_t *out)
{
	(void)p0, (void)p1, (void)n, (void)out;
	return 0;
}

size_t wc_merge_f32_avx2(const uint8_t *const pl[], size_t n, uint8_t *out)
{
	(void)pl, (void)n, (void)out;
	return 0;
}
#endif
