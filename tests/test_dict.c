/* test_dict.c - the dictionary layout (docs/FORMAT.md 2.1): building sorted
 * dictionaries, tile round trips of index planes for every element size and
 * dictionary size, and rejection of indices outside the dictionary. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "codec/codec_internal.h" /* wc_rans_isa_limit */
#include "codec/tile_codec.h"
#include "codec_testutil.h"

#define C_CHUNK 4096u

static uint64_t load(const uint8_t *p, unsigned w)
{
	uint64_t v = 0;
	for (unsigned b = 0; b < w; b++)
		v |= (uint64_t)p[b] << (8 * b);
	return v;
}

static void store(uint8_t *p, unsigned w, uint64_t v)
{
	for (unsigned b = 0; b < w; b++)
		p[b] = (uint8_t)(v >> (8 * b));
}

/* K distinct values of w bytes (unsorted; the top byte varies too, so
 * sorting is by the whole little-endian integer). */
static void make_values(uint64_t *vals, uint32_t k, unsigned w, uint64_t seed)
{
	uint64_t mask = w == 8 ? ~0ull : ((1ull << (8 * w)) - 1);
	if (w <= 2 && k > (1u << (8 * w)) / 2) { /* dense: a permutation-like subset */
		for (uint32_t i = 0; i < k; i++)
			vals[i] = ((uint64_t)i * 40503u + 17) & mask; /* odd multiplier: distinct mod 2^16 */
		return;
	}
	if (k > 4096) { /* odd multiplier: distinct modulo 2^(8w) */
		for (uint32_t i = 0; i < k; i++)
			vals[i] = ((uint64_t)i * 2654435761u + seed) & mask;
		return;
	}
	for (uint32_t i = 0; i < k; i++) {
		for (;;) {
			uint64_t v = tu_next(&seed) & mask;
			uint32_t j = 0;
			while (j < i && vals[j] != v)
				j++;
			if (j == i) {
				vals[i] = v;
				break;
			}
		}
	}
}

/* n elements drawn from vals: every value at least once (when n >= k), then
 * uniform (skew 0) or geometric-like (skew 1: low ranks of the draw order
 * much more frequent). */
static void make_tensor(uint8_t *out, size_t n, unsigned w, const uint64_t *vals, uint32_t k, int skew,
			uint64_t seed)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t r;
		if (i < k)
			r = (uint32_t)i;
		else if (!skew)
			r = (uint32_t)(tu_next(&seed) % k);
		else {
			double u = tu_uniform(&seed);
			r = (uint32_t)(u * u * u * u * k);
			if (r >= k)
				r = k - 1;
		}
		store(out + i * w, w, vals[r]);
	}
}

static const unsigned sizes[] = {1, 2, 4, 8};
static const uint32_t ks[] = {1, 2, 255, 256, 257, 4000, 65536};

/* _i = size index * 7 + k index */
START_TEST(build_sorted_with_counts)
{
	unsigned w = sizes[_i / 7];
	uint32_t k = ks[_i % 7];
	if (w == 1 && k > 256)
		return;
	size_t n = k + 5000;
	uint64_t *vals = malloc(k * sizeof *vals);
	uint8_t *data = malloc(n * w), *dict = malloc((size_t)WC_DICT_MAX_ENTRIES * 8);
	uint64_t *counts = malloc(WC_DICT_MAX_ENTRIES * sizeof *counts);
	make_values(vals, k, w, 7 + _i);
	make_tensor(data, n, w, vals, k, 1, 99);
	uint32_t got = 0;
	ck_assert_int_eq(wc_dict_build(data, n, w, dict, &got, counts), WC_OK);
	ck_assert_uint_eq(got, k);
	ck_assert(wc_dict_sorted(dict, got, w));
	uint64_t total = 0;
	for (uint32_t j = 0; j < got; j++) {
		ck_assert_uint_gt(counts[j], 0);
		total += counts[j];
	}
	ck_assert_uint_eq(total, n);
	/* the count of the smallest value, checked by hand */
	uint64_t v0 = load(dict, w), c0 = 0;
	for (size_t i = 0; i < n; i++)
		c0 += load(data + i * w, w) == v0;
	ck_assert_uint_eq(c0, counts[0]);
	free(vals);
	free(data);
	free(dict);
	free(counts);
}
END_TEST

