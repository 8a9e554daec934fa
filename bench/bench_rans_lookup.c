/*
 * bench_rans_lookup.c - does an in-register symbol look-up beat the gather
 * in the AVX-512 rANS round? A measurement kept for the record
 * (docs/BENCHMARKS.md): the answer on Zen 4 was no.
 *
 * The decoder finds each lane's symbol with one AVX-512 gather of 16
 * entries from the 4096-entry decode table (src/codec/rans_decode_avx512.c).
 * A table of at most 32 symbols (every BF16 exponent plane of the sample
 * models) can instead be searched in registers, with no change to the
 * stream: the symbol is the last one whose cumulative frequency is <= the
 * slot, found by a branch-free binary search over the 32 cumulative
 * frequencies held in two vectors (VPERMT2D), then the packed frequency and
 * cumulative frequency and the symbol are two more VPERMT2D.
 *
 * Input: 4 Mi exponent bytes of N(0, 0.02) weights rounded to BF16 (the
 * tail below exponent 100 folded into it, so at most 32 symbols), coded by
 * wc_rans_encode in chunks of 65536 symbols. Output: G symbols/s of thread
 * CPU time for wc_rans_decode (the gather path) and for the search path
 * (two chunks interleaved, as wc_rans_rounds2_avx512 does), and whether
 * both decoded the same bytes (the program fails if not).
 *
 *   bench/bench_rans_lookup [-r runs]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codec/codec_internal.h"
#include "codec/rans.h"
#include "exponent_input.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* The dense tables of a <= 32-symbol frequency table: cum (4096 past the
 * last symbol, so the search never goes there), freq << 12 | cum, symbol. */
typedef struct {
	uint32_t cum[32], fc[32], sym[32];
	uint32_t nsym;
} small_tab;

static int small_tab_build(const wc_freqtab *ft, small_tab *t)
{
	uint32_t k = 0, cum = 0;
	for (uint32_t s = 0; s < 256; s++) {
		if (!ft->freq[s])
			continue;
		if (k == 32)
			return -1;
		t->cum[k] = cum;
		t->fc[k] = (uint32_t)ft->freq[s] << 12 | cum;
		t->sym[k] = s;
		cum += ft->freq[s];
		k++;
	}
	t->nsym = k;
	for (; k < 32; k++) {
		t->cum[k] = WC_RANS_PROB_SCALE;
		t->fc[k] = 1u << 12;
		t->sym[k] = 0;
	}
	return 0;
}

typedef struct {
	__m512i clo, chi, fclo, fchi, slo, shi;
	uint32_t c16;
} small_vec;

/* One step of 16 lanes, as step16 in rans_decode_avx512.c but for the
 * look-up. */
__attribute__((target("avx512f,popcnt"))) static inline __m512i
search_step16(__m512i x, const small_vec *t, const uint8_t *w, size_t *p, __m512i *sym)
{
	const __m512i lo12 = _mm512_set1_epi32(WC_RANS_PROB_SCALE - 1);
	__m512i slot = _mm512_and_si512(x, lo12);
	__mmask16 m0 = _mm512_cmple_epu32_mask(_mm512_set1_epi32((int)t->c16), slot);
	__m512i i = _mm512_maskz_mov_epi32(m0, _mm512_set1_epi32(16));
	for (int step = 8; step >= 1; step >>= 1) {
		__m512i j = _mm512_add_epi32(i, _mm512_set1_epi32(step));
		__m512i cand = _mm512_permutex2var_epi32(t->clo, j, t->chi);
		i = _mm512_mask_mov_epi32(i, _mm512_cmple_epu32_mask(cand, slot), j);
	}
	__m512i e = _mm512_permutex2var_epi32(t->fclo, i, t->fchi);
	*sym = _mm512_permutex2var_epi32(t->slo, i, t->shi);
	x = _mm512_add_epi32(_mm512_mullo_epi32(_mm512_srli_epi32(e, 12), _mm512_srli_epi32(x, WC_RANS_PROB_BITS)),
			     _mm512_sub_epi32(slot, _mm512_and_si512(e, lo12)));
	__mmask16 need = _mm512_cmplt_epu32_mask(x, _mm512_set1_epi32(WC_RANS_STATE_LOW));
	__m512i words = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(w + 2 * *p)));
	*p += (size_t)__builtin_popcount((unsigned)need);
	return _mm512_mask_or_epi32(x, need, _mm512_slli_epi32(x, 16), _mm512_maskz_expand_epi32(need, words));
}

