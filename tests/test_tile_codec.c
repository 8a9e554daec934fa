/* test_tile_codec.c - tile payloads: round trips for every layout and plane
 * mode, the per-plane mode choice, and rejection of damaged payloads. */
#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "codec/codec_internal.h" /* wc_rans_isa_limit */
#include "codec/tile_codec.h"
#include "codec_testutil.h"

#define C_DEFAULT 4096u

/* Tables for each plane of data, built from its own histogram (NULL plan
 * entry where a plane has fewer than two symbols). */
typedef struct planset {
	wc_freqtab tabs[WC_MAX_PLANES];
	wc_plane_plan plan[WC_MAX_PLANES];
} planset;

static void make_plan(wc_layout l, const uint8_t *data, size_t nbytes, int use_rans, int zstd,
		      planset *ps)
{
	size_t n = nbytes / l.elem_size;
	uint8_t *planes[WC_MAX_PLANES] = {0};
	for (unsigned p = 0; p < l.nplanes; p++)
		planes[p] = malloc(n + 1);
	wc_planes_split(l, data, n, planes);
	for (unsigned p = 0; p < l.nplanes; p++) {
		uint64_t h[256];
		tu_hist(planes[p], n, h);
		ps->plan[p] = (wc_plane_plan){NULL, p, zstd};
		if (use_rans && wc_freq_normalize(h, &ps->tabs[p]) == WC_OK)
			ps->plan[p].table = &ps->tabs[p];
		else
			ps->tabs[p] = (wc_freqtab){{2048, 2048}};
		free(planes[p]);
	}
}

/* Decode by wc_tile_decode_part in nparts parts, last part first (each part
 * stands alone); the first error of any part, else WC_OK. */
static int decode_parts(wc_layout l, const uint8_t *payload, size_t len, const wc_freqtab *tabs,
			uint32_t ntables, uint32_t C, uint8_t *out, size_t nbytes, unsigned nparts)
{
	int err = WC_OK;
	for (unsigned p = nparts; p-- > 0;) {
		int e = wc_tile_decode_part(l, payload, len, tabs, ntables, C, NULL, 0, out, nbytes, p, nparts);
		if (e != WC_OK && err == WC_OK)
			err = e;
	}
	return err;
}

/* Encode, check the descriptor sizes, decode whole and in 2, 3 and 7 parts,
 * compare. Returns the payload. */
static uint8_t *roundtrip(wc_layout l, const uint8_t *data, size_t nbytes, const planset *ps,
			  uint32_t C, size_t *len_out, uint64_t plane_bytes[WC_MAX_PLANES])
{
	size_t cap = wc_tile_encode_bound(l, nbytes, C), len = 0;
	uint8_t *payload = malloc(cap + 1), *out = malloc(nbytes + 1);
	ck_assert_int_eq(wc_tile_encode(l, data, nbytes, ps->plan, C, payload, cap, &len, plane_bytes),
			 WC_OK);
	ck_assert_uint_le(len, cap);
	out[nbytes] = 0x77;
	ck_assert_int_eq(wc_tile_decode(l, payload, len, ps->tabs, l.nplanes, C, out, nbytes), WC_OK);
	ck_assert(memcmp(out, data, nbytes) == 0);
	ck_assert_uint_eq(out[nbytes], 0x77);
	const unsigned nparts[] = {2, 3, 7};
	for (size_t k = 0; k < sizeof nparts / sizeof nparts[0]; k++) {
		memset(out, 0xa5, nbytes + 1);
		ck_assert_int_eq(decode_parts(l, payload, len, ps->tabs, l.nplanes, C, out, nbytes, nparts[k]),
				 WC_OK);
		ck_assert_msg(memcmp(out, data, nbytes) == 0, "%zu bytes in %u parts", nbytes, nparts[k]);
		ck_assert_uint_eq(out[nbytes], 0xa5);
	}
	ck_assert_int_eq(wc_tile_decode_part(l, payload, len, ps->tabs, l.nplanes, C, NULL, 0, out, nbytes, 3, 3),
			 WC_E_INVAL);
	wc_plane_view v[WC_MAX_PLANES];
	ck_assert_int_eq(wc_tile_parse(l, payload, len, nbytes, l.nplanes, v), WC_OK);
	for (unsigned p = 0; p < l.nplanes; p++)
		ck_assert_uint_eq(v[p].size, plane_bytes[p]);
	free(out);
	*len_out = len;
	return payload;
}

