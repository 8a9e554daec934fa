/* rans_decode_avx2.c - the rANS round loop with AVX2: 32 lanes as four
 * vectors of 8 states. A gather reads the decoding table, and a 256-entry
 * rank table spreads the renormalisation words over the lanes that need
 * them. Built for any x86-64 (target attribute, no -mavx2); rans_decode.c
 * calls it only when the CPU reports AVX2. */
#include "codec/codec_internal.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* For each 8-bit renormalisation mask, lane i's rank among the set lanes
 * (the index of the word it takes), 3 bits per lane packed in a u32. */
static uint32_t rank_tab[256];

static void __attribute__((constructor)) rank_tab_init(void)
{
	for (unsigned m = 0; m < 256; m++) {
		uint32_t v = 0, r = 0;
		for (unsigned i = 0; i < 8; i++)
			if (m >> i & 1)
				v |= (r++) << (4 * i);
		rank_tab[m] = v;
	}
}

__attribute__((target("avx2,popcnt"))) static inline __m256i
step8(__m256i x, const uint32_t *tab, const uint8_t *w, size_t *p, __m256i *sym)
{
	const __m256i lo12 = _mm256_set1_epi32(WC_RANS_PROB_SCALE - 1);
	const __m256i low = _mm256_set1_epi32(WC_RANS_STATE_LOW - 1);
	const __m256i nib_shift = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
	const __m256i seven = _mm256_set1_epi32(7);
	__m256i e = _mm256_i32gather_epi32((const int *)tab, _mm256_and_si256(x, lo12), 4);
	*sym = e;
	__m256i f = _mm256_and_si256(_mm256_srli_epi32(e, 8), lo12);
	x = _mm256_add_epi32(_mm256_mullo_epi32(f, _mm256_srli_epi32(x, WC_RANS_PROB_BITS)),
			     _mm256_srli_epi32(e, 20));
	/* x < 2^16 (unsigned): min(x, 0xffff) == x */
	__m256i need = _mm256_cmpeq_epi32(_mm256_min_epu32(x, low), x);
	unsigned m = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(need));
	__m256i words = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(w + 2 * *p)));
	__m256i rank = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)rank_tab[m]), nib_shift), seven);
	__m256i wl = _mm256_permutevar8x32_epi32(words, rank);
	__m256i xn = _mm256_or_si256(_mm256_slli_epi32(x, 16), wl);
	*p += (size_t)__builtin_popcount(m);
	return _mm256_blendv_epi8(x, xn, need);
}

/* Symbols are byte 0 of the table entries: pack four vectors of entries
 * into 32 bytes in lane order. */
__attribute__((target("avx2"))) static inline void store_syms(uint8_t *o, __m256i s0, __m256i s1,
							       __m256i s2, __m256i s3)
{
	const __m256i byte = _mm256_set1_epi32(0xff);
	const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
	__m256i a = _mm256_packus_epi32(_mm256_and_si256(s0, byte), _mm256_and_si256(s1, byte));
	__m256i b = _mm256_packus_epi32(_mm256_and_si256(s2, byte), _mm256_and_si256(s3, byte));
	_mm256_storeu_si256((__m256i *)o, _mm256_permutevar8x32_epi32(_mm256_packus_epi16(a, b), order));
}

/* A round reads at most 32 words, and vector g loads 8 words at most 8g
 * words in, so 32 words left make every load of the round in bounds. */
__attribute__((target("avx2,popcnt"))) void wc_rans_rounds_avx2(wc_rans_lanes *c, const uint32_t *tab,
								 size_t rend)
{
	__m256i x0 = _mm256_loadu_si256((const __m256i *)(c->x + 0));
	__m256i x1 = _mm256_loadu_si256((const __m256i *)(c->x + 8));
	__m256i x2 = _mm256_loadu_si256((const __m256i *)(c->x + 16));
	__m256i x3 = _mm256_loadu_si256((const __m256i *)(c->x + 24));
	size_t p = c->p, r = c->r;
	for (; r < rend && c->nw - p >= WC_RANS_LANES; r++) {
		__m256i s0, s1, s2, s3;
		x0 = step8(x0, tab, c->w, &p, &s0);
		x1 = step8(x1, tab, c->w, &p, &s1);
		x2 = step8(x2, tab, c->w, &p, &s2);
		x3 = step8(x3, tab, c->w, &p, &s3);
		store_syms(c->out + (r - c->rbase) * WC_RANS_LANES, s0, s1, s2, s3);
	}
	_mm256_storeu_si256((__m256i *)(c->x + 0), x0);
	_mm256_storeu_si256((__m256i *)(c->x + 8), x1);
	_mm256_storeu_si256((__m256i *)(c->x + 16), x2);
	_mm256_storeu_si256((__m256i *)(c->x + 24), x3);
	c->p = p;
	c->r = r;
}

#else
void wc_rans_rounds_avx2(wc_rans_lanes *c, const uint32_t *tab, size_t rend)
{
	(void)c, (void)tab, (void)rend;
}
#endif
