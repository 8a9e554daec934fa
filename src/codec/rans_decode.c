/* rans_decode.c - decoding table and the validating chunked rANS decoder
 * (docs/FORMAT.md section 4). */
#include "codec/codec_internal.h"
#include "core/cpu.h"

void wc_rans_dtab_build(const wc_freqtab *ft, wc_rans_dtab *out)
{
	uint32_t slot = 0;
	for (uint32_t s = 0; s < 256; s++) {
		uint32_t f = ft->freq[s];
		/* Bounded by the table size even for an unvalidated table. */
		for (uint32_t i = 0; i < f && slot < WC_RANS_PROB_SCALE; i++, slot++)
			out->entry[slot] = s | (f << 8) | (i << 20);
	}
	for (; slot < WC_RANS_PROB_SCALE; slot++)
		out->entry[slot] = 0; /* freq 0: such a state can never end at 2^16 */
}

wc_err wc_rans_body_parse(const uint8_t *in, size_t in_len, size_t nsym,
			  uint32_t chunk_symbols, wc_rans_body *body)
{
	if (!wc_rans_chunk_symbols_ok(chunk_symbols))
		return wc_fail(WC_E_CORRUPT, "rANS: chunk size %u is not a multiple of 32 in [32, 2^20]",
			       chunk_symbols);
	size_t nchunks = wc_rans_nchunks(nsym, chunk_symbols);
	if (in_len / 4 < nchunks || (nchunks == 0 && in_len != 0))
		return wc_fail(WC_E_CORRUPT, "rANS: body of %zu bytes too short for %zu chunk offsets",
			       in_len, nchunks);
	size_t data_len = in_len - 4 * nchunks;
	size_t prev = 0;
	for (size_t k = 0; k < nchunks; k++) {
		size_t end = wc_ld32(in + 4 * k);
		size_t m = nsym - k * chunk_symbols < chunk_symbols ? nsym - k * chunk_symbols : chunk_symbols;
		size_t size = end - prev;
		if (end <= prev || end > data_len)
			return wc_fail(WC_E_CORRUPT, "rANS: chunk %zu end %zu out of order or past %zu bytes",
				       k, end, data_len);
		if (size % 4 || size < 4 * WC_RANS_LANES || size > 4 * WC_RANS_LANES + 2 * m + 2)
			return wc_fail(WC_E_CORRUPT, "rANS: chunk %zu has impossible size %zu for %zu symbols",
				       k, size, m);
		prev = end;
	}
	if (prev != data_len)
		return wc_fail(WC_E_CORRUPT, "rANS: chunks end at %zu, body data is %zu bytes", prev, data_len);
	body->data = in + 4 * nchunks;
	body->end_arr = in;
	body->nchunks = nchunks;
	return WC_OK;
}

/* One decode step of one lane with a bounds-checked word read; returns -1
 * when the lane needs a word beyond nw. */
static inline int step_checked(uint32_t *x, const wc_rans_dtab *dt, const uint8_t *w,
			       size_t *p, size_t nw, uint8_t *out)
{
	uint32_t v = *x;
	uint32_t e = dt->entry[v & (WC_RANS_PROB_SCALE - 1)];
	*out = (uint8_t)e;
	v = ((e >> 8) & 0xfff) * (v >> WC_RANS_PROB_BITS) + (e >> 20);
	if (v < WC_RANS_STATE_LOW) {
		if (*p >= nw)
			return -1;
		v = (v << 16) | wc_ld16(w + 2 * *p);
		++*p;
	}
	*x = v;
	return 0;
}

/*
 * The fast path decodes a whole round without bounds checks while at least
 * 32 words remain (a round reads at most one word per lane): each lane reads
 * the next word unconditionally, then keeps it and advances the cursor only
 * if its state fell below 2^16.
 */
#if defined(__x86_64__) && defined(__GNUC__)
/* if (v < 2^16) { v = n; p++; } as cmp + cmov + adc: as plain C the
 * compiler emits a branch, which mispredicts on about every other symbol
 * (the scalar loop ran at a third of this speed). */
#define RENORM(v, n, p)                                                       \
	__asm__("cmpl $0x10000, %0\n\tcmovbl %2, %0\n\tadcq $0, %1"            \
		: "+r"(v), "+r"(p)                                            \
		: "r"(n)                                                      \
		: "cc")
#else
#define RENORM(v, n, p)                                                       \
	do {                                                                  \
		uint32_t c_ = (v) < WC_RANS_STATE_LOW;                        \
		(v) = c_ ? (n) : (v);                                         \
		(p) += c_;                                                    \
	} while (0)
#endif