static void gen_data(const char *dtype, int kind, uint8_t *buf, size_t nbytes, uint64_t seed)
{
	wc_layout l = wc_layout_for_dtype(dtype);
	size_t n = nbytes / l.elem_size;
	if (kind == 0) { /* realistic weights (integers: small values) */
		if (!strcmp(dtype, "BF16"))
			tu_weights_bf16(buf, n, 0.02, seed);
		else if (!strcmp(dtype, "F16"))
			tu_weights_f16(buf, n, 0.02, seed);
		else if (!strcmp(dtype, "F32"))
			tu_weights_f32(buf, n, 0.02, seed);
		else
			for (size_t i = 0; i < nbytes; i++)
				buf[i] = (i % l.elem_size == 0) ? (uint8_t)(tu_next(&seed) % 7) : 0;
	} else if (kind == 1) { /* uniform random bytes */
		for (size_t i = 0; i < nbytes; i++)
			buf[i] = (uint8_t)tu_next(&seed);
	} else { /* constant elements */
		for (size_t i = 0; i < nbytes; i++)
			buf[i] = (uint8_t)(0x30 + i % l.elem_size);
	}
}

static const char *const dtypes[] = {"BF16", "F32", "F16", "I32", "U16", "I64", "U8", "BOOL"};

/* rANS decoder paths: _i % NPATHS + 1 caps wc_rans_isa_limit (scalar, AVX2,
 * AVX-512; a path the CPU lacks falls back to the best it has). */
#define NPATHS 3

/* _i = dtype * NPATHS + path. */
START_TEST(roundtrip_every_layout)
{
	const char *dtype = dtypes[_i / NPATHS];
	wc_rans_isa_limit = _i % NPATHS + 1;
	wc_layout l = wc_layout_for_dtype(dtype);
	const size_t counts[] = {0, 1, 31, 32, 33, 4095, 4096, 4097, 20000};
	uint8_t *buf = malloc(20000 * 8);
	for (int kind = 0; kind < 3; kind++) {
		for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
			size_t nbytes = counts[c] * l.elem_size;
			gen_data(dtype, kind, buf, nbytes, 100 + c);
			for (int cfg = 0; cfg < 4; cfg++) {
				planset ps;
				make_plan(l, buf, nbytes, cfg & 1, (cfg >> 1) & 1, &ps);
				uint64_t pb[WC_MAX_PLANES];
				size_t len;
				uint32_t C = cfg == 3 ? 32 : C_DEFAULT;
				free(roundtrip(l, buf, nbytes, &ps, C, &len, pb));
			}
		}
	}
	free(buf);
}
END_TEST

