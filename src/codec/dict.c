/* dict.c - the dictionary layout (docs/FORMAT.md 2.1): a tensor's sorted
 * distinct values, the index planes of its elements, and the gather that
 * turns index planes back into elements.
 *
 * Why: TF.js and similar models quantize weights to 8 or 16 bits and store
 * them back as F32/F16/BF16, so a tensor holds at most 256 or 65536 distinct
 * values. Coding the index of each value (8 or 16 bits of which order-0
 * entropy coding then removes the skew) beats coding the value's byte planes,
 * which cannot see that only K of 2^32 patterns occur. */
#include <stdlib.h>
#include <string.h>

#include "codec/planes.h"
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

wc_layout wc_layout_dict(unsigned elem_size, uint32_t entries)
{
	return (wc_layout){WC_LAYOUT_DICT, (uint8_t)elem_size, (uint8_t)(entries <= 256 ? 1 : 2)};
}

/* Element i of w bytes, little-endian, as an unsigned integer. */
static inline uint64_t load_elem(const uint8_t *p, unsigned w)
{
	switch (w) {
	case 1: return p[0];
	case 2: { uint16_t v; memcpy(&v, p, 2); return v; }
	case 4: { uint32_t v; memcpy(&v, p, 4); return v; }
	default: { uint64_t v; memcpy(&v, p, 8); return v; }
	}
}

static inline void store_elem(uint8_t *p, unsigned w, uint64_t v)
{
	for (unsigned b = 0; b < w; b++)
		p[b] = (uint8_t)(v >> (8 * b));
}

/* Fibonacci hashing (Knuth, TAOCP vol. 3, 6.4) into 2^bits slots. */
static inline size_t hash_slot(uint64_t v, unsigned bits)
{
	return (size_t)((v * 0x9E3779B97F4A7C15ull) >> (64 - bits));
}

/* 1- and 2-byte elements: a count per possible value. */
static wc_err build_small(const uint8_t *in, size_t nelem, unsigned w, uint8_t *dict, uint32_t *entries,
			  uint64_t *counts)
{
	size_t nvals = (size_t)1 << (8 * w);
	uint64_t *cnt = calloc(nvals, sizeof *cnt);
	if (!cnt)
		return wc_fail(WC_E_NOMEM, "dictionary: no memory for a count table");
	if (w == 1) {
		for (size_t i = 0; i < nelem; i++)
			cnt[in[i]]++;
	} else {
		for (size_t i = 0; i < nelem; i++)
			cnt[(uint16_t)(in[2 * i] | in[2 * i + 1] << 8)]++;
	}
	uint32_t k = 0;
	for (size_t v = 0; v < nvals; v++) {
		if (!cnt[v])
			continue;
		store_elem(dict + (size_t)k * w, w, v);
		if (counts)
			counts[k] = cnt[v];
		k++;
	}
	free(cnt);
	*entries = k;
	return WC_OK;
}

#define BIG_BITS_MAX 17 /* 2^17 slots: a load of at most 1/2 at 65536 values */
#define BIG_BITS_MIN 10

/* Insert v (absent) into the table of 2^bits slots; returns its slot. */
static size_t big_insert(uint64_t *key, const uint64_t *cnt, unsigned bits, uint64_t v)
{
	size_t mask = ((size_t)1 << bits) - 1, s = hash_slot(v, bits);
	while (cnt[s])
		s = (s + 1) & mask;
	key[s] = v;
	return s;
}

/* Sort k (key, count) pairs by key: LSD radix sort on the w key bytes
 * (Knuth, TAOCP vol. 3, 5.2.5), stable, k <= 65536; tk, tc: scratch. */
