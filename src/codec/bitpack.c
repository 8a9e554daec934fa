/* bitpack.c - PACK plane bodies (docs/FORMAT.md section 3): symbols of b
 * bits (b = 1, 2 or 4), 8/b to a byte, the first in the lowest bits. */
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "codec/codec_internal.h"

unsigned wc_pack_bits_for(const uint8_t *sym, size_t n)
{
	uint8_t m = 0;
	for (size_t i = 0; i < n; i++)
		m |= sym[i];
	return m < 2 ? 1 : m < 4 ? 2 : m < 16 ? 4 : 0;
}

void wc_pack_bits(const uint8_t *sym, size_t n, unsigned b, uint8_t *out)
{
	const unsigned per = 8 / b;
	memset(out, 0, wc_pack_bytes(n, b));
	for (size_t i = 0; i < n; i++)
		out[i / per] |= (uint8_t)(sym[i] << (i % per * b));
}

void wc_unpack_bits(const uint8_t *in, unsigned b, size_t n, uint8_t *out)
{
	size_t i = 0;
	if (b == 4) {
#if defined(__SSE2__)
		/* 16 bytes in, 32 symbols out: low nibbles and high nibbles
		 * interleaved back in order (the 4-bit planes of 12-bit qvq
		 * indices: about 0.3 us an image against rANS's 10) */
		const __m128i lo4 = _mm_set1_epi8(0x0f);
		for (; i + 32 <= n; i += 32) {
			__m128i x = _mm_loadu_si128((const __m128i *)(const void *)(in + i / 2));
			__m128i lo = _mm_and_si128(x, lo4), hi = _mm_and_si128(_mm_srli_epi16(x, 4), lo4);
			_mm_storeu_si128((__m128i *)(void *)(out + i), _mm_unpacklo_epi8(lo, hi));
			_mm_storeu_si128((__m128i *)(void *)(out + i + 16), _mm_unpackhi_epi8(lo, hi));
		}
#endif
		for (; i + 2 <= n; i += 2) {
			out[i] = in[i / 2] & 15;
			out[i + 1] = in[i / 2] >> 4;
		}
	}
	const unsigned per = 8 / b, mask = (1u << b) - 1;
	for (; i < n; i++)
		out[i] = (uint8_t)(in[i / per] >> (i % per * b) & mask);
}
