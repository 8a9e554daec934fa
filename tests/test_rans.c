/* test_rans.c - frequency normalisation, the 32-lane rANS coder against a
 * reference decoder written from docs/FORMAT.md section 4, and corruption
 * detection. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "codec/codec_internal.h" /* wc_rans_isa_limit */
#include "codec/rans.h"
#include "codec_testutil.h"

/* ---- reference decoder: a literal transcription of FORMAT.md section 4 ---- */

static uint32_t rd32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }
static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* Returns 0 on success, -1 if the stream breaks a rule of the format. */
static int reference_decode(const uint8_t *body, size_t size, const wc_freqtab *ft, uint32_t C,
			    uint8_t *out, size_t n)
{
	uint32_t f[256], c[256], sum = 0;
	for (int s = 0; s < 256; s++) {
		f[s] = ft->freq[s];
		c[s] = sum;
		sum += f[s];
	}
	size_t nchunks = (n + C - 1) / C;
	if (size < 4 * nchunks)
		return -1;
	const uint8_t *data = body + 4 * nchunks;
	uint32_t start = 0;
	for (size_t k = 0; k < nchunks; k++) {
		uint32_t end = rd32(body + 4 * k);
		if (end <= start || end > size - 4 * nchunks)
			return -1;
		const uint8_t *chunk = data + start;
		size_t bytes = end - start;
		if (bytes < 128 || bytes % 4)
			return -1;
		size_t m = n - k * C < C ? n - k * C : C;
		size_t nwords = (bytes - 128) / 2;
		uint32_t x[32];
		for (int l = 0; l < 32; l++) {
			x[l] = rd32(chunk + 4 * l);
			if (x[l] < 65536)
				return -1;
		}
		size_t p = 0;
		for (size_t r = 0; r < (m + 31) / 32; r++) {
			for (size_t l = 0; l < 32 && 32 * r + l < m; l++) {
				size_t j = 32 * r + l;
				uint32_t t = x[l] & 4095;
				int s = 0;
				while (!(c[s] <= t && t < c[s] + f[s]))
					s++;
				out[k * C + j] = (uint8_t)s;
				x[l] = f[s] * (x[l] >> 12) + t - c[s];
				if (x[l] < 65536) {
					if (p >= nwords)
						return -1;
					x[l] = (x[l] << 16) | rd16(chunk + 128 + 2 * p);
					p++;
				}
			}
		}
		for (int l = 0; l < 32; l++)
			if (x[l] != 65536)
				return -1;
		/* word count p; a pad word (value 0) is present iff p is odd */
		if (nwords != p + (p & 1) || ((p & 1) && rd16(chunk + 128 + 2 * p) != 0))
			return -1;
		start = end;
	}
	return start == size - 4 * nchunks ? 0 : -1;
}

/* ---- data generators ---- */

enum dist { D_UNIFORM, D_TWO, D_SKEWED, D_ALL256_DOMINANT, D_GEOMETRIC, D_BF16_EXP, D_NDIST };

static void gen(enum dist d, uint8_t *p, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t r = tu_next(&seed);
		switch (d) {
		case D_UNIFORM: p[i] = (uint8_t)r; break;
		case D_TWO: p[i] = (r & 1) ? 17 : 200; break;
		case D_SKEWED: p[i] = (r % 1000) ? 5 : (uint8_t)(6 + (r >> 32) % 3); break;
		case D_ALL256_DOMINANT: p[i] = (r % 64) ? 0 : (uint8_t)(r >> 40); break;
		case D_GEOMETRIC: {
			int s = 0;
			while ((r & 1) && s < 255) {
				s++;
				r >>= 1;
				if (!r)
					r = tu_next(&seed);
			}
			p[i] = (uint8_t)s;
			break;
		}
		default: {
			uint16_t v = tu_f32_to_bf16((float)(tu_normal(&seed) * 0.02));
			p[i] = (uint8_t)(v >> 7);
		}
		}
	}
	/* Guarantee the properties the table needs for small n. */
	if (d == D_ALL256_DOMINANT && n >= 256)
		for (size_t s = 0; s < 256; s++)
			p[(s * 7919) % n] = (uint8_t)s;
}