START_TEST(mode_choice)
{
	/* BF16 weights: exponent plane rANS, sign|mantissa plane RAW. */
	wc_layout l = wc_layout_for_dtype("BF16");
	size_t n = 50000, nbytes = 2 * n, len;
	uint8_t *buf = malloc(nbytes);
	tu_weights_bf16(buf, n, 0.02, 3);
	planset ps;
	make_plan(l, buf, nbytes, 1, 0, &ps);
	uint64_t pb[WC_MAX_PLANES];
	uint8_t *payload = roundtrip(l, buf, nbytes, &ps, C_DEFAULT, &len, pb);
	wc_plane_view v[WC_MAX_PLANES];
	ck_assert_int_eq(wc_tile_parse(l, payload, len, nbytes, 2, v), WC_OK);
	ck_assert_uint_eq(v[0].mode, WC_PLANE_RANS);
	ck_assert_uint_eq(v[0].table, 0);
	ck_assert_uint_lt(v[0].size, n / 2);
	ck_assert_uint_eq(v[1].mode, WC_PLANE_RAW);
	ck_assert_uint_eq(v[1].size, n);
	ck_assert_uint_eq(v[1].table, WC_NO_TABLE);
	ck_assert_uint_eq((size_t)(v[0].body - payload), 4 + 24);
	free(payload);

	/* Constant data: every plane CONST with its byte. */
	for (size_t i = 0; i < n; i++) {
		buf[2 * i] = 0x80;
		buf[2 * i + 1] = 0x3f;
	}
	payload = roundtrip(l, buf, nbytes, &ps, C_DEFAULT, &len, pb);
	ck_assert_uint_eq(len, 4 + 24);
	ck_assert_int_eq(wc_tile_parse(l, payload, len, nbytes, 2, v), WC_OK);
	ck_assert_uint_eq(v[0].mode, WC_PLANE_CONST);
	ck_assert_uint_eq(v[0].value, 127);
	ck_assert_uint_eq(v[1].mode, WC_PLANE_CONST);
	ck_assert_uint_eq(v[1].value, 0);
	free(payload);

	/* Small integers with zstd allowed: repetitive planes go ZSTD or CONST. */
	wc_layout li = wc_layout_for_dtype("I32");
	for (size_t i = 0; i < n / 2; i++) {
		int32_t x = (int32_t)(i % 300);
		memcpy(buf + 4 * i, &x, 4);
	}
	make_plan(li, buf, nbytes, 0, 1, &ps);
	payload = roundtrip(li, buf, nbytes, &ps, C_DEFAULT, &len, pb);
	ck_assert_int_eq(wc_tile_parse(li, payload, len, nbytes, 4, v), WC_OK);
	ck_assert_uint_eq(v[0].mode, WC_PLANE_CONST);
	ck_assert_uint_eq(v[3].mode, WC_PLANE_ZSTD);
	ck_assert_uint_lt(v[3].size, 2000);
	free(payload);
	free(buf);
}
END_TEST

/* A plane rANS would shrink by under 1/128 stays RAW (decodes at memcpy speed). */
START_TEST(near_random_plane_stays_raw)
{
	wc_layout l = wc_layout_for_dtype("U8");
	size_t n = 1 << 18, len;
	uint8_t *buf = malloc(n);
	uint64_t seed = 4;
	for (size_t i = 0; i < n; i++) /* 250 equiprobable values: 7.966 bits, 0.4% below RAW */
		buf[i] = (uint8_t)(tu_next(&seed) % 250);
	planset ps;
	make_plan(l, buf, n, 1, 0, &ps);
	uint64_t pb[WC_MAX_PLANES];
	uint8_t *payload = roundtrip(l, buf, n, &ps, 65536, &len, pb);
	size_t rans_len;
	ck_assert_int_eq(wc_rans_encoded_size(buf, n, &ps.tabs[0], 65536, &rans_len), WC_OK);
	ck_assert_uint_lt(rans_len, n); /* rANS is smaller ... */
	wc_plane_view v[WC_MAX_PLANES];
	ck_assert_int_eq(wc_tile_parse(l, payload, len, n, 1, v), WC_OK);
	ck_assert_uint_eq(v[0].mode, WC_PLANE_RAW); /* ... but not by enough */
	free(payload);
	/* 128 values (7 bits): 12% smaller, so rANS. */
	for (size_t i = 0; i < n; i++)
		buf[i] &= 127;
	make_plan(l, buf, n, 1, 0, &ps);
	payload = roundtrip(l, buf, n, &ps, 65536, &len, pb);
	ck_assert_int_eq(wc_tile_parse(l, payload, len, n, 1, v), WC_OK);
	ck_assert_uint_eq(v[0].mode, WC_PLANE_RANS);
	free(payload);
	free(buf);
}
END_TEST