#define LANE_FAST(l)                                                              \
	do {                                                                      \
		uint32_t v_ = x[l];                                               \
		uint32_t e_ = tab[v_ & (WC_RANS_PROB_SCALE - 1)];                 \
		o[l] = (uint8_t)e_;                                               \
		v_ = ((e_ >> 8) & 0xfff) * (v_ >> WC_RANS_PROB_BITS) + (e_ >> 20); \
		uint32_t n_ = (v_ << 16) | wc_ld16(w + 2 * p);                    \
		RENORM(v_, n_, p);                                                \
		x[l] = v_;                                                        \
	} while (0)

int wc_rans_isa_limit;

int wc_rans_cpu_isa(void)
{
	unsigned f = wc_cpu_features();
	if (!(f & WC_CPU_AVX2))
		return WC_RANS_ISA_SCALAR;
	return f & WC_CPU_AVX512F ? WC_RANS_ISA_AVX512 : WC_RANS_ISA_AVX2;
}

int wc_rans_isa(void)
{
	int v = wc_rans_cpu_isa(), lim = __atomic_load_n(&wc_rans_isa_limit, __ATOMIC_RELAXED);
	return lim > 0 && lim < v ? lim : v;
}

const char *wc_rans_isa_name(int isa)
{
	switch (isa) {
	case WC_RANS_ISA_AVX2: return "avx2";
	case WC_RANS_ISA_AVX512: return "avx512";
	default: return "scalar";
	}
}

wc_err wc_rans_lanes_init(wc_rans_lanes *c, const wc_rans_body *b, size_t k, uint32_t chunk_symbols,
			 size_t nsym)
{
	uint32_t s0 = wc_rans_chunk_start(b, k), s1 = wc_rans_chunk_end(b, k);
	const uint8_t *chunk = b->data + s0;
	size_t first = k * (size_t)chunk_symbols;
	for (unsigned l = 0; l < WC_RANS_LANES; l++) {
		c->x[l] = wc_ld32(chunk + 4 * l);
		if (c->x[l] < WC_RANS_STATE_LOW)
			return wc_fail(WC_E_CORRUPT, "rANS: chunk %zu lane %u initial state %#x below 2^16", k,
				       l, c->x[l]);
	}
	c->w = chunk + 4 * WC_RANS_LANES;
	c->nw = (s1 - s0 - 4 * WC_RANS_LANES) / 2; /* word slots, pad included */
	c->p = 0;
	c->m = nsym - first < chunk_symbols ? nsym - first : chunk_symbols;
	c->r = 0;
	c->out = NULL;
	c->rbase = 0;
	c->k = k;
	return WC_OK;
}

/* Scalar full rounds up to rend while 32 words remain. */
static void rounds_scalar(wc_rans_lanes *c, const uint32_t *tab, size_t rend)
{
	uint32_t *x = c->x;
	const uint8_t *w = c->w;
	size_t p = c->p, r = c->r, nw = c->nw;
	for (; r < rend && nw - p >= WC_RANS_LANES; r++) {
		uint8_t *o = c->out + (r - c->rbase) * WC_RANS_LANES;
		LANE_FAST(0);  LANE_FAST(1);  LANE_FAST(2);  LANE_FAST(3);
		LANE_FAST(4);  LANE_FAST(5);  LANE_FAST(6);  LANE_FAST(7);
		LANE_FAST(8);  LANE_FAST(9);  LANE_FAST(10); LANE_FAST(11);
		LANE_FAST(12); LANE_FAST(13); LANE_FAST(14); LANE_FAST(15);
		LANE_FAST(16); LANE_FAST(17); LANE_FAST(18); LANE_FAST(19);
		LANE_FAST(20); LANE_FAST(21); LANE_FAST(22); LANE_FAST(23);
		LANE_FAST(24); LANE_FAST(25); LANE_FAST(26); LANE_FAST(27);
		LANE_FAST(28); LANE_FAST(29); LANE_FAST(30); LANE_FAST(31);
	}
	c->p = p;
	c->r = r;
}

/* Fast rounds (SIMD, then scalar) while words allow, then bounds-checked
 * steps (the partial last round too). */