/* A table covering every symbol of p (plus, for tiny inputs, a second one). */
static void table_for(const uint8_t *p, size_t n, wc_freqtab *ft)
{
	uint64_t h[256];
	tu_hist(p, n, h);
	h[0]++;
	h[255]++;
	ck_assert_int_eq(wc_freq_normalize(h, ft), WC_OK);
}

static void roundtrip(const uint8_t *sym, size_t n, const wc_freqtab *ft, uint32_t C)
{
	size_t cap = wc_rans_bound(n, C), len = 0, len2 = 0;
	uint8_t *enc = malloc(cap + 1), *dec = malloc(n + 1), *ref = malloc(n + 1);
	ck_assert_int_eq(wc_rans_encode(sym, n, ft, C, enc, cap, &len), WC_OK);
	ck_assert_uint_le(len, cap);
	ck_assert_int_eq(wc_rans_encoded_size(sym, n, ft, C, &len2), WC_OK);
	ck_assert_uint_eq(len, len2);
	wc_rans_dtab dt;
	wc_rans_dtab_build(ft, &dt);
	memset(dec, 0xaa, n + 1);
	ck_assert_int_eq(wc_rans_decode(enc, len, &dt, C, dec, n), WC_OK);
	ck_assert(memcmp(dec, sym, n) == 0);
	ck_assert_uint_eq(dec[n], 0xaa); /* nothing written past n */
	ck_assert_int_eq(reference_decode(enc, len, ft, C, ref, n), 0);
	ck_assert(memcmp(ref, sym, n) == 0);
	free(enc);
	free(dec);
	free(ref);
}

static const size_t sizes[] = {0, 1, 2, 31, 32, 33, 63, 64, 65, 100, 1000, 4095, 4096, 4097, 50000};
static const uint32_t chunks[] = {32, 64, 96, 4096, 16384, WC_RANS_CHUNK_MAX};

/* The decoder paths: _i % NPATHS + 1 caps wc_rans_isa_limit (scalar, AVX2,
 * AVX-512; a path the CPU lacks falls back to the best it has). */
#define NPATHS 3

/* _i = distribution * NPATHS + path. */
START_TEST(roundtrip_all_sizes_and_distributions)
{
	enum dist d = (enum dist)(_i / NPATHS);
	wc_rans_isa_limit = _i % NPATHS + 1;
	uint8_t *buf = malloc(50000);
	for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
		for (size_t ci = 0; ci < sizeof chunks / sizeof chunks[0]; ci++) {
			size_t n = sizes[si];
			gen(d, buf, n, 1000 + si * 31 + ci);
			wc_freqtab ft;
			table_for(buf, n, &ft);
			roundtrip(buf, n, &ft, chunks[ci]);
		}
	}
	free(buf);
}
END_TEST

START_TEST(roundtrip_chunk_boundaries)
{
	uint8_t *buf = malloc(10 * 1024);
	gen(D_BF16_EXP, buf, 10 * 1024, 7);
	wc_freqtab ft;
	table_for(buf, 10 * 1024, &ft);
	const uint32_t C = 1024;
	wc_rans_isa_limit = _i + 1;
	for (size_t n = 3 * C - 40; n <= 3 * C + 40; n++)
		roundtrip(buf, n, &ft, C);
	for (size_t n = 9 * C; n <= 10 * C; n += 31)
		roundtrip(buf, n, &ft, C);
	free(buf);
}
END_TEST

/* Extreme tables: one symbol at 4095 and one at 1, encoding runs of the rare one. */
START_TEST(roundtrip_extreme_tables)
{
	wc_freqtab ft = {{0}};
	ft.freq[3] = 4095;
	ft.freq[250] = 1;
	uint8_t buf[3000];
	for (size_t i = 0; i < sizeof buf; i++)
		buf[i] = (i % 97 == 0 || (i > 1000 && i < 1100)) ? 250 : 3;
	roundtrip(buf, sizeof buf, &ft, 32);
	roundtrip(buf, sizeof buf, &ft, 1024);
	memset(buf, 250, sizeof buf); /* only the 1/4096 symbol: 12 bits each */
	roundtrip(buf, sizeof buf, &ft, 64);
	memset(buf, 3, sizeof buf);
	roundtrip(buf, sizeof buf, &ft, 64);

	/* All 256 symbols at 16 each. */
	for (int s = 0; s < 256; s++)
		ft.freq[s] = 16;
	for (size_t i = 0; i < sizeof buf; i++)
		buf[i] = (uint8_t)(i * 13);
	roundtrip(buf, sizeof buf, &ft, 96);
}
END_TEST

