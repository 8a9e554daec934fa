/* rans_encode.c - chunked 32-lane rANS encoder (docs/FORMAT.md section 4). */
#include <stdlib.h>

#include "codec/codec_internal.h"

/* Per-symbol encoder constants: the state bound for renormalisation and
 * what the state update needs without a division. The update is
 * x' = (v / f) * M + (v % f) + cum = v + cum + q * (M - f) with q = v / f
 * (M = 2^WC_RANS_PROB_BITS; the form of Giesen's rans_byte.h), and q comes
 * from a multiply: with l = ceil(log2 f) and m = ceil(2^(32+l) / f),
 * floor(v * m / 2^(32+l)) = floor(v / f) for every 32-bit v (Granlund and
 * Montgomery, "Division by invariant integers using multiplication", PLDI
 * 1994, theorem 4.2: m * f - 2^(32+l) < f <= 2^l). m needs 33 bits, so it is
 * kept as m - 2^32 and v * m / 2^32 computed as v + (v * (m - 2^32)) / 2^32,
 * which fits 64 bits. f = 1 and powers of two give m - 2^32 = 0. */
typedef struct enc_sym {
	uint32_t x_max; /* f << 20: a state at or above it must shed 16 bits */
	uint32_t rcp;   /* m - 2^32 */
	uint32_t shift; /* l */
	uint32_t cmpl;  /* M - f */
	uint32_t cum;
} enc_sym;

static void enc_table(const wc_freqtab *ft, enc_sym es[256])
{
	uint32_t c = 0;
	for (int s = 0; s < 256; s++) {
		uint32_t f = ft->freq[s];
		es[s] = (enc_sym){ .x_max = f << 20, .cmpl = WC_RANS_PROB_SCALE - f, .cum = c };
		if (f) {
			uint32_t l = 0;
			while ((1u << l) < f)
				l++;
			uint64_t m = ((1ull << (32 + l)) + f - 1) / f;
			es[s].rcp = (uint32_t)(m - (1ull << 32));
			es[s].shift = l;
		}
		c += f;
	}
}

/*
 * Encode one chunk of m symbols, the first of them symbol `first` of the
 * stream, with tables es[s] for the stream's segments (round-aligned, so a
 * round has one table). The words are written downwards ending at wend
 * (the decoder reads them upwards); returns the number of words and stores
 * the final states, which become the decoder's initial states.
 * wend[-m] must be writable: the renormalisation stores its word before it
 * knows whether it keeps it (no branch to mispredict on a coin-flip), so
 * one slot below the kept words is written too.
 */
static size_t encode_chunk(const uint8_t *sym, size_t m, size_t first, const wc_rans_segs *sg,
			   enc_sym *const *es, uint16_t *wend, uint32_t state[WC_RANS_LANES])
{
	uint32_t x[WC_RANS_LANES];
	for (unsigned l = 0; l < WC_RANS_LANES; l++)
		x[l] = WC_RANS_STATE_LOW;
	uint16_t *w = wend;
	size_t rounds = (m + WC_RANS_LANES - 1) / WC_RANS_LANES;
	uint32_t seg = sg->n - 1;
	for (size_t r = rounds; r-- > 0;) {
		size_t base = r * WC_RANS_LANES;
		while (seg > 0 && sg->end[seg - 1] > first + base)
			seg--;
		const enc_sym *t = es[seg];
		unsigned lanes = (unsigned)(m - base < WC_RANS_LANES ? m - base : WC_RANS_LANES);
		for (unsigned l = lanes; l-- > 0;) {
			const enc_sym *e = &t[sym[base + l]];
			uint32_t v = x[l];
			uint32_t out = v >= e->x_max;
			w[-1] = (uint16_t)v;
			w -= out;
			v >>= 16 * out;
			uint32_t q = (uint32_t)((v + (((uint64_t)v * e->rcp) >> 32)) >> e->shift);
			x[l] = v + e->cum + q * e->cmpl;
		}
	}
	memcpy(state, x, sizeof x);
	return (size_t)(wend - w);
}

size_t wc_rans_bound(size_t nsym, uint32_t chunk_symbols)
{
	if (!wc_rans_chunk_symbols_ok(chunk_symbols))
		chunk_symbols = WC_RANS_CHUNK_MIN;
	size_t nchunks = wc_rans_nchunks(nsym, chunk_symbols);
	/* chunk_end + states + pad per chunk; at most one word per symbol. */
	return nchunks * (4 + 4 * WC_RANS_LANES + 2) + 2 * nsym;
}