static void radix_sort(uint64_t *key, uint64_t *cnt, uint64_t *tk, uint64_t *tc, uint32_t k, unsigned w)
{
	for (unsigned b = 0; b < w; b++) {
		size_t pos[256] = {0};
		for (uint32_t j = 0; j < k; j++)
			pos[(key[j] >> (8 * b)) & 0xff]++;
		size_t sum = 0;
		for (int d = 0; d < 256; d++) {
			size_t c = pos[d];
			pos[d] = sum;
			sum += c;
		}
		for (uint32_t j = 0; j < k; j++) {
			size_t at = pos[(key[j] >> (8 * b)) & 0xff]++;
			tk[at] = key[j];
			tc[at] = cnt[j];
		}
		memcpy(key, tk, k * sizeof *key);
		memcpy(cnt, tc, k * sizeof *cnt);
	}
}

/* 4- and 8-byte elements: an open-addressing hash table of value -> count,
 * kept at a load of at most 1/2 and grown from 2^10 slots as values appear
 * (most tensors have few values, and a small table stays in L1/L2). */
static wc_err build_big(const uint8_t *in, size_t nelem, unsigned w, uint8_t *dict, uint32_t *entries,
			uint64_t *counts)
{
	unsigned bits = BIG_BITS_MIN;
	size_t nslots = (size_t)1 << bits, mask = nslots - 1;
	uint64_t *key = malloc(nslots * sizeof *key), *cnt = calloc(nslots, sizeof *cnt);
	uint32_t k = 0;
	uint64_t last = 0;
	size_t last_slot = SIZE_MAX;
	wc_err e = WC_OK;
	if (!key || !cnt)
		goto nomem;
	for (size_t i = 0; i < nelem; i++) {
		uint64_t v = load_elem(in + i * w, w);
		if (last_slot != SIZE_MAX && v == last) { /* runs are common (zeros, padding) */
			cnt[last_slot]++;
			continue;
		}
		size_t s = hash_slot(v, bits);
		while (cnt[s] && key[s] != v)
			s = (s + 1) & mask;
		if (!cnt[s]) {
			if (k == WC_DICT_MAX_ENTRIES) {
				e = wc_fail(WC_E_RANGE, "dictionary: more than %u distinct values", WC_DICT_MAX_ENTRIES);
				goto out;
			}
			k++;
			if (2 * (size_t)k > nslots && bits < BIG_BITS_MAX) { /* grow: rehash into twice the slots */
				uint64_t *nk = malloc(2 * nslots * sizeof *nk), *nc = calloc(2 * nslots, sizeof *nc);
				if (!nk || !nc) {
					free(nk);
					free(nc);
					goto nomem;
				}
				for (size_t j = 0; j < nslots; j++)
					if (cnt[j])
						nc[big_insert(nk, nc, bits + 1, key[j])] = cnt[j];
				free(key);
				free(cnt);
				key = nk;
				cnt = nc;
				bits++;
				nslots <<= 1;
				mask = nslots - 1;
				s = big_insert(key, cnt, bits, v);
			} else {
				key[s] = v;
			}
		}
		cnt[s]++;
		last = v;
		last_slot = s;
	}
	/* Compact the (value, count) pairs to the front, then sort them by value. */
	uint32_t j = 0;
	for (size_t s = 0; s < nslots; s++)
		if (cnt[s]) {
			key[j] = key[s];
			cnt[j] = cnt[s];
			j++;
		}
	uint64_t *tk = malloc((size_t)(k ? k : 1) * sizeof *tk), *tc = malloc((size_t)(k ? k : 1) * sizeof *tc);
	if (!tk || !tc) {
		free(tk);
		free(tc);
		goto nomem;
	}
	radix_sort(key, cnt, tk, tc, k, w);
	free(tk);
	free(tc);
	for (j = 0; j < k; j++) {
		store_elem(dict + (size_t)j * w, w, key[j]);
		if (counts)
			counts[j] = cnt[j];
	}
	*entries = k;
	goto out;
nomem:
	e = wc_fail(WC_E_NOMEM, "dictionary: no memory for a hash table");
out:
	free(key);
	free(cnt);
	return e;
}