/* n bytes as one U8 plane with a table of their own: roundtrip() (which
 * checks the decode whole and in parts), the plane's view in v[0], the
 * payload returned (len bytes) and the table in *ps. */
static uint8_t *roundtrip_u8(const uint8_t *buf, size_t n, planset *ps, size_t *len, wc_plane_view *v)
{
	const wc_layout l = wc_layout_for_dtype("U8");
	make_plan(l, buf, n, 1, 0, ps);
	uint64_t pb[WC_MAX_PLANES];
	uint8_t *payload = roundtrip(l, buf, n, ps, C_DEFAULT, len, pb);
	ck_assert_int_eq(wc_tile_parse(l, payload, *len, n, 1, v), WC_OK);
	return payload;
}

/* Planes whose symbols all fit in 1, 2 or 4 bits go PACK (smaller than RAW,
 * as fast to decode) unless rANS saves more than 1/128 of the packed size;
 * round trips (whole and in parts, every tail length against the 32-symbol
 * blocks and the 2-symbol bytes); a damaged PACK descriptor or body is
 * refused. */
START_TEST(small_symbols_pack)
{
	wc_layout l = wc_layout_for_dtype("U8");
	const size_t sizes[] = { 1, 2, 3, 31, 33, 1001, 2048 * 3 + 5, 1 << 17 };
	const unsigned bits[] = { 1, 2, 4 };
	uint64_t seed = 11;
	for (size_t b = 0; b < 3; b++)
		for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
			const size_t n = sizes[s];
			uint8_t *buf = malloc(n);
			for (size_t i = 0; i < n; i++) /* equiprobable: rANS saves nothing */
				buf[i] = (uint8_t)(tu_next(&seed) % (1u << bits[b]));
			/* the widest symbol, and (past one symbol) never CONST */
			buf[n / 2] = 0;
			buf[0] = (uint8_t)((1u << bits[b]) - 1);
			planset ps;
			size_t len;
			wc_plane_view v[WC_MAX_PLANES];
			uint8_t *payload = roundtrip_u8(buf, n, &ps, &len, v);
			if (n == 1) { /* one symbol: CONST */
				ck_assert_uint_eq(v[0].mode, WC_PLANE_CONST);
				free(payload);
				free(buf);
				continue;
			}
			ck_assert_msg(v[0].mode == WC_PLANE_PACK, "%u bits, %zu symbols: mode %u", bits[b], n,
				      v[0].mode);
			ck_assert_uint_eq(v[0].value, bits[b]);
			ck_assert_uint_eq(v[0].size, (n * bits[b] + 7) / 8);
			ck_assert_uint_eq(v[0].table, WC_NO_TABLE);
			uint8_t *out = malloc(n);
			/* the last byte's unused bits must be 0 */
			if (n * bits[b] % 8) {
				uint8_t *bad = malloc(len);
				memcpy(bad, payload, len);
				bad[v[0].body - payload + v[0].size - 1] |= 0x80;
				ck_assert_int_eq(wc_tile_decode(l, bad, len, ps.tabs, 1, C_DEFAULT, out, n),
						 WC_E_CORRUPT);
				free(bad);
			}
			/* 3 bits a symbol, 0 bits and a wrong body size are refused */
			uint8_t *bad = malloc(len + 4);
			memcpy(bad, payload, len);
			bad[5] = 3;
			ck_assert_int_eq(wc_tile_decode(l, bad, len, ps.tabs, 1, C_DEFAULT, out, n), WC_E_CORRUPT);
			bad[5] = 0;
			ck_assert_int_eq(wc_tile_decode(l, bad, len, ps.tabs, 1, C_DEFAULT, out, n), WC_E_CORRUPT);
			bad[5] = (uint8_t)bits[b];
			wc_st32(bad + 12, v[0].size + 4);
			memset(bad + len, 0, 4);
			ck_assert_int_eq(wc_tile_decode(l, bad, len + 4, ps.tabs, 1, C_DEFAULT, out, n),
					 WC_E_CORRUPT);
			free(bad);
			free(out);
			free(payload);
			free(buf);
		}

	/* Skewed 4-bit symbols (mostly 0): rANS saves far more than 1/128 of
	 * the packed size, so it stays rANS. */
	const size_t n = 1 << 16;
	uint8_t *buf = malloc(n);
	for (size_t i = 0; i < n; i++)
		buf[i] = tu_next(&seed) % 16 == 0 ? (uint8_t)(tu_next(&seed) % 16) : 0;
	buf[0] = 15;
	planset ps;
	size_t len;
	wc_plane_view v[WC_MAX_PLANES];
	uint8_t *payload = roundtrip_u8(buf, n, &ps, &len, v);
	ck_assert_uint_eq(v[0].mode, WC_PLANE_RANS);
	free(payload);
	free(buf);
}
END_TEST