/* Two chunks' full rounds together while each has 32 words left. */
__attribute__((target("avx512f,popcnt"))) static void search_rounds2(wc_rans_lanes *a, wc_rans_lanes *b,
								       const small_tab *st, size_t rend)
{
	small_vec t = {
		.clo = _mm512_loadu_si512(st->cum), .chi = _mm512_loadu_si512(st->cum + 16),
		.fclo = _mm512_loadu_si512(st->fc), .fchi = _mm512_loadu_si512(st->fc + 16),
		.slo = _mm512_loadu_si512(st->sym), .shi = _mm512_loadu_si512(st->sym + 16),
		.c16 = st->cum[16],
	};
	__m512i a0 = _mm512_loadu_si512(a->x), a1 = _mm512_loadu_si512(a->x + 16);
	__m512i b0 = _mm512_loadu_si512(b->x), b1 = _mm512_loadu_si512(b->x + 16);
	size_t pa = a->p, pb = b->p, r = a->r;
	for (; r < rend && a->nw - pa >= WC_RANS_LANES && b->nw - pb >= WC_RANS_LANES; r++) {
		__m512i sa0, sa1, sb0, sb1;
		a0 = search_step16(a0, &t, a->w, &pa, &sa0);
		b0 = search_step16(b0, &t, b->w, &pb, &sb0);
		a1 = search_step16(a1, &t, a->w, &pa, &sa1);
		b1 = search_step16(b1, &t, b->w, &pb, &sb1);
		uint8_t *oa = a->out + (r - a->rbase) * WC_RANS_LANES;
		uint8_t *ob = b->out + (r - b->rbase) * WC_RANS_LANES;
		_mm_storeu_si128((__m128i *)oa, _mm512_cvtepi32_epi8(sa0));
		_mm_storeu_si128((__m128i *)(oa + 16), _mm512_cvtepi32_epi8(sa1));
		_mm_storeu_si128((__m128i *)ob, _mm512_cvtepi32_epi8(sb0));
		_mm_storeu_si128((__m128i *)(ob + 16), _mm512_cvtepi32_epi8(sb1));
	}
	_mm512_storeu_si512(a->x, a0);
	_mm512_storeu_si512(a->x + 16, a1);
	_mm512_storeu_si512(b->x, b0);
	_mm512_storeu_si512(b->x + 16, b1);
	a->p = pa;
	b->p = pb;
	a->r = b->r = r;
}

/* Decode a whole body with the search path (the tail of each chunk pair,
 * and an odd last chunk, through the ordinary checked decoder). */
static int search_decode(const uint8_t *in, size_t len, size_t n, uint32_t cs, const small_tab *st,
			 const wc_rans_dtab *dt, uint8_t *out)
{
	wc_rans_body body;
	if (wc_rans_body_parse(in, len, n, cs, &body) != WC_OK)
		return -1;
	for (size_t k = 0; k < body.nchunks; k += 2) {
		wc_rans_lanes a, b;
		size_t two = k + 1 < body.nchunks;
		if (wc_rans_lanes_init(&a, &body, k, cs, n) != WC_OK ||
		    (two && wc_rans_lanes_init(&b, &body, k + 1, cs, n) != WC_OK))
			return -1;
		a.out = out + k * cs;
		a.rbase = 0;
		size_t ra = (a.m + WC_RANS_LANES - 1) / WC_RANS_LANES, fa = a.m / WC_RANS_LANES;
		if (two) {
			b.out = out + (k + 1) * cs;
			b.rbase = 0;
			size_t rb = (b.m + WC_RANS_LANES - 1) / WC_RANS_LANES, fb = b.m / WC_RANS_LANES;
			search_rounds2(&a, &b, st, fa < fb ? fa : fb); /* full rounds only */
			if (wc_rans_lanes_decode(&b, dt, rb) != WC_OK || wc_rans_lanes_end(&b) != WC_OK)
				return -1;
		}
		if (wc_rans_lanes_decode(&a, dt, ra) != WC_OK || wc_rans_lanes_end(&a) != WC_OK)
			return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	int runs = 7, o;
	while ((o = getopt(argc, argv, "r:")) != -1) {
		if (o != 'r' || (runs = atoi(optarg)) < 1) {
			fprintf(stderr, "usage: bench_rans_lookup [-r runs]\n");
			return 2;
		}
	}
	__builtin_cpu_init();
	if (!__builtin_cpu_supports("avx512f")) {
		printf("bench_rans_lookup: this CPU has no AVX-512F; nothing to compare\n");
		return 0;
	}
	const size_t n = (size_t)1 << 22;
	const uint32_t cs = 65536;
	uint8_t *sym = malloc(n), *out = malloc(n), *out2 = malloc(n);
	size_t cap = wc_rans_bound(n, cs), len = 0;
	uint8_t *enc = malloc(cap);
	wc_rans_dtab *dt = malloc(sizeof *dt);
	if (!sym || !out || !out2 || !enc || !dt) {
		fprintf(stderr, "bench_rans_lookup: out of memory\n");
		return 1;
	}
	uint64_t hist[256];
	bench_exponent_bytes(sym, n, hist);
	wc_freqtab ft;
	small_tab st;
	if (wc_freq_normalize(hist, &ft) != WC_OK || small_tab_build(&ft, &st) != 0 ||
	    wc_rans_encode(sym, n, &ft, cs, enc, cap, &len) != WC_OK) {
		fprintf(stderr, "bench_rans_lookup: cannot build the input: %s\n", wc_last_detail());
		return 1;
	}
	wc_rans_dtab_build(&ft, dt);
	printf("%zu symbols, %u distinct, %.3f bits each, %zu coded bytes\n", n, st.nsym,
	       wc_entropy_bits(hist), len);
	for (int r = 0; r < runs; r++) {
		double t0 = bench_cpu_now();
		wc_err e1 = wc_rans_decode(enc, len, dt, cs, out, n);
		double t1 = bench_cpu_now();
		int e2 = search_decode(enc, len, n, cs, &st, dt, out2);
		double t2 = bench_cpu_now();
		if (e1 != WC_OK || e2 != 0 || memcmp(out, sym, n) || memcmp(out2, sym, n)) {
			fprintf(stderr, "bench_rans_lookup: a decode differs from the input\n");
			return 1;
		}
		printf("gather %.3f G symbols/s, register search %.3f G symbols/s\n", n / (t1 - t0) / 1e9,
		       n / (t2 - t1) / 1e9);
	}
	free(sym), free(out), free(out2), free(enc), free(dt);
	return 0;
}
#else
int main(void)
{
	printf("bench_rans_lookup: x86-64 only; nothing to compare\n");
	return 0;
}
#endif