START_TEST(too_many_values)
{
	/* 65537 distinct 4- and 8-byte values: "too many" (the layout falls back) */
	for (unsigned w = 4; w <= 8; w += 4) {
		size_t n = 70000;
		uint8_t *data = malloc(n * w), *dict = malloc((size_t)WC_DICT_MAX_ENTRIES * 8);
		for (size_t i = 0; i < n; i++)
			store(data + i * w, w, (uint64_t)(i % 65537) * 2654435761u);
		uint32_t got = 1;
		ck_assert_int_eq(wc_dict_build(data, n, w, dict, &got, NULL), WC_E_RANGE);
		/* exactly 65536: fine */
		for (size_t i = 0; i < n; i++)
			store(data + i * w, w, (uint64_t)(i % 65536) * 2654435761u);
		ck_assert_int_eq(wc_dict_build(data, n, w, dict, &got, NULL), WC_OK);
		ck_assert_uint_eq(got, 65536);
		free(data);
		free(dict);
	}
	uint8_t one[8] = {0}, d[8];
	uint32_t got;
	ck_assert_int_eq(wc_dict_build(one, 1, 3, d, &got, NULL), WC_E_INVAL);
	ck_assert_int_eq(wc_dict_build(one, 0, 4, d, &got, NULL), WC_E_INVAL);
}
END_TEST

START_TEST(sortedness)
{
	uint8_t d[4 * 3];
	store(d, 4, 5);
	store(d + 4, 4, 0x100);
	store(d + 8, 4, 0x80000000u);
	ck_assert(wc_dict_sorted(d, 3, 4));
	store(d + 8, 4, 0x100); /* duplicate */
	ck_assert(!wc_dict_sorted(d, 3, 4));
	store(d + 8, 4, 4); /* descending */
	ck_assert(!wc_dict_sorted(d, 3, 4));
	ck_assert(wc_dict_sorted(d, 1, 4));
	ck_assert(!wc_dict_sorted(d, 1, 3));
}
END_TEST

/* Tables for the index planes from their histograms (NULL where a plane
 * has one symbol). */
static void index_plan(wc_layout l, const uint8_t *dict, uint32_t k, const uint8_t *data, size_t n, int rans,
		       wc_freqtab tabs[2], wc_plane_plan plan[2])
{
	uint8_t *pl[2] = {malloc(n + 1), malloc(n + 1)};
	ck_assert_int_eq(wc_dict_index(l, dict, k, data, n, pl), WC_OK);
	for (unsigned p = 0; p < 2; p++) {
		plan[p] = (wc_plane_plan){NULL, p, 0};
		tabs[p] = (wc_freqtab){{2048, 2048}};
		if (p < l.nplanes && rans) {
			uint64_t h[256];
			tu_hist(pl[p], n, h);
			if (wc_freq_normalize(h, &tabs[p]) == WC_OK)
				plan[p].table = &tabs[p];
		}
	}
	free(pl[0]);
	free(pl[1]);
}