START_TEST(encode_errors)
{
	wc_layout l = wc_layout_for_dtype("BF16");
	uint8_t buf[4000], out[8000];
	tu_weights_bf16(buf, 2000, 0.02, 1);
	planset ps;
	make_plan(l, buf, 2000, 1, 0, &ps); /* table from the first half only */
	size_t len;
	/* odd byte count */
	ck_assert_int_eq(wc_tile_encode(l, buf, 3, ps.plan, C_DEFAULT, out, sizeof out, &len, NULL), WC_E_INVAL);
	/* a symbol absent from the table */
	wc_freqtab narrow = {{0}};
	narrow.freq[0] = narrow.freq[1] = 2048;
	ps.plan[0].table = &narrow;
	ck_assert_int_eq(wc_tile_encode(l, buf, 4000, ps.plan, C_DEFAULT, out, sizeof out, &len, NULL),
			 WC_E_INVAL);
	make_plan(l, buf, 4000, 1, 0, &ps);
	ck_assert_int_eq(wc_tile_encode(l, buf, 4000, ps.plan, 33, out, sizeof out, &len, NULL), WC_E_INVAL);
	ck_assert_int_eq(wc_tile_encode(l, buf, 4000, ps.plan, C_DEFAULT, out, sizeof out, &len, NULL), WC_OK);
	size_t need = len;
	for (size_t cap = 0; cap < need; cap += 97)
		ck_assert_int_eq(wc_tile_encode(l, buf, 4000, ps.plan, C_DEFAULT, out, cap, &len, NULL),
				 WC_E_RANGE);
	ck_assert_int_eq(wc_tile_encode(l, buf, 4000, ps.plan, C_DEFAULT, out, need, &len, NULL), WC_OK);
	wc_layout bad = {WC_LAYOUT_BF16, 2, 3};
	ck_assert_int_eq(wc_tile_encode(bad, buf, 4000, ps.plan, C_DEFAULT, out, sizeof out, &len, NULL),
			 WC_E_INVAL);
}
END_TEST

/* A BF16 tile (rANS + RAW) and an I32 tile (CONST + ZSTD + RAW) for damage tests. */
typedef struct sample {
	wc_layout l;
	uint8_t *data, *payload;
	size_t nbytes, len;
	planset ps;
} sample;

