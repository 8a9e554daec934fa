/* rans_decode_avx2.c - the rANS round loop with AVX2: 32 lanes as four
 * vectors of 8 states. Built for any x86-64 (target attribute, no -mavx2);
 * rans_decode.c calls it only when the CPU reports AVX2. */
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

#define LOADX(c, v) \
	__m256i v##0 = _mm256_loadu_si256((const __m256i *)((c)->x + 0)), \
		v##1 = _mm256_loadu_si256((const __m256i *)((c)->x + 8)), \
		v##2 = _mm256_loadu_si256((const __m256i *)((c)->x + 16)), \
		v##3 = _mm256_loadu_si256((const __m256i *)((c)->x + 24))
#define STOREX(c, v)                                                   \
	do {                                                           \
		_mm256_storeu_si256((__m256i *)((c)->x + 0), v##0);    \
		_mm256_storeu_si256((__m256i *)((c)->x + 8), v##1);    \
		_mm256_storeu_si256((__m256i *)((c)->x + 16), v##2);   \
		_mm256_storeu_si256((__m256i *)((c)->x + 24), v##3);   \
	} while (0)
/* A round reads at most 32 words, and vector g loads 8 words at most 8g
 * words in, so 32 words left make every load of the round in bounds. */
#define CAN_ROUND(c, r, full, p) ((r) < (full) && (c)->nw - (p) >= WC_RANS_LANES)
#define ROUND(c, v, r, p)                                                            \
	do {                                                                         \
		__m256i s0, s1, s2, s3;                                              \
		v##0 = step8(v##0, tab, (c)->w, &(p), &s0);                          \
		v##1 = step8(v##1, tab, (c)->w, &(p), &s1);                          \
		v##2 = step8(v##2, tab, (c)->w, &(p), &s2);                          \
		v##3 = step8(v##3, tab, (c)->w, &(p), &s3);                          \
		store_syms((c)->out + (r) * WC_RANS_LANES, s0, s1, s2, s3);          \
		(r)++;                                                               \
	} while (0)

__attribute__((target("avx2,popcnt"))) void wc_rans_rounds_avx2(wc_rans_lanes *c, const uint32_t *tab)
{
	LOADX(c, xa);
	size_t p = c->p, r = c->r, full = c->m / WC_RANS_LANES;
	while (CAN_ROUND(c, r, full, p))
		ROUND(c, xa, r, p);
	STOREX(c, xa);
	c->p = p;
	c->r = r;
}

__attribute__((target("avx2,popcnt"))) void wc_rans_rounds2_avx2(wc_rans_lanes *a, wc_rans_lanes *b,
								  const uint32_t *tab)
{
	LOADX(a, xa);
	LOADX(b, xb);
	size_t pa = a->p, ra = a->r, fa = a->m / WC_RANS_LANES;
	size_t pb = b->p, rb = b->r, fb = b->m / WC_RANS_LANES;
	while (CAN_ROUND(a, ra, fa, pa) && CAN_ROUND(b, rb, fb, pb)) {
		ROUND(a, xa, ra, pa);
		ROUND(b, xb, rb, pb);
	}
	STOREX(a, xa);
	STOREX(b, xb);
	a->p = pa;
	a->r = ra;
	b->p = pb;
	b->r = rb;
}

int wc_rans_have_avx2(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt");
}
#else
void wc_rans_rounds_avx2(wc_rans_lanes *c, const uint32_t *tab) { (void)c, (void)tab; }
void wc_rans_rounds2_avx2(wc_rans_lanes *a, wc_rans_lanes *b, const uint32_t *tab)
{
	(void)a, (void)b, (void)tab;
}

int wc_rans_have_avx2(void) { return 0; }
#endif