/* Every decoder path the CPU has agrees on long multi-chunk streams,
 * including a short last chunk. */
START_TEST(simd_and_scalar_agree)
{
	size_t n = 200000 + 77;
	uint8_t *sym = malloc(n), *a = malloc(n);
	for (int d = 0; d < D_NDIST; d++) {
		gen((enum dist)d, sym, n, 321 + d);
		wc_freqtab ft;
		table_for(sym, n, &ft);
		wc_rans_dtab dt;
		wc_rans_dtab_build(&ft, &dt);
		const uint32_t Cs[] = {32, 96, 4096, 16384};
		for (int c = 0; c < 4; c++) {
			size_t cap = wc_rans_bound(n, Cs[c]), len;
			uint8_t *enc = malloc(cap);
			ck_assert_int_eq(wc_rans_encode(sym, n, &ft, Cs[c], enc, cap, &len), WC_OK);
			for (int isa = WC_RANS_ISA_SCALAR; isa <= wc_rans_cpu_isa(); isa++) {
				wc_rans_isa_limit = isa;
				memset(a, 0, n);
				ck_assert_int_eq(wc_rans_decode(enc, len, &dt, Cs[c], a, n), WC_OK);
				ck_assert_msg(memcmp(a, sym, n) == 0, "%s path, C %u", wc_rans_isa_name(isa), Cs[c]);
			}
			wc_rans_isa_limit = 0;
			free(enc);
		}
	}
	free(sym);
	free(a);
}
END_TEST

/* Two chunks advanced together (wc_rans_lanes_advance2, the tile decoder's
 * pairing of planes), then finished one by one, give what each chunk gives
 * alone: different tables and entropies, so different word cursors, and
 * unequal targets and chunk lengths, on every decoder path. */
START_TEST(advance2_matches_single_chunks)
{
	const size_t n = 5000 + 19; /* one chunk of C = 8192: 156 full rounds and a partial one */
	const uint32_t C = 8192;
	uint8_t *sa = malloc(n), *sb = malloc(n), *oa = malloc(n), *ob = malloc(n);
	gen(D_BF16_EXP, sa, n, 11);
	gen(D_UNIFORM, sb, n, 12);
	wc_freqtab fa, fb;
	table_for(sa, n, &fa);
	table_for(sb, n, &fb);
	wc_rans_dtab *da = malloc(sizeof *da), *db = malloc(sizeof *db);
	wc_rans_dtab_build(&fa, da);
	wc_rans_dtab_build(&fb, db);
	size_t ca = wc_rans_bound(n, C), cb = wc_rans_bound(n, C), la, lb;
	uint8_t *ea = malloc(ca), *eb = malloc(cb);
	ck_assert_int_eq(wc_rans_encode(sa, n, &fa, C, ea, ca, &la), WC_OK);
	ck_assert_int_eq(wc_rans_encode(sb, n, &fb, C, eb, cb, &lb), WC_OK);
	wc_rans_body ba, bb;
	ck_assert_int_eq(wc_rans_body_parse(ea, la, n, C, &ba), WC_OK);
	/* b is decoded as a shorter chunk: its first n - 700 symbols. */
	size_t nb = n - 700;
	uint8_t *eb2 = malloc(cb);
	size_t lb2;
	ck_assert_int_eq(wc_rans_encode(sb, nb, &fb, C, eb2, cb, &lb2), WC_OK);
	ck_assert_int_eq(wc_rans_body_parse(eb2, lb2, nb, C, &bb), WC_OK);
	const size_t targets[][2] = {{1, 1}, {64, 64}, {64, 10}, {3, 200}, {157, 157}};
	for (int isa = WC_RANS_ISA_SCALAR; isa <= wc_rans_cpu_isa(); isa++) {
		wc_rans_isa_limit = isa;
		for (size_t t = 0; t < sizeof targets / sizeof targets[0]; t++) {
			wc_rans_lanes a, b;
			ck_assert_int_eq(wc_rans_lanes_init(&a, &ba, 0, C, n), WC_OK);
			ck_assert_int_eq(wc_rans_lanes_init(&b, &bb, 0, C, nb), WC_OK);
			a.out = oa;
			b.out = ob;
			memset(oa, 0, n);
			memset(ob, 0, n);
			size_t ra = targets[t][0], rb = targets[t][1];
			wc_rans_lanes_advance2(&a, da, ra, &b, db, rb);
			ck_assert_uint_le(a.r, ra);
			ck_assert_uint_le(b.r, rb);
			ck_assert_int_eq(wc_rans_lanes_decode(&a, da, ra), WC_OK);
			ck_assert_int_eq(wc_rans_lanes_decode(&b, db, rb), WC_OK);
			/* then to the end, one by one */
			ck_assert_int_eq(wc_rans_lanes_decode(&a, da, (n + 31) / 32), WC_OK);
			ck_assert_int_eq(wc_rans_lanes_decode(&b, db, (nb + 31) / 32), WC_OK);
			ck_assert_int_eq(wc_rans_lanes_end(&a), WC_OK);
			ck_assert_int_eq(wc_rans_lanes_end(&b), WC_OK);
			ck_assert_msg(memcmp(oa, sa, n) == 0, "%s path, targets %zu %zu: chunk a", wc_rans_isa_name(isa),
				      ra, rb);
			ck_assert_msg(memcmp(ob, sb, nb) == 0, "%s path, targets %zu %zu: chunk b", wc_rans_isa_name(isa),
				      ra, rb);
		}
	}
	wc_rans_isa_limit = 0;
	free(sa), free(sb), free(oa), free(ob), free(da), free(db), free(ea), free(eb), free(eb2);
}
END_TEST