static void make_sample(sample *s, const char *dtype, size_t n)
{
	s->l = wc_layout_for_dtype(dtype);
	s->nbytes = n * s->l.elem_size;
	s->data = malloc(s->nbytes);
	if (!strcmp(dtype, "BF16")) {
		tu_weights_bf16(s->data, n, 0.02, 8);
		make_plan(s->l, s->data, s->nbytes, 1, 0, &s->ps);
	} else {
		uint64_t seed = 5;
		for (size_t i = 0; i < n; i++) {
			int32_t x = (int32_t)(i % 50) * 1000 + (int32_t)(tu_next(&seed) % 3);
			memcpy(s->data + 4 * i, &x, 4);
		}
		make_plan(s->l, s->data, s->nbytes, 1, 1, &s->ps);
	}
	uint64_t pb[WC_MAX_PLANES];
	s->payload = roundtrip(s->l, s->data, s->nbytes, &s->ps, 256, &s->len, pb);
}

static void free_sample(sample *s)
{
	free(s->data);
	free(s->payload);
}

/* Decode a copy; WC_OK only if the output is also right, and a distinct
 * marker (-1) for a silently wrong decode. The same copy decoded in 4 parts
 * (one thread per part, as the CPU backend splits a lone tile) must end the
 * same way: a damaged chunk fails the part that holds it. */
static int decode_copy(const sample *s, const uint8_t *payload, size_t len, uint32_t ntables)
{
	uint8_t *copy = malloc(len ? len : 1), *out = malloc(s->nbytes);
	memcpy(copy, payload, len); /* exact-size copy: ASan catches over-reads */
	int e = wc_tile_decode(s->l, copy, len, s->ps.tabs, ntables, 256, out, s->nbytes);
	if (e == WC_OK && memcmp(out, s->data, s->nbytes) != 0)
		e = -1;
	memset(out, 0, s->nbytes);
	int ep = decode_parts(s->l, copy, len, s->ps.tabs, ntables, 256, out, s->nbytes, 4);
	if (ep == WC_OK && memcmp(out, s->data, s->nbytes) != 0)
		ep = -1;
	ck_assert_msg(ep == e, "whole tile %d, in parts %d", e, ep);
	free(copy);
	free(out);
	return e;
}

START_TEST(corrupt_truncated_payloads)
{
	const char *types[] = {"BF16", "I32"};
	for (int t = 0; t < 2; t++) {
		sample s;
		make_sample(&s, types[t], 3000);
		for (size_t l = 0; l < s.len; l++)
			ck_assert_int_eq(decode_copy(&s, s.payload, l, s.l.nplanes), WC_E_CORRUPT);
		ck_assert_int_eq(decode_copy(&s, s.payload, s.len, s.l.nplanes), WC_OK);
		free_sample(&s);
	}
}
END_TEST

START_TEST(corrupt_headers_and_descriptors)
{
	sample s;
	make_sample(&s, "BF16", 3000);
	uint8_t *p = s.payload;
	/* Any change to a header or descriptor byte is rejected (the descriptor
	 * fields have no free bits; value/table/size are fully checked). */
	for (size_t i = 0; i < WC_TILE_HEADER_BYTES(2); i++) {
		for (int bit = 0; bit < 8; bit++) {
			p[i] ^= (uint8_t)(1u << bit);
			ck_assert_msg(decode_copy(&s, p, s.len, 2) == WC_E_CORRUPT, "byte %zu bit %d", i, bit);
			p[i] ^= (uint8_t)(1u << bit);
		}
	}
	/* Table index out of range, and a table that fails validation. */
	ck_assert_int_eq(decode_copy(&s, p, s.len, 0), WC_E_CORRUPT);
	wc_freqtab saved = s.ps.tabs[0];
	s.ps.tabs[0].freq[200] += 1;
	ck_assert_int_eq(decode_copy(&s, p, s.len, 2), WC_E_CORRUPT);
	s.ps.tabs[0] = saved;
	/* Wrong tile size for the payload. */
	uint8_t *out = malloc(s.nbytes + 2);
	ck_assert_int_eq(wc_tile_decode(s.l, p, s.len, s.ps.tabs, 2, 256, out, s.nbytes - 2), WC_E_CORRUPT);
	ck_assert_int_eq(wc_tile_decode(s.l, p, s.len, s.ps.tabs, 2, 256, out, s.nbytes + 2), WC_E_CORRUPT);
	ck_assert_int_eq(wc_tile_decode(s.l, p, s.len, s.ps.tabs, 2, 256, out, s.nbytes - 1), WC_E_CORRUPT);
	/* Wrong layout for the payload. */
	ck_assert_int_eq(wc_tile_decode(wc_layout_for_dtype("F32"), p, s.len, s.ps.tabs, 2, 256, out,
					s.nbytes), WC_E_CORRUPT);
	free(out);
	ck_assert_int_eq(decode_copy(&s, p, s.len, 2), WC_OK);
	free_sample(&s);
}
END_TEST

