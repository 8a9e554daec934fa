/* wcc_copy.c - host copies of the batch pipeline (wcc_impl.h). */
#include <string.h>
#include <xxhash.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "core/hash.h"
#include "wcc_impl.h"

/* Copy with non-temporal 16-byte stores: the destination is not read back
 * soon, and skipping its read-for-ownership saves a third of the memory
 * traffic of a plain memcpy. */
void wcc_stream_copy(uint8_t *d, const uint8_t *s, size_t n)
{
#ifdef __SSE2__
	size_t head = (16u - ((uintptr_t)d & 15u)) & 15u;
	if (head > n)
		head = n;
	memcpy(d, s, head);
	d += head;
	s += head;
	n -= head;
	for (; n >= 64; n -= 64, d += 64, s += 64) {
		__m128i a = _mm_loadu_si128((const __m128i *)s), b = _mm_loadu_si128((const __m128i *)(s + 16)),
			c = _mm_loadu_si128((const __m128i *)(s + 32)), e = _mm_loadu_si128((const __m128i *)(s + 48));
		_mm_stream_si128((__m128i *)d, a);
		_mm_stream_si128((__m128i *)(d + 16), b);
		_mm_stream_si128((__m128i *)(d + 32), c);
		_mm_stream_si128((__m128i *)(d + 48), e);
	}
	memcpy(d, s, n);
	_mm_sfence();
#else
	memcpy(d, s, n);
#endif
}

/* XXH3-64 of src[0..n) while copying it to dst, block by block so each
 * block is read from memory once (hashed, then copied from L1). */
uint64_t wcc_copy_and_hash(uint8_t *dst, const uint8_t *src, size_t n)
{
	enum { BLOCK = 16384 };
	XXH3_state_t *st = XXH3_createState();
	if (!st || XXH3_64bits_reset(st) != XXH_OK) {
		XXH3_freeState(st);
		memcpy(dst, src, n);
		return wc_xxh3_64(dst, n);
	}
	for (size_t o = 0; o < n; o += BLOCK) {
		size_t k = n - o < BLOCK ? n - o : BLOCK;
		XXH3_64bits_update(st, src + o, k);
		wcc_stream_copy(dst + o, src + o, k);
	}
	uint64_t h = XXH3_64bits_digest(st);
	XXH3_freeState(st);
	return h;
}