wc_err wc_dict_build(const uint8_t *in, size_t nelem, unsigned elem_size, uint8_t *dict, uint32_t *entries,
		     uint64_t *counts)
{
	*entries = 0;
	if (!nelem)
		return wc_fail(WC_E_INVAL, "dictionary: no elements");
	switch (elem_size) {
	case 1:
	case 2: return build_small(in, nelem, elem_size, dict, entries, counts);
	case 4:
	case 8: return build_big(in, nelem, elem_size, dict, entries, counts);
	default: return wc_fail(WC_E_INVAL, "dictionary: %u-byte elements", elem_size);
	}
}

int wc_dict_sorted(const uint8_t *dict, uint32_t entries, unsigned elem_size)
{
	if (elem_size != 1 && elem_size != 2 && elem_size != 4 && elem_size != 8)
		return 0;
	for (uint32_t k = 1; k < entries; k++)
		if (load_elem(dict + (size_t)(k - 1) * elem_size, elem_size) >=
		    load_elem(dict + (size_t)k * elem_size, elem_size))
			return 0;
	return 1;
}

wc_err wc_dict_index(wc_layout l, const uint8_t *dict, uint32_t entries, const uint8_t *in, size_t nelem,
		     uint8_t *const planes[])
{
	const unsigned w = l.elem_size;
	if (l.kind != WC_LAYOUT_DICT || entries == 0 || entries > WC_DICT_MAX_ENTRIES ||
	    l.nplanes != (entries <= 256 ? 1 : 2) || (w != 1 && w != 2 && w != 4 && w != 8))
		return wc_fail(WC_E_INVAL, "dictionary index: layout does not fit %u entries", entries);
	/* value -> index + 1 (0: absent), open addressing over >= 2 * entries slots */
	unsigned bits = 1;
	while (((size_t)1 << bits) < 2u * entries)
		bits++;
	const size_t nslots = (size_t)1 << bits, mask = nslots - 1;
	uint64_t *key = malloc(nslots * sizeof *key);
	uint32_t *val = calloc(nslots, sizeof *val);
	if (!key || !val) {
		free(key);
		free(val);
		return wc_fail(WC_E_NOMEM, "dictionary index: no memory");
	}
	for (uint32_t k = 0; k < entries; k++) {
		uint64_t v = load_elem(dict + (size_t)k * w, w);
		size_t s = hash_slot(v, bits);
		while (val[s] && key[s] != v)
			s = (s + 1) & mask;
		key[s] = v;
		val[s] = k + 1;
	}
	wc_err e = WC_OK;
	for (size_t i = 0; i < nelem; i++) {
		uint64_t v = load_elem(in + i * w, w);
		size_t s = hash_slot(v, bits);
		while (val[s] && key[s] != v)
			s = (s + 1) & mask;
		if (!val[s]) {
			e = wc_fail(WC_E_INVAL, "dictionary index: element %zu is not in the dictionary", i);
			break;
		}
		uint32_t idx = val[s] - 1;
		if (l.nplanes == 1) {
			planes[0][i] = (uint8_t)idx;
		} else {
			planes[0][i] = (uint8_t)(idx >> 8);
			planes[1][i] = (uint8_t)idx;
		}
	}
	free(key);
	free(val);
	return e;
}

/* The gathers for W-byte elements. memcpy of a fixed small size compiles to
 * one (unaligned) load or store, so neither dict nor out needs alignment
 * (dictionaries of different element sizes follow each other in the
 * dictionary section, so a dictionary's address is often unaligned);
 * restrict tells the compiler the stores do not feed the index loads. */