/* Bit flips in rANS and zstd bodies are caught by the codec itself: always
 * for zstd (frame checksum), nearly always for rANS (final states; a flip
 * can turn a stream into the valid encoding of other symbols, see
 * test_rans.c), never silently for the structural fields. */
START_TEST(corrupt_entropy_bodies)
{
	wc_rans_isa_limit = _i + 1;
	const char *types[] = {"BF16", "I32"};
	for (int t = 0; t < 2; t++) {
		sample s;
		make_sample(&s, types[t], 3000);
		wc_plane_view v[WC_MAX_PLANES];
		ck_assert_int_eq(wc_tile_parse(s.l, s.payload, s.len, s.nbytes, s.l.nplanes, v), WC_OK);
		int checked = 0, missed = 0;
		for (unsigned p = 0; p < s.l.nplanes; p++) {
			if (v[p].mode != WC_PLANE_RANS && v[p].mode != WC_PLANE_ZSTD)
				continue;
			size_t off = (size_t)(v[p].body - s.payload);
			for (size_t bit = 0; bit < 8 * (size_t)v[p].size; bit += (v[p].mode == WC_PLANE_ZSTD ? 1 : 3)) {
				s.payload[off + bit / 8] ^= (uint8_t)(1u << (bit % 8));
				int e = decode_copy(&s, s.payload, s.len, s.l.nplanes);
				if (e == -1 && v[p].mode == WC_PLANE_RANS)
					missed++;
				else if (e == WC_OK && v[p].mode == WC_PLANE_ZSTD)
					; /* an unused frame header bit: output still right */
				else
					ck_assert_msg(e == WC_E_CORRUPT, "%s plane %u bit %zu: %d", types[t], p, bit, e);
				s.payload[off + bit / 8] ^= (uint8_t)(1u << (bit % 8));
				checked++;
			}
		}
		ck_assert_int_gt(checked, 100);
		ck_assert_msg(missed * 1000 <= checked, "%d of %d flips undetected", missed, checked);
		free_sample(&s);
	}
}
END_TEST

/* The per-thread decoding-table cache must follow table contents: two
 * tensors with different tables at the same table index and plane decode
 * alternately, and tables edited in place between calls. */
START_TEST(dtab_cache_follows_tables)
{
	wc_layout l = wc_layout_for_dtype("BF16");
	size_t n = 20000, nbytes = 2 * n;
	uint8_t *a = malloc(nbytes), *b = malloc(nbytes), *out = malloc(nbytes);
	tu_weights_bf16(a, n, 0.02, 1);
	tu_weights_bf16(b, n, 2.0, 2); /* other exponents entirely */
	planset pa, pb;
	make_plan(l, a, nbytes, 1, 0, &pa);
	make_plan(l, b, nbytes, 1, 0, &pb);
	uint64_t sizes[WC_MAX_PLANES];
	size_t la, lb;
	uint8_t *qa = roundtrip(l, a, nbytes, &pa, 1024, &la, sizes);
	uint8_t *qb = roundtrip(l, b, nbytes, &pb, 1024, &lb, sizes);
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(wc_tile_decode(l, qa, la, pa.tabs, 2, 1024, out, nbytes), WC_OK);
		ck_assert(memcmp(out, a, nbytes) == 0);
		ck_assert_int_eq(wc_tile_decode(l, qb, lb, pb.tabs, 2, 1024, out, nbytes), WC_OK);
		ck_assert(memcmp(out, b, nbytes) == 0);
	}
	/* Same address, new contents: tile a's table overwritten by b's. */
	wc_freqtab keep = pa.tabs[0];
	pa.tabs[0] = pb.tabs[0];
	ck_assert_int_eq(wc_tile_decode(l, qb, lb, pa.tabs, 2, 1024, out, nbytes), WC_OK);
	ck_assert(memcmp(out, b, nbytes) == 0);
	pa.tabs[0] = keep;
	ck_assert_int_eq(wc_tile_decode(l, qa, la, pa.tabs, 2, 1024, out, nbytes), WC_OK);
	ck_assert(memcmp(out, a, nbytes) == 0);
	free(qa);
	free(qb);
	free(a);
	free(b);
	free(out);
}
END_TEST