static wc_err check_args(const uint8_t *sym, size_t nsym, const wc_rans_segs *sg, uint32_t chunk_symbols)
{
	if (!wc_rans_chunk_symbols_ok(chunk_symbols))
		return wc_fail(WC_E_INVAL, "chunk_symbols %u is not a multiple of 32 in [32, 2^20]",
			       chunk_symbols);
	wc_err e = wc_rans_segs_check(sg, nsym);
	if (e != WC_OK)
		return wc_fail_context(WC_E_INVAL, "rANS encode");
	if (wc_rans_bound(nsym, chunk_symbols) > UINT32_MAX)
		return wc_fail(WC_E_INVAL, "rANS encode: %zu symbols exceed the 32-bit chunk offsets", nsym);
	for (uint32_t g = 0; g < sg->n; g++) {
		if ((e = wc_freq_validate(sg->ft[g])) != WC_OK)
			return wc_fail_context(WC_E_INVAL, "rANS encode: table of segment %u", g);
		uint8_t seen[256] = {0};
		for (size_t i = g ? sg->end[g - 1] : 0; i < sg->end[g]; i++)
			seen[sym[i]] = 1;
		for (int v = 0; v < 256; v++)
			if (seen[v] && !sg->ft[g]->freq[v])
				return wc_fail(WC_E_INVAL, "rANS encode: symbol %d has frequency 0 in the table of "
					       "segment %u", v, g);
	}
	return WC_OK;
}

/* Shared by encode and encoded_size: out == NULL only counts. */
static wc_err encode(const uint8_t *sym, size_t nsym, const wc_rans_segs *sg,
		     uint32_t chunk_symbols, uint8_t *out, size_t cap, size_t *out_len)
{
	wc_err e = check_args(sym, nsym, sg, chunk_symbols);
	if (e != WC_OK)
		return e;
	enc_sym **es = calloc(sg->n, sizeof *es);
	for (uint32_t g = 0; es && g < sg->n; g++)
		if ((es[g] = malloc(256 * sizeof *es[g])))
			enc_table(sg->ft[g], es[g]);
	size_t nchunks = wc_rans_nchunks(nsym, chunk_symbols);
	size_t cmax = nsym < chunk_symbols ? nsym : chunk_symbols;
	uint16_t *words = malloc((cmax ? cmax : 1) * sizeof *words);
	int ok = es && words;
	for (uint32_t g = 0; ok && g < sg->n; g++)
		ok = es[g] != NULL;
	size_t pos = 4 * nchunks; /* write position; chunk data follows chunk_end[] */
	if (!ok)
		e = wc_fail(WC_E_NOMEM, "rANS encode: no memory for %zu words", cmax);
	else if (out && pos > cap)
		e = wc_fail(WC_E_RANGE, "rANS encode: output capacity %zu too small", cap);
	for (size_t k = 0; !e && k < nchunks; k++) {
		size_t first = k * chunk_symbols;
		size_t m = nsym - first < chunk_symbols ? nsym - first : chunk_symbols;
		uint32_t state[WC_RANS_LANES];
		size_t nw = encode_chunk(sym + first, m, first, sg, es, words + cmax, state);
		size_t bytes = 4 * WC_RANS_LANES + 2 * nw + 2 * (nw & 1);
		if (out) {
			if (cap - pos < bytes) {
				e = wc_fail(WC_E_RANGE, "rANS encode: output capacity %zu too small", cap);
				break;
			}
			uint8_t *p = out + pos;
			for (unsigned l = 0; l < WC_RANS_LANES; l++)
				wc_st32(p + 4 * l, state[l]);
			memcpy(p + 4 * WC_RANS_LANES, words + cmax - nw, 2 * nw);
			if (nw & 1)
				wc_st16(p + 4 * WC_RANS_LANES + 2 * nw, 0);
			wc_st32(out + 4 * k, (uint32_t)(pos + bytes - 4 * nchunks));
		}
		pos += bytes;
	}
	for (uint32_t g = 0; es && g < sg->n; g++)
		free(es[g]);
	free(es);
	free(words);
	if (!e)
		*out_len = pos;
	return e;
}

wc_err wc_rans_encode(const uint8_t *sym, size_t nsym, const wc_freqtab *ft,
		      uint32_t chunk_symbols, uint8_t *out, size_t cap, size_t *out_len)
{
	const wc_rans_segs one = {1, &nsym, &ft, NULL};
	return encode(sym, nsym, &one, chunk_symbols, out, cap, out_len);
}

wc_err wc_rans_encode_segs(const uint8_t *sym, size_t nsym, const wc_rans_segs *sg, uint32_t chunk_symbols,
			   uint8_t *out, size_t cap, size_t *out_len)
{
	return encode(sym, nsym, sg, chunk_symbols, out, cap, out_len);
}

wc_err wc_rans_encoded_size(const uint8_t *sym, size_t nsym, const wc_freqtab *ft,
			    uint32_t chunk_symbols, size_t *out_len)
{
	const wc_rans_segs one = {1, &nsym, &ft, NULL};
	return encode(sym, nsym, &one, chunk_symbols, NULL, 0, out_len);
}
