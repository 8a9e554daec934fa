/* qvq_gather_avx512.c - the 2x2 RGB codebook gather (qvq_decode.c) sixteen
 * patches at a time with AVX-512 VBMI byte permutes. Each patch's 12-byte
 * codebook entry (row 0: bytes 0..5, row 1: bytes 6..11) is loaded with one
 * 16-byte load; four of them fill a 512-bit register, and VPERMT2B picks
 * the 96 bytes each of the two image rows gets out of the four registers,
 * which are stored as one 64-byte and one 32-byte store: four stores per
 * 16 patches, against the scalar gather's 32 of 8 bytes (about one in ten
 * of those split across cache lines). qvq_bench (crops.qvq, K=4096, 224x224,
 * one Zen 4 core, three alternating rounds), gather alone: 94-99k -> 101-111k
 * images/s into a buffer in cache or a ring of 8 MiB, 60-62k -> 61-68k into
 * a ring of 64 MiB (the stores then wait for memory); the whole decode
 * 43-44.7k -> 46.1-46.8k. On random indices into a buffer in cache: 12.5 ->
 * 7.8 us per image (docs/BENCHMARKS.md, "Image archives").
 *
 * Built for any x86-64 (target attributes); qvq_decode.c calls it only
 * when the CPU has AVX-512 F, BW, VL and VBMI (wc_cpu_features). */
#include "qvq/qvq_gather.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <string.h>

/* Byte selector of image row 0. An entry sits at byte 16*j of the 128
 * bytes of two registers (j = 0..7); image byte i (0..47) of a row of eight
 * patches is byte i % 6 of patch i / 6's row: row 0 at offset 0, row 1 at
 * 6 (this table plus 6). Bytes 48..63 of the results are filled by the
 * join below (any value here). */
static const uint8_t row0_sel[64] __attribute__((aligned(64))) = {
	  0,   1,   2,   3,   4,   5,  16,  17,  18,  19,  20,  21,  32,  33,  34,  35,
	 36,  37,  48,  49,  50,  51,  52,  53,  64,  65,  66,  67,  68,  69,  80,  81,
	 82,  83,  84,  85,  96,  97,  98,  99, 100, 101, 112, 113, 114, 115, 116, 117,
	112, 112, 112, 112, 112, 112, 112, 112, 112, 112, 112, 112, 112, 112, 112, 112,
};
/* Two 48-byte halves (patches 0..7 in X, 8..15 in Y) joined: the first 64
 * bytes are X[0..47] and Y[0..15], the last 32 are Y[16..47]. */
static const uint8_t join_lo[64] __attribute__((aligned(64))) = {
	  0,   1,   2,   3,   4,   5,   6,   7,   8,   9,  10,  11,  12,  13,  14,  15,
	 16,  17,  18,  19,  20,  21,  22,  23,  24,  25,  26,  27,  28,  29,  30,  31,
	 32,  33,  34,  35,  36,  37,  38,  39,  40,  41,  42,  43,  44,  45,  46,  47,
	 64,  65,  66,  67,  68,  69,  70,  71,  72,  73,  74,  75,  76,  77,  78,  79,
};
static const uint8_t join_hi[64] __attribute__((aligned(64))) = {
	 16,  17,  18,  19,  20,  21,  22,  23,  24,  25,  26,  27,  28,  29,  30,  31,
	 32,  33,  34,  35,  36,  37,  38,  39,  40,  41,  42,  43,  44,  45,  46,  47,
	  0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,
	  0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,
};

#define WC_AVX512_VBMI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi")))

/* The 16 bytes at patch g's codebook entry: its 12, then 4 past it (the
 * caller keeps the codebook's last entry out of this path). */
WC_AVX512_VBMI static inline __m128i entry16(const uint8_t *cb, const uint8_t *row, uint32_t ib, size_t g)
{
	return _mm_loadu_si128((const __m128i *)(const void *)(cb + (size_t)wc_qvq_index_at(row, ib, g) * 12));
}