START_TEST(normalize_is_valid_and_near_optimal)
{
	uint64_t seed = 42;
	for (int trial = 0; trial < 200; trial++) {
		uint64_t h[256] = {0};
		int kind = trial % 4;
		for (int s = 0; s < 256; s++) {
			uint64_t r = tu_next(&seed);
			if (kind == 0)
				h[s] = r % 1000;
			else if (kind == 1)
				h[s] = (r % 8 == 0) ? r % 100000000 : 0;
			else if (kind == 2)
				h[s] = (uint64_t)(1e9 * exp(-0.1 * s * (1 + trial % 7)));
			else
				h[s] = s < 2 ? 1 + (r % 3) : ((r % 3 == 0) ? (r >> 20) % 5 : 0);
		}
		h[trial % 256] += 1;
		h[(trial + 1) % 256] += 1 + trial * 1000000ull;
		wc_freqtab ft;
		ck_assert_int_eq(wc_freq_normalize(h, &ft), WC_OK);
		ck_assert_int_eq(wc_freq_validate(&ft), WC_OK);
		double cost = 0, total = 0;
		for (int s = 0; s < 256; s++) {
			ck_assert(h[s] ? ft.freq[s] >= 1 : ft.freq[s] == 0);
			total += (double)h[s];
			if (h[s])
				cost += (double)h[s] * -log2(ft.freq[s] / 4096.0);
		}
		/* Locally optimal: no single unit move between two symbols lowers the cost. */
		for (int a = 0; a < 256; a++) {
			if (!h[a] || ft.freq[a] <= 1)
				continue;
			for (int b = 0; b < 256; b++) {
				if (!h[b] || a == b)
					continue;
				double d = (double)h[a] * (log2(ft.freq[a]) - log2(ft.freq[a] - 1.0)) +
					   (double)h[b] * (log2(ft.freq[b]) - log2(ft.freq[b] + 1.0));
				ck_assert_msg(d >= -1e-6 * cost, "trial %d: move %d->%d gains %g bits", trial, a, b, -d);
			}
		}
		/* Deterministic. */
		wc_freqtab ft2;
		ck_assert_int_eq(wc_freq_normalize(h, &ft2), WC_OK);
		ck_assert(memcmp(&ft, &ft2, sizeof ft) == 0);
		(void)total;
	}
}
END_TEST

