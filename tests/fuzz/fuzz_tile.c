/* fuzz_tile.c - fuzz target for the tile decoder (codec/tile_codec.h).
 *
 * Two properties, checked on every input (abort() on a violation, so a
 * fuzzer records the input; tests/fuzz_corpus.sh replays inputs in make check):
 *
 * 1. Round trip. The input's tail is a tile of one of ten layouts (byte,
 *    shuffled, BF16, F32, four dictionary sizes); it is encoded with tables
 *    built from its own planes, as the packer does, then decoded whole by
 *    each rANS path the CPU has (scalar, AVX2, AVX-512) and in 2, 3 and 5
 *    parts (wc_tile_decode_part): every decode must give the input back.
 * 2. Damage. Up to three bytes of the payload are changed (positions and
 *    values from the input), or the input's tail is taken as a payload as
 *    it is. Every path must then end the same way: the same error code, and
 *    when it succeeds the same bytes; a decode in parts must fail exactly
 *    when the whole decode fails. Memory errors are the sanitizers' to find.
 *
 * Input: byte 0 layout, byte 1 chunk size and flags, byte 2 damage count,
 * 9 bytes of damage (3 x u16 position, u8 xor), then the tile's bytes
 * (at most 64 KiB are used). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/codec_internal.h" /* wc_rans_isa_limit */
#include "codec/tile_codec.h"
#include "codec_testutil.h" /* tu_hist */
#include "fuzz/fuzz_target.h"

#define HEAD 12u
#define MAX_DATA (64u << 10)

static void fail(const char *what)
{
	fprintf(stderr, "fuzz_tile: %s\n", what);
	abort();
}

typedef struct tile_case {
	wc_layout l;
	uint32_t C; /* chunk symbols */
	const uint8_t *dict;
	uint32_t entries;
	wc_freqtab tabs[WC_MAX_PLANES];
	uint32_t ntables;
	size_t nbytes;
} tile_case;

static int decode(const tile_case *tc, const uint8_t *p, size_t len, uint8_t *out)
{
	return wc_tile_decode_dict(tc->l, p, len, tc->tabs, tc->ntables, tc->C, tc->dict, tc->entries, out,
				   tc->nbytes);
}

/* The first error of nparts part decodes (last part first), else WC_OK. */
static int decode_parts(const tile_case *tc, const uint8_t *p, size_t len, uint8_t *out, unsigned nparts)
{
	int err = WC_OK;
	for (unsigned k = nparts; k-- > 0;) {
		int e = wc_tile_decode_part(tc->l, p, len, tc->tabs, tc->ntables, tc->C, tc->dict, tc->entries,
					    out, tc->nbytes, k, nparts);
		if (e != WC_OK && err == WC_OK)
			err = e;
	}
	return err;
}

/* Decode p by every rANS path and in parts. want != NULL: each must succeed
 * and give want. Otherwise each must end as the first (AVX-512 or the best
 * the CPU has) does. */
static void check_paths(const tile_case *tc, const uint8_t *p, size_t len, const uint8_t *want)
{
	size_t n = tc->nbytes;
	uint8_t *ref = malloc(n + 1), *out = malloc(n + 1);
	if (!ref || !out)
		fail("out of memory");
	int best = wc_rans_cpu_isa(), ref_err = 0;
	for (int isa = best; isa >= WC_RANS_ISA_SCALAR; isa--) {
		wc_rans_isa_limit = isa;
		uint8_t *o = isa == best ? ref : out;
		memset(o, 0xa5, n + 1);
		int e = decode(tc, p, len, o);
		if (o[n] != 0xa5)
			fail("decode wrote past the tile");
		if (want && (e != WC_OK || memcmp(o, want, n)))
			fail("round trip: decoded bytes differ from the input");
		if (isa == best)
			ref_err = e;
		else if (e != ref_err || (e == WC_OK && memcmp(out, ref, n)))
			fail("rANS paths disagree");
	}
	wc_rans_isa_limit = 0;
	static const unsigned nparts[] = {2, 3, 5};
	for (size_t k = 0; k < sizeof nparts / sizeof nparts[0]; k++) {
		memset(out, 0xa5, n + 1);
		int e = decode_parts(tc, p, len, out, nparts[k]);
		if (out[n] != 0xa5)
			fail("part decode wrote past the tile");
		if ((e == WC_OK) != (ref_err == WC_OK))
			fail("part decode and whole decode disagree on success");
		if (e == WC_OK && memcmp(out, ref, n))
			fail("part decode and whole decode disagree on bytes");
	}
	free(ref);
	free(out);
}

static const wc_layout layouts[] = {
	{WC_LAYOUT_BYTES, 1, 1}, {WC_LAYOUT_SHUFFLE, 2, 2}, {WC_LAYOUT_SHUFFLE, 4, 4},
	{WC_LAYOUT_SHUFFLE, 8, 8}, {WC_LAYOUT_BF16, 2, 2}, {WC_LAYOUT_F32, 4, 4},
	{WC_LAYOUT_DICT, 1, 0},  {WC_LAYOUT_DICT, 2, 0},   {WC_LAYOUT_DICT, 4, 0},
	{WC_LAYOUT_DICT, 8, 0},
};