wc_err wc_rans_lanes_decode(wc_rans_lanes *c, const wc_rans_dtab *dt, size_t rend)
{
	size_t full = c->m / WC_RANS_LANES;
	size_t fend = rend < full ? rend : full;
	switch (wc_rans_isa()) {
	case WC_RANS_ISA_AVX512: wc_rans_rounds_avx512(c, dt->entry, fend); break;
	case WC_RANS_ISA_AVX2: wc_rans_rounds_avx2(c, dt->entry, fend); break;
	default: break;
	}
	rounds_scalar(c, dt->entry, fend);
	size_t jend = rend * WC_RANS_LANES < c->m ? rend * WC_RANS_LANES : c->m;
	for (size_t j = c->r * WC_RANS_LANES; j < jend; j++) {
		if (step_checked(&c->x[j % WC_RANS_LANES], dt, c->w, &c->p, c->nw,
				 c->out + (j - c->rbase * WC_RANS_LANES)))
			return wc_fail(WC_E_CORRUPT, "rANS: chunk %zu symbol %zu reads past its %zu words",
				       c->k, j, c->nw);
	}
	c->r = rend;
	return WC_OK;
}

void wc_rans_lanes_advance2(wc_rans_lanes *a, const wc_rans_dtab *da, size_t rend_a, wc_rans_lanes *b,
			    const wc_rans_dtab *db, size_t rend_b)
{
	if (a->r != b->r || wc_rans_isa() != WC_RANS_ISA_AVX512)
		return;
	size_t full_a = a->m / WC_RANS_LANES, full_b = b->m / WC_RANS_LANES;
	size_t rend = rend_a < full_a ? rend_a : full_a;
	rend = rend < rend_b ? rend : rend_b;
	rend = rend < full_b ? rend : full_b;
	wc_rans_rounds2_avx512(a, da->entry, b, db->entry, rend);
}

wc_err wc_rans_lanes_end(const wc_rans_lanes *c)
{
	for (unsigned l = 0; l < WC_RANS_LANES; l++)
		if (c->x[l] != WC_RANS_STATE_LOW)
			return wc_fail(WC_E_CORRUPT, "rANS: chunk %zu lane %u final state %#x != 2^16", c->k, l,
				       c->x[l]);
	/* All words consumed, except one zero pad word after an odd count. */
	size_t p = c->p, nw = c->nw;
	if (p != nw && !(p + 1 == nw && (p & 1) && wc_ld16(c->w + 2 * p) == 0))
		return wc_fail(WC_E_CORRUPT, "rANS: chunk %zu: %zu of %zu word slots consumed", c->k, p, nw);
	return WC_OK;
}

wc_err wc_rans_segs_check(const wc_rans_segs *sg, size_t nsym)
{
	if (sg->n < 1 || sg->end[sg->n - 1] != nsym)
		return wc_fail(WC_E_INVAL, "rANS: %u segments ending at %zu for %zu symbols", sg->n,
			       sg->n ? sg->end[sg->n - 1] : 0, nsym);
	for (uint32_t g = 0; g + 1 < sg->n; g++)
		if (sg->end[g] % WC_RANS_LANES || sg->end[g] > sg->end[g + 1])
			return wc_fail(WC_E_INVAL, "rANS: segment %u ends at %zu (a multiple of 32, in order)", g,
				       sg->end[g]);
	return WC_OK;
}

wc_err wc_rans_decode_segs(const uint8_t *in, size_t in_len, const wc_rans_segs *sg, uint32_t chunk_symbols,
			   uint8_t *out, size_t nsym)
{
	wc_rans_body b;
	wc_err e = wc_rans_segs_check(sg, nsym);
	if (e != WC_OK || (e = wc_rans_body_parse(in, in_len, nsym, chunk_symbols, &b)) != WC_OK)
		return e;
	uint32_t seg = 0;
	for (size_t k = 0; k < b.nchunks; k++) {
		wc_rans_lanes c;
		if ((e = wc_rans_lanes_init(&c, &b, k, chunk_symbols, nsym)) != WC_OK)
			return e;
		const size_t first = k * (size_t)chunk_symbols, rounds = (c.m + WC_RANS_LANES - 1) / WC_RANS_LANES;
		c.out = out + first;
		/* Segments are round-aligned: each stretch of rounds has one table. */
		while (c.r < rounds) {
			while (sg->end[seg] <= first + c.r * WC_RANS_LANES)
				seg++;
			size_t rend = (sg->end[seg] - first + WC_RANS_LANES - 1) / WC_RANS_LANES;
			if ((e = wc_rans_lanes_decode(&c, sg->dt[seg], rend < rounds ? rend : rounds)) != WC_OK)
				return e;
		}
		if ((e = wc_rans_lanes_end(&c)) != WC_OK)
			return e;
	}
	return WC_OK;
}

wc_err wc_rans_decode(const uint8_t *in, size_t in_len, const wc_rans_dtab *dt,
		      uint32_t chunk_symbols, uint8_t *out, size_t nsym)
{
	const wc_rans_segs one = {1, &nsym, NULL, &dt};
	return wc_rans_decode_segs(in, in_len, &one, chunk_symbols, out, nsym);
}