START_TEST(normalize_rejects_single_symbol)
{
	uint64_t h[256] = {0};
	wc_freqtab ft;
	ck_assert_int_eq(wc_freq_normalize(h, &ft), WC_E_INVAL);
	h[9] = 1000;
	ck_assert_int_eq(wc_freq_normalize(h, &ft), WC_E_INVAL);
	h[10] = 1;
	ck_assert_int_eq(wc_freq_normalize(h, &ft), WC_OK);
	/* 1/1001 of 4096 is 4.09: the optimum is 4092 + 4, not 4095 + 1. */
	ck_assert_uint_eq(ft.freq[9], 4092);
	ck_assert_uint_eq(ft.freq[10], 4);
	/* Huge counts must not overflow. */
	h[9] = UINT64_MAX / 4;
	h[10] = UINT64_MAX / 4;
	ck_assert_int_eq(wc_freq_normalize(h, &ft), WC_OK);
	ck_assert_uint_eq(ft.freq[9], 2048);
}
END_TEST

START_TEST(validate_rejects_bad_tables)
{
	wc_freqtab ft = {{0}};
	ft.freq[0] = 4096;
	ck_assert_int_eq(wc_freq_validate(&ft), WC_E_FORMAT); /* one symbol, > 4095 */
	ft.freq[0] = 4095;
	ck_assert_int_eq(wc_freq_validate(&ft), WC_E_FORMAT); /* sum 4095 */
	ft.freq[1] = 1;
	ck_assert_int_eq(wc_freq_validate(&ft), WC_OK);
	ft.freq[2] = 1;
	ck_assert_int_eq(wc_freq_validate(&ft), WC_E_FORMAT); /* sum 4097 */
	for (int s = 0; s < 256; s++)
		ft.freq[s] = 16;
	ck_assert_int_eq(wc_freq_validate(&ft), WC_OK);
	ft.freq[0] = 65535; /* wraps nothing: sum is computed wide */
	ck_assert_int_eq(wc_freq_validate(&ft), WC_E_FORMAT);
}
END_TEST

START_TEST(dtab_matches_format)
{
	wc_freqtab ft = {{0}};
	ft.freq[1] = 1000;
	ft.freq[7] = 3000;
	ft.freq[255] = 96;
	wc_rans_dtab dt;
	wc_rans_dtab_build(&ft, &dt);
	for (uint32_t t = 0; t < 4096; t++) {
		uint32_t s = t < 1000 ? 1 : t < 4000 ? 7 : 255;
		uint32_t c = s == 1 ? 0 : s == 7 ? 1000 : 4000;
		ck_assert_uint_eq(dt.entry[t], s | (ft.freq[s] << 8) | ((t - c) << 20));
	}
}
END_TEST

START_TEST(encode_rejects_bad_arguments)
{
	wc_freqtab ft = {{0}};
	ft.freq[1] = 2048;
	ft.freq[2] = 2048;
	uint8_t sym[100], out[2000];
	memset(sym, 1, sizeof sym);
	size_t len;
	ck_assert_int_eq(wc_rans_encode(sym, 100, &ft, 33, out, sizeof out, &len), WC_E_INVAL);
	ck_assert_int_eq(wc_rans_encode(sym, 100, &ft, 0, out, sizeof out, &len), WC_E_INVAL);
	ck_assert_int_eq(wc_rans_encode(sym, 100, &ft, WC_RANS_CHUNK_MAX + 32, out, sizeof out, &len),
			 WC_E_INVAL);
	sym[50] = 3; /* frequency 0 */
	ck_assert_int_eq(wc_rans_encode(sym, 100, &ft, 32, out, sizeof out, &len), WC_E_INVAL);
	ck_assert_int_eq(wc_rans_encoded_size(sym, 100, &ft, 32, &len), WC_E_INVAL);
	sym[50] = 2;
	ck_assert_int_eq(wc_rans_encode(sym, 100, &ft, 32, out, sizeof out, &len), WC_OK);
	size_t need = len;
	for (size_t cap = 0; cap < need; cap += 7)
		ck_assert_int_eq(wc_rans_encode(sym, 100, &ft, 32, out, cap, &len), WC_E_RANGE);
	ck_assert_int_eq(wc_rans_encode(sym, 100, &ft, 32, out, need, &len), WC_OK);
	wc_freqtab bad = ft;
	bad.freq[2] = 2047;
	ck_assert_int_eq(wc_rans_encode(sym, 100, &bad, 32, out, sizeof out, &len), WC_E_INVAL);
}
END_TEST