#define DEFINE_GATHER(W)                                                                        \
	static void gather1_##W(const uint8_t *restrict d, const uint8_t *restrict p0, size_t n,  \
				uint8_t *restrict out)                                            \
	{                                                                                       \
		for (size_t i = 0; i < n; i++)                                                  \
			memcpy(out + (W) * i, d + (size_t)(W) * p0[i], (W));                    \
	}                                                                                       \
	static void gather2_##W(const uint8_t *restrict d, const uint8_t *restrict p0,            \
				const uint8_t *restrict p1, size_t n, uint8_t *restrict out)      \
	{                                                                                       \
		for (size_t i = 0; i < n; i++)                                                  \
			memcpy(out + (W) * i, d + (size_t)(W) * ((size_t)p0[i] << 8 | p1[i]), (W)); \
	}
DEFINE_GATHER(1)
DEFINE_GATHER(2)
DEFINE_GATHER(4)
DEFINE_GATHER(8)

/* Nonzero if some index of the block is >= entries. Indices are checked for
 * the whole block before the gather reads the dictionary, so the gather loop
 * has no branch: per 16 indices, a saturating subtraction of entries - 1 is
 * nonzero exactly for the indices beyond it (SSE2, part of every x86-64). */
static int any_beyond(unsigned nplanes, const uint8_t *p0, const uint8_t *p1, size_t nelem, uint32_t entries)
{
	size_t i = 0;
	if (nplanes == 1) {
		if (entries >= 256)
			return 0;
		const uint8_t last = (uint8_t)(entries - 1);
#if defined(__SSE2__)
		const __m128i lim = _mm_set1_epi8((char)last);
		__m128i acc = _mm_setzero_si128();
		for (; i + 16 <= nelem; i += 16)
			acc = _mm_or_si128(acc, _mm_subs_epu8(_mm_loadu_si128((const __m128i *)(p0 + i)), lim));
		if (_mm_movemask_epi8(_mm_cmpeq_epi8(acc, _mm_setzero_si128())) != 0xffff)
			return 1;
#endif
		uint8_t bad = 0;
		for (; i < nelem; i++)
			bad |= p0[i] > last;
		return bad;
	}
	if (entries >= 65536)
		return 0;
	const uint16_t last = (uint16_t)(entries - 1);
#if defined(__SSE2__)
	const __m128i lim = _mm_set1_epi16((short)last);
	__m128i acc = _mm_setzero_si128();
	for (; i + 16 <= nelem; i += 16) {
		__m128i hi = _mm_loadu_si128((const __m128i *)(p0 + i));
		__m128i lo = _mm_loadu_si128((const __m128i *)(p1 + i));
		acc = _mm_or_si128(acc, _mm_subs_epu16(_mm_unpacklo_epi8(lo, hi), lim));
		acc = _mm_or_si128(acc, _mm_subs_epu16(_mm_unpackhi_epi8(lo, hi), lim));
	}
	if (_mm_movemask_epi8(_mm_cmpeq_epi8(acc, _mm_setzero_si128())) != 0xffff)
		return 1;
#endif
	uint8_t bad = 0;
	for (; i < nelem; i++)
		bad |= ((unsigned)p0[i] << 8 | p1[i]) > last;
	return bad;
}

int wc_dict_gather(wc_layout l, const uint8_t *dict, uint32_t entries, const uint8_t *const planes[],
		   size_t nelem, uint8_t *out)
{
	const uint8_t *p0 = planes[0], *p1 = l.nplanes > 1 ? planes[1] : NULL;
	if (any_beyond(l.nplanes, p0, p1, nelem, entries))
		return -1;
	const int two = l.nplanes > 1;
	switch (l.elem_size) {
	case 1: two ? gather2_1(dict, p0, p1, nelem, out) : gather1_1(dict, p0, nelem, out); return 0;
	case 2: two ? gather2_2(dict, p0, p1, nelem, out) : gather1_2(dict, p0, nelem, out); return 0;
	case 4: two ? gather2_4(dict, p0, p1, nelem, out) : gather1_4(dict, p0, nelem, out); return 0;
	case 8: two ? gather2_8(dict, p0, p1, nelem, out) : gather1_8(dict, p0, nelem, out); return 0;
	default: return -1;
	}
}