/* Tables from each plane's histogram, as the packer builds them; a plane
 * of one symbol gets no table (it is stored CONST or RAW). */
static void plan_tables(tile_case *tc, uint8_t *const planes[], size_t nelem, int rans, int zstd,
			wc_plane_plan plan[])
{
	tc->ntables = tc->l.nplanes;
	for (unsigned p = 0; p < tc->l.nplanes; p++) {
		uint64_t h[256];
		tu_hist(planes[p], nelem, h);
		plan[p] = (wc_plane_plan){NULL, p, zstd};
		if (rans && wc_freq_normalize(h, &tc->tabs[p]) == WC_OK)
			plan[p].table = &tc->tabs[p];
		else
			tc->tabs[p] = (wc_freqtab){{2048, 2048}};
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t size)
{
	if (size < HEAD)
		return 0;
	static const uint32_t chunks[] = {32, 64, 96, 4096};
	tile_case tc = {.l = layouts[in[0] % (sizeof layouts / sizeof layouts[0])], .C = chunks[in[1] & 3]};
	int zstd = in[1] & 4, rans = !(in[1] & 8), as_payload = (in[1] & 0x30) == 0x30;
	unsigned ndamage = in[2] % 4;
	const uint8_t *data = in + HEAD;
	size_t dlen = size - HEAD < MAX_DATA ? size - HEAD : MAX_DATA;

	if (as_payload) {
		/* The tail as a payload of a BF16 or byte tile of in[3..4] elements,
		 * with two fixed tables (flat and skewed). */
		tc.l = in[0] & 1 ? layouts[4] : layouts[0];
		tc.nbytes = (size_t)(in[3] | in[4] << 8) % 8192 * tc.l.elem_size;
		for (unsigned s = 0; s < 256; s++)
			tc.tabs[0].freq[s] = 16;
		tc.tabs[1] = (wc_freqtab){{3000, 1000, 64, 16, 8, 4, 2, 1, 1}};
		tc.ntables = 2;
		check_paths(&tc, data, dlen, NULL);
		return 0;
	}

	size_t nelem = dlen / tc.l.elem_size, nbytes = nelem * tc.l.elem_size;
	if (nelem == 0)
		return 0;
	tc.nbytes = nbytes;
	uint8_t *dict = NULL, *planes[WC_MAX_PLANES] = {0};
	wc_plane_plan plan[WC_MAX_PLANES];
	if (tc.l.kind == WC_LAYOUT_DICT) {
		dict = malloc((size_t)WC_DICT_MAX_ENTRIES * tc.l.elem_size);
		if (!dict || wc_dict_build(data, nelem, tc.l.elem_size, dict, &tc.entries, NULL) != WC_OK)
			fail("wc_dict_build");
		tc.l = wc_layout_dict(tc.l.elem_size, tc.entries);
		tc.dict = dict;
	}
	for (unsigned p = 0; p < tc.l.nplanes; p++)
		if (!(planes[p] = malloc(nelem)))
			fail("out of memory");
	if (tc.l.kind == WC_LAYOUT_DICT) {
		if (wc_dict_index(tc.l, dict, tc.entries, data, nelem, planes) != WC_OK)
			fail("wc_dict_index");
	} else {
		wc_planes_split(tc.l, data, nelem, planes);
	}
	plan_tables(&tc, planes, nelem, rans, zstd, plan);

	size_t cap = wc_tile_encode_bound(tc.l, nbytes, tc.C), len = 0;
	uint8_t *payload = malloc(cap);
	if (!payload)
		fail("out of memory");
	wc_err e = tc.l.kind == WC_LAYOUT_DICT
			   ? wc_tile_encode_dict(tc.l, data, nbytes, dict, tc.entries, plan, tc.C, payload, cap,
						 &len, NULL)
			   : wc_tile_encode(tc.l, data, nbytes, plan, tc.C, payload, cap, &len, NULL);
	if (e != WC_OK)
		fail("encode failed");
	/* An exact-size copy, so the sanitizers see any read past the payload. */
	uint8_t *exact = malloc(len ? len : 1);
	if (!exact)
		fail("out of memory");
	memcpy(exact, payload, len);
	free(payload);
	payload = exact;
	check_paths(&tc, payload, len, data);

	for (unsigned k = 0; k < ndamage; k++) {
		const uint8_t *d = in + 3 + 3 * k;
		size_t pos = (size_t)(d[0] | d[1] << 8) % len;
		payload[pos] ^= d[2] ? d[2] : 1;
	}
	if (ndamage)
		check_paths(&tc, payload, len, NULL);

	free(payload);
	for (unsigned p = 0; p < tc.l.nplanes; p++)
		free(planes[p]);
	free(dict);
	return 0;
}