/* Encode n symbols of distribution d into a fresh buffer. */
static uint8_t *encode_sample(size_t n, uint32_t C, wc_freqtab *ft, uint8_t **sym, size_t *len)
{
	*sym = malloc(n);
	gen(D_BF16_EXP, *sym, n, 99);
	table_for(*sym, n, ft);
	size_t cap = wc_rans_bound(n, C);
	uint8_t *enc = malloc(cap);
	ck_assert_int_eq(wc_rans_encode(*sym, n, ft, C, enc, cap, len), WC_OK);
	return enc;
}

/*
 * Single-bit flips. Flips in chunk_end are always caught. A flip in a state
 * or word is caught by the final-state check unless the damaged stream
 * happens to be a valid encoding of other symbols (e.g. two adjacent symbols
 * of a lane swapped): rANS detection is probabilistic, which is why the
 * container checksums every payload. Require such misses to be rare.
 */
START_TEST(corrupt_bit_flips_detected)
{
	wc_rans_isa_limit = _i + 1;
	const size_t ns[] = {300, 3000};
	const uint32_t Cs[] = {128, 256};
	size_t flips = 0, missed = 0;
	for (int t = 0; t < 2; t++) {
		wc_freqtab ft;
		uint8_t *sym;
		size_t len, n = ns[t];
		const uint32_t C = Cs[t];
		uint8_t *enc = encode_sample(n, C, &ft, &sym, &len);
		wc_rans_dtab dt;
		wc_rans_dtab_build(&ft, &dt);
		uint8_t *dec = malloc(n);
		size_t nchunks = (n + C - 1) / C;
		for (size_t bit = 0; bit < 8 * len; bit++) {
			enc[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			wc_err e = wc_rans_decode(enc, len, &dt, C, dec, n);
			if (bit < 32 * nchunks)
				ck_assert_msg(e == WC_E_CORRUPT, "chunk_end bit %zu: %d", bit, e);
			else if (e == WC_OK)
				ck_assert(memcmp(dec, sym, n) != 0), missed++;
			else
				ck_assert_int_eq(e, WC_E_CORRUPT);
			flips++;
			enc[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		}
		ck_assert_int_eq(wc_rans_decode(enc, len, &dt, C, dec, n), WC_OK);
		ck_assert(memcmp(dec, sym, n) == 0);
		free(enc);
		free(sym);
		free(dec);
	}
	ck_assert_msg(missed * 1000 <= flips, "%zu of %zu flips undetected", missed, flips);
}
END_TEST

START_TEST(corrupt_truncation_and_bad_chunk_end)
{
	wc_freqtab ft;
	uint8_t *sym;
	size_t len, n = 5000;
	const uint32_t C = 1024;
	uint8_t *enc = encode_sample(n, C, &ft, &sym, &len);
	wc_rans_dtab dt;
	wc_rans_dtab_build(&ft, &dt);
	uint8_t *dec = malloc(n);
	for (size_t l = 0; l < len; l++) /* every truncation: fresh copy so ASan sees over-reads */
	{
		uint8_t *t = malloc(l ? l : 1);
		memcpy(t, enc, l);
		ck_assert_int_eq(wc_rans_decode(t, l, &dt, C, dec, n), WC_E_CORRUPT);
		free(t);
	}
	/* Extra bytes after the last chunk. */
	uint8_t *longer = calloc(1, len + 4);
	memcpy(longer, enc, len);
	ck_assert_int_eq(wc_rans_decode(longer, len + 4, &dt, C, dec, n), WC_E_CORRUPT);
	free(longer);
	/* chunk_end values: equal, decreasing, unaligned, huge, off by 4. */
	const uint32_t evil[] = {0, 4, 124, 128, 0xfffffffcu, 0xffffffffu};
	for (unsigned k = 0; k < 5; k++) {
		uint8_t saved[4];
		memcpy(saved, enc + 4 * k, 4);
		for (size_t i = 0; i < sizeof evil / sizeof evil[0]; i++) {
			memcpy(enc + 4 * k, &evil[i], 4);
			ck_assert_int_eq(wc_rans_decode(enc, len, &dt, C, dec, n), WC_E_CORRUPT);
		}
		uint32_t v;
		memcpy(&v, saved, 4);
		for (int d = -8; d <= 8; d += 2) {
			if (!d)
				continue;
			uint32_t w = v + (uint32_t)d;
			memcpy(enc + 4 * k, &w, 4);
			ck_assert_int_eq(wc_rans_decode(enc, len, &dt, C, dec, n), WC_E_CORRUPT);
		}
		memcpy(enc + 4 * k, saved, 4);
	}
	/* Wrong symbol count or chunk size for the body. */
	ck_assert_int_eq(wc_rans_decode(enc, len, &dt, C, dec, n - 1), WC_E_CORRUPT);
	ck_assert_int_eq(wc_rans_decode(enc, len, &dt, C / 2, dec, n), WC_E_CORRUPT);
	ck_assert_int_eq(wc_rans_decode(enc, len, &dt, 1000, dec, n), WC_E_CORRUPT);
	/* A different table. */
	wc_freqtab other = ft;
	for (int s = 0; s < 256; s++)
		if (other.freq[s] > 2) {
			other.freq[s]--;
			other.freq[(s + 1) % 256]++;
			break;
		}
	wc_rans_dtab dt2;
	wc_rans_dtab_build(&other, &dt2);
	ck_assert_int_eq(wc_rans_decode(enc, len, &dt2, C, dec, n), WC_E_CORRUPT);
	ck_assert_int_eq(wc_rans_decode(enc, len, &dt, C, dec, n), WC_OK);
	free(enc);
	free(sym);
	free(dec);
}
END_TEST

START_TEST(corrupt_states_and_leftover_words)
{
	wc_freqtab ft;
	uint8_t *sym;
	size_t len, n = 64;
	uint8_t *enc = encode_sample(n, 64, &ft, &sym, &len);
	wc_rans_dtab dt;
	wc_rans_dtab_build(&ft, &dt);
	uint8_t dec[64];
	/* Initial state below 2^16. */
	uint8_t saved[4];
	memcpy(saved, enc + 4 + 8, 4);
	uint32_t low = 0xffff;
	memcpy(enc + 4 + 8, &low, 4);
	ck_assert_int_eq(wc_rans_decode(enc, len, &dt, 64, dec, n), WC_E_CORRUPT);
	ck_assert_ptr_nonnull(strstr(wc_last_detail(), "initial state"));
	memcpy(enc + 4 + 8, saved, 4);
	/* Four extra zero bytes appended to the chunk: unconsumed words. */
	uint8_t *more = calloc(1, len + 4);
	memcpy(more, enc, len);
	uint32_t end;
	memcpy(&end, more, 4);
	end += 4;
	memcpy(more, &end, 4);
	ck_assert_int_eq(wc_rans_decode(more, len + 4, &dt, 64, dec, n), WC_E_CORRUPT);
	ck_assert_ptr_nonnull(strstr(wc_last_detail(), "word slots consumed"));
	/* A non-zero pad word. */
	memcpy(more, enc, len);
	size_t words = (len - 4 - 128) / 2;
	if (wc_ld16(more + len - 2) == 0 && words % 2 == 0) { /* the last slot is a pad */
		more[len - 2] = 1;
		ck_assert_int_eq(wc_rans_decode(more, len, &dt, 64, dec, n), WC_E_CORRUPT);
	}
	free(more);
	ck_assert_int_eq(wc_rans_decode(enc, len, &dt, 64, dec, n), WC_OK);
	free(enc);
	free(sym);
}
END_TEST

/* A chunk cut short by its last 4 bytes (with chunk_end adjusted) makes
 * lanes read past its words; on every decoder path. */
START_TEST(corrupt_read_past_words)
{
	wc_rans_isa_limit = _i + 1;
	wc_freqtab ft;
	uint8_t *sym;
	size_t len, n = 3000;
	uint8_t *enc = encode_sample(n, 4096, &ft, &sym, &len);
	wc_rans_dtab dt;
	wc_rans_dtab_build(&ft, &dt);
	uint8_t *dec = malloc(n), *cut = malloc(len - 4);
	memcpy(cut, enc, len - 4);
	uint32_t end;
	memcpy(&end, cut, 4);
	end -= 4;
	memcpy(cut, &end, 4);
	ck_assert_int_eq(wc_rans_decode(cut, len - 4, &dt, 4096, dec, n), WC_E_CORRUPT);
	ck_assert_msg(strstr(wc_last_detail(), "past") != NULL, "reason: %s", wc_last_detail());
	free(cut);
	free(dec);
	free(enc);
	free(sym);
}
END_TEST

START_TEST(empty_plane)
{
	wc_freqtab ft = {{0}};
	ft.freq[0] = ft.freq[1] = 2048;
	uint8_t out[8];
	size_t len = 99;
	ck_assert_int_eq(wc_rans_encode(NULL, 0, &ft, 32, out, sizeof out, &len), WC_OK);
	ck_assert_uint_eq(len, 0);
	wc_rans_dtab dt;
	wc_rans_dtab_build(&ft, &dt);
	ck_assert_int_eq(wc_rans_decode(out, 0, &dt, 32, out, 0), WC_OK);
	ck_assert_int_eq(wc_rans_decode(out, 4, &dt, 32, out, 0), WC_E_CORRUPT);
}
END_TEST

START_TEST(entropy_values)
{
	uint64_t h[256] = {0};
	ck_assert(wc_entropy_bits(h) == 0.0);
	h[0] = 5;
	ck_assert(wc_entropy_bits(h) == 0.0);
	h[1] = 5;
	ck_assert(fabs(wc_entropy_bits(h) - 1.0) < 1e-12);
	for (int s = 0; s < 256; s++)
		h[s] = 3;
	ck_assert(fabs(wc_entropy_bits(h) - 8.0) < 1e-12);
}
END_TEST

/* Output size = the table's ideal coding cost + a fixed per-chunk overhead
 * (chunk_end, 32 states that carry 16 bits of start state each, the pad),
 * and the table's cost is within 0.1% of the order-0 entropy. */
START_TEST(compression_close_to_entropy)
{
	size_t n = 1 << 20;
	const uint32_t C = 16384;
	uint8_t *sym = malloc(n);
	gen(D_BF16_EXP, sym, n, 5);
	uint64_t h[256];
	tu_hist(sym, n, h);
	wc_freqtab ft;
	ck_assert_int_eq(wc_freq_normalize(h, &ft), WC_OK);
	size_t len;
	ck_assert_int_eq(wc_rans_encoded_size(sym, n, &ft, C, &len), WC_OK);
	double ent_bytes = wc_entropy_bits(h) * (double)n / 8.0, cost_bytes = 0;
	for (int s = 0; s < 256; s++)
		if (h[s])
			cost_bytes += (double)h[s] * log2(4096.0 / ft.freq[s]) / 8.0;
	ck_assert_msg(cost_bytes / ent_bytes - 1.0 < 0.001, "table cost %.6f over entropy",
		      cost_bytes / ent_bytes - 1.0);
	size_t nchunks = n / C;
	ck_assert_msg((double)len < cost_bytes + nchunks * (4 + 128 + 2) && (double)len > cost_bytes,
		      "%zu bytes for an ideal %.0f + %zu chunks", len, cost_bytes, nchunks);
	free(sym);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("rans");
	TCase *tc = tcase_create("rans");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, roundtrip_all_sizes_and_distributions, 0, NPATHS * D_NDIST);
	tcase_add_loop_test(tc, roundtrip_chunk_boundaries, 0, NPATHS);
	tcase_add_test(tc, roundtrip_extreme_tables);
	tcase_add_test(tc, simd_and_scalar_agree);
	tcase_add_test(tc, advance2_matches_single_chunks);
	tcase_add_test(tc, normalize_is_valid_and_near_optimal);
	tcase_add_test(tc, normalize_rejects_single_symbol);
	tcase_add_test(tc, validate_rejects_bad_tables);
	tcase_add_test(tc, dtab_matches_format);
	tcase_add_test(tc, encode_rejects_bad_arguments);
	tcase_add_loop_test(tc, corrupt_bit_flips_detected, 0, NPATHS);
	tcase_add_test(tc, corrupt_truncation_and_bad_chunk_end);
	tcase_add_test(tc, corrupt_states_and_leftover_words);
	tcase_add_loop_test(tc, corrupt_read_past_words, 0, NPATHS);
	tcase_add_test(tc, empty_plane);
	tcase_add_test(tc, entropy_values);
	tcase_add_test(tc, compression_close_to_entropy);
	suite_add_tcase(s, tc);
	return check_run(s);
}