/* Many threads decoding different tiles at once (per-thread scratch). */
typedef struct job {
	const sample *s;
	int ok;
} job;

static void *decode_many(void *arg)
{
	job *j = arg;
	uint8_t *out = malloc(j->s->nbytes);
	j->ok = 1;
	for (int i = 0; i < 50 && j->ok; i++)
		j->ok = wc_tile_decode(j->s->l, j->s->payload, j->s->len, j->s->ps.tabs, j->s->l.nplanes, 256,
				       out, j->s->nbytes) == WC_OK &&
			memcmp(out, j->s->data, j->s->nbytes) == 0;
	free(out);
	return NULL;
}

START_TEST(concurrent_decoders)
{
	sample s[2];
	make_sample(&s[0], "BF16", 30000);
	make_sample(&s[1], "I32", 30000);
	pthread_t t[6];
	job j[6];
	for (int i = 0; i < 6; i++) {
		j[i] = (job){&s[i % 2], 0};
		ck_assert_int_eq(pthread_create(&t[i], NULL, decode_many, &j[i]), 0);
	}
	for (int i = 0; i < 6; i++) {
		pthread_join(t[i], NULL);
		ck_assert_msg(j[i].ok, "thread %d decoded wrong bytes or failed", i);
	}
	free_sample(&s[0]);
	free_sample(&s[1]);
}
END_TEST

START_TEST(parse_views)
{
	sample s;
	make_sample(&s, "I32", 3000);
	wc_plane_view v[WC_MAX_PLANES];
	ck_assert_int_eq(wc_tile_parse(s.l, s.payload, s.len, s.nbytes, 4, v), WC_OK);
	size_t end = WC_TILE_HEADER_BYTES(4);
	for (unsigned p = 0; p < 4; p++) {
		size_t off = (size_t)(v[p].body - s.payload);
		ck_assert_uint_eq(off % 4, 0);
		ck_assert_uint_eq(off, (end + 3) & ~(size_t)3);
		end = off + v[p].size;
	}
	ck_assert_uint_eq(end, s.len);
	free_sample(&s);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("tile_codec");
	TCase *tc = tcase_create("tile");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, roundtrip_every_layout, 0, NPATHS * (int)(sizeof dtypes / sizeof dtypes[0]));
	tcase_add_test(tc, mode_choice);
	tcase_add_test(tc, near_random_plane_stays_raw);
	tcase_add_test(tc, small_symbols_pack);
	tcase_add_test(tc, encode_errors);
	tcase_add_test(tc, corrupt_truncated_payloads);
	tcase_add_test(tc, corrupt_headers_and_descriptors);
	tcase_add_loop_test(tc, corrupt_entropy_bodies, 0, NPATHS);
	tcase_add_test(tc, parse_views);
	tcase_add_test(tc, dtab_cache_follows_tables);
	tcase_add_test(tc, concurrent_decoders);
	suite_add_tcase(s, tc);
	return check_run(s);
}