/* _i = (size index * 7 + k index) * 2 + skew; rANS and RAW/CONST paths both. */
START_TEST(tile_round_trip)
{
	unsigned w = sizes[_i / 14];
	uint32_t k = ks[(_i / 2) % 7];
	int skew = _i % 2;
	if (w == 1 && k > 256)
		return;
	wc_rans_isa_limit = (unsigned)_i % 3 + 1;
	size_t n = k + 3000 + (size_t)_i; /* odd sizes: block and chunk tails */
	uint64_t *vals = malloc(k * sizeof *vals);
	uint8_t *data = malloc(n * w), *dict = malloc((size_t)WC_DICT_MAX_ENTRIES * 8);
	make_values(vals, k, w, 3 + _i);
	make_tensor(data, n, w, vals, k, skew, 11 + _i);
	uint32_t got;
	ck_assert_int_eq(wc_dict_build(data, n, w, dict, &got, NULL), WC_OK);
	ck_assert_uint_eq(got, k);
	wc_layout l = wc_layout_dict(w, k);
	ck_assert_uint_eq(l.nplanes, k <= 256 ? 1 : 2);
	ck_assert_str_eq(wc_layout_name(l), "dict");
	for (int rans = 0; rans < 2; rans++) {
		wc_freqtab tabs[2];
		wc_plane_plan plan[2];
		index_plan(l, dict, k, data, n, rans, tabs, plan);
		size_t nbytes = n * w, cap = wc_tile_encode_bound(l, nbytes, C_CHUNK), len = 0;
		uint8_t *payload = malloc(cap), *out = malloc(nbytes + 9);
		ck_assert_int_eq(wc_tile_encode_dict(l, data, nbytes, dict, k, plan, C_CHUNK, payload, cap, &len, NULL),
				 WC_OK);
		memset(out, 0x5a, nbytes + 9);
		ck_assert_int_eq(wc_tile_decode_dict(l, payload, len, tabs, 2, C_CHUNK, dict, k, out, nbytes), WC_OK);
		ck_assert(memcmp(out, data, nbytes) == 0);
		ck_assert_uint_eq(out[nbytes], 0x5a);
		/* an unaligned output buffer takes the bytewise gather */
		ck_assert_int_eq(wc_tile_decode_dict(l, payload, len, tabs, 2, C_CHUNK, dict, k, out + 1, nbytes),
				 WC_OK);
		ck_assert(memcmp(out + 1, data, nbytes) == 0);
		if (k == 1)
			ck_assert_uint_eq(len, WC_TILE_HEADER_BYTES(1)); /* one CONST plane */
		free(payload);
		free(out);
	}
	free(vals);
	free(data);
	free(dict);
}
END_TEST

/* Encode n indices 0..k-1 (each present) with dictionary k; return payload. */
static uint8_t *encode_k(uint32_t k, unsigned w, uint8_t **dict_out, size_t *len_out, size_t *nbytes_out)
{
	size_t n = (size_t)k * 3;
	uint8_t *data = malloc(n * w), *dict = malloc((size_t)k * w);
	for (uint32_t j = 0; j < k; j++)
		store(dict + (size_t)j * w, w, (uint64_t)j * 3 + 1);
	for (size_t i = 0; i < n; i++)
		store(data + i * w, w, (uint64_t)(i % k) * 3 + 1);
	wc_layout l = wc_layout_dict(w, k);
	wc_plane_plan plan[2] = {{NULL, 0, 0}, {NULL, 0, 0}};
	size_t cap = wc_tile_encode_bound(l, n * w, C_CHUNK);
	uint8_t *payload = malloc(cap);
	ck_assert_int_eq(wc_tile_encode_dict(l, data, n * w, dict, k, plan, C_CHUNK, payload, cap, len_out, NULL),
			 WC_OK);
	free(data);
	*dict_out = dict;
	*nbytes_out = n * w;
	return payload;
}

START_TEST(index_beyond_dictionary_is_corrupt)
{
	const struct {
		uint32_t k, fewer;
		unsigned w;
	} cases[] = {{200, 199, 4}, {200, 1, 2}, {300, 299, 4}, {300, 257, 8}, {65535, 65534, 2}, {65536, 65535, 4},
		     {256, 255, 2}};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		uint8_t *dict;
		size_t len, nbytes;
		uint8_t *payload = encode_k(cases[c].k, cases[c].w, &dict, &len, &nbytes);
		uint8_t *out = malloc(nbytes);
		wc_layout l = wc_layout_dict(cases[c].w, cases[c].k);
		ck_assert_int_eq(wc_tile_decode_dict(l, payload, len, NULL, 0, C_CHUNK, dict, cases[c].k, out, nbytes),
				 WC_OK);
		uint32_t fewer = cases[c].fewer;
		if (l.nplanes == (fewer <= 256 ? 1 : 2)) {
			wc_err e = wc_tile_decode_dict(l, payload, len, NULL, 0, C_CHUNK, dict, fewer, out, nbytes);
			ck_assert_msg(e == WC_E_CORRUPT, "k %u read with %u entries: %s", cases[c].k, fewer,
				      wc_strerror(e));
			ck_assert_ptr_nonnull(strstr(wc_last_detail(), "dictionary index"));
		} else { /* the plane count no longer fits the dictionary */
			ck_assert_int_eq(wc_tile_decode_dict(l, payload, len, NULL, 0, C_CHUNK, dict, fewer, out, nbytes),
					 WC_E_CORRUPT);
		}
		free(payload);
		free(dict);
		free(out);
	}
}
END_TEST