/* Four entries (patches g..g+3) in one register, 16 bytes each. */
WC_AVX512_VBMI static inline __m512i four_entries(const uint8_t *cb, const uint8_t *row, uint32_t ib,
						   size_t g)
{
	__m512i z = _mm512_castsi128_si512(entry16(cb, row, ib, g));
	z = _mm512_inserti32x4(z, entry16(cb, row, ib, g + 1), 1);
	z = _mm512_inserti32x4(z, entry16(cb, row, ib, g + 2), 2);
	return _mm512_inserti32x4(z, entry16(cb, row, ib, g + 3), 3);
}

/* Does any of the 16 indices from g on name entry `last`? */
WC_AVX512_VBMI static inline int names_entry(const uint8_t *row, uint32_t ib, size_t g, uint32_t last)
{
	if (ib == 1)
		return _mm_cmpeq_epi8_mask(_mm_loadu_si128((const __m128i *)(const void *)(row + g)),
					   _mm_set1_epi8((char)last)) != 0;
	return _mm256_cmpeq_epi16_mask(_mm256_loadu_si256((const __m256i *)(const void *)(row + 2 * g)),
				       _mm256_set1_epi16((short)last)) != 0;
}

WC_AVX512_VBMI size_t wc_qvq_gather_pairs_avx512(const uint8_t *cb, uint32_t entries, const uint8_t *row,
						 uint32_t ib, size_t full, uint8_t *r0, uint8_t *r1)
{
	const __m512i sel0 = _mm512_load_si512((const void *)row0_sel);
	const __m512i sel1 = _mm512_add_epi8(sel0, _mm512_set1_epi8(6));
	const __m512i lo = _mm512_load_si512((const void *)join_lo);
	const __m512i hi = _mm512_load_si512((const void *)join_hi);
	size_t g = 0;
	for (; g + 16 <= full; g += 16) {
		uint8_t *o0 = r0 + 6 * g, *o1 = r1 + 6 * g;
		if (names_entry(row, ib, g, entries - 1)) {
			/* the last entry's 16-byte load would leave the codebook */
			for (size_t j = g; j < g + 16; j++) {
				const uint8_t *p = cb + (size_t)wc_qvq_index_at(row, ib, j) * 12;
				memcpy(r0 + 6 * j, p, 6);
				memcpy(r1 + 6 * j, p + 6, 6);
			}
			continue;
		}
		__m512i e0 = four_entries(cb, row, ib, g), e1 = four_entries(cb, row, ib, g + 4);
		__m512i e2 = four_entries(cb, row, ib, g + 8), e3 = four_entries(cb, row, ib, g + 12);
		__m512i x0 = _mm512_permutex2var_epi8(e0, sel0, e1), y0 = _mm512_permutex2var_epi8(e2, sel0, e3);
		__m512i x1 = _mm512_permutex2var_epi8(e0, sel1, e1), y1 = _mm512_permutex2var_epi8(e2, sel1, e3);
		_mm512_storeu_si512((void *)o0, _mm512_permutex2var_epi8(x0, lo, y0));
		_mm256_storeu_si256((__m256i *)(void *)(o0 + 64), _mm512_castsi512_si256(_mm512_permutexvar_epi8(hi, y0)));
		_mm512_storeu_si512((void *)o1, _mm512_permutex2var_epi8(x1, lo, y1));
		_mm256_storeu_si256((__m256i *)(void *)(o1 + 64), _mm512_castsi512_si256(_mm512_permutexvar_epi8(hi, y1)));
	}
	return g;
}

#else

size_t wc_qvq_gather_pairs_avx512(const uint8_t *cb, uint32_t entries, const uint8_t *row, uint32_t ib,
				  size_t full, uint8_t *r0, uint8_t *r1)
{
	(void)cb, (void)entries, (void)row, (void)ib, (void)full, (void)r0, (void)r1;
	return 0;
}

#endif