START_TEST(layout_and_dictionary_must_agree)
{
	uint8_t *dict;
	size_t len, nbytes;
	uint8_t *payload = encode_k(100, 4, &dict, &len, &nbytes);
	uint8_t *out = malloc(nbytes);
	wc_layout l = wc_layout_dict(4, 100);
	/* the plain decoder has no dictionary */
	ck_assert_int_eq(wc_tile_decode(l, payload, len, NULL, 0, C_CHUNK, out, nbytes), WC_E_CORRUPT);
	ck_assert_int_eq(wc_tile_decode_dict(l, payload, len, NULL, 0, C_CHUNK, NULL, 100, out, nbytes), WC_E_CORRUPT);
	ck_assert_int_eq(wc_tile_decode_dict(l, payload, len, NULL, 0, C_CHUNK, dict, 0, out, nbytes), WC_E_CORRUPT);
	ck_assert_int_eq(wc_tile_decode_dict(l, payload, len, NULL, 0, C_CHUNK, dict, 65537, out, nbytes),
			 WC_E_CORRUPT);
	/* a dictionary with a byte-plane layout */
	wc_layout f32 = wc_layout_for_dtype("F32");
	ck_assert_int_eq(wc_tile_decode_dict(f32, payload, len, NULL, 0, C_CHUNK, dict, 100, out, nbytes),
			 WC_E_CORRUPT);
	/* the encoders refuse the wrong entry point */
	wc_plane_plan plan[2] = {{NULL, 0, 0}, {NULL, 0, 0}};
	size_t cap = wc_tile_encode_bound(l, nbytes, C_CHUNK), got;
	uint8_t *buf = malloc(cap);
	ck_assert_int_eq(wc_tile_encode(l, out, nbytes, plan, C_CHUNK, buf, cap, &got, NULL), WC_E_INVAL);
	ck_assert_int_eq(wc_tile_encode_dict(f32, out, nbytes, dict, 100, plan, C_CHUNK, buf, cap, &got, NULL),
			 WC_E_INVAL);
	/* an element that is not in the dictionary */
	uint8_t data[8];
	store(data, 4, 1);
	store(data + 4, 4, 2); /* values are 3j + 1 */
	ck_assert_int_eq(wc_tile_encode_dict(l, data, 8, dict, 100, plan, C_CHUNK, buf, cap, &got, NULL), WC_E_INVAL);
	/* a dict layout whose plane count does not fit the dictionary */
	wc_layout two = {WC_LAYOUT_DICT, 4, 2};
	ck_assert_int_eq(wc_tile_encode_dict(two, out, nbytes, dict, 100, plan, C_CHUNK, buf, cap, &got, NULL),
			 WC_E_INVAL);
	free(buf);
	free(payload);
	free(dict);
	free(out);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("dict");
	TCase *tc = tcase_create("dict");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, build_sorted_with_counts, 0, 4 * 7);
	tcase_add_test(tc, too_many_values);
	tcase_add_test(tc, sortedness);
	tcase_add_loop_test(tc, tile_round_trip, 0, 4 * 7 * 2);
	tcase_add_test(tc, index_beyond_dictionary_is_corrupt);
	tcase_add_test(tc, layout_and_dictionary_must_agree);
	suite_add_tcase(s, tc);
	return check_run(s);
}
