/* test_container_damage.c - a reader that rejects truncated, damaged and
 * forged .wcodec files with the right error and never crashes or reads
 * outside them. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "container/container.h"
#include "container/format.h"
#include "container_fixture.h"
#include "st_builder.h"

/* Every cut point: open fails with WC_E_FORMAT and never crashes. */
START_TEST(truncated_files_rejected)
{
	size_t len;
	uint8_t *b = fx_read_file(fx_wc_path, &len);
	char cut_path[320];
	snprintf(cut_path, sizeof cut_path, "%s/cut.wcodec", fx_dir);
	for (size_t cut = 0; cut < len; cut += (cut < 400 ? 1 : (cut < len - 400 ? 97 : 1))) {
		ck_assert_int_eq(st_write_bytes(cut_path, b, cut), 0);
		wc_container *c = NULL;
		wc_err e = wc_container_open(cut_path, &c);
		ck_assert_msg(e == WC_E_FORMAT, "cut at %zu: %s (%s)", cut, wc_strerror(e), wc_last_detail());
		ck_assert_ptr_null(c);
	}
	free(b);
}
END_TEST

START_TEST(corrupted_header_fields_rejected)
{
	size_t len;
	uint8_t *b = fx_read_file(fx_wc_path, &len);
	wc_file_header h;
	ck_assert_int_eq(wc_header_decode(b, len, &h), WC_OK);
	/* Any flipped byte of the header: rejected, with the right kind of code. */
	for (unsigned i = 0; i < WC_HEADER_BYTES; i++) {
		b[i] ^= 0x41;
		wc_err e = fx_open_bytes(b, len);
		b[i] ^= 0x41;
		ck_assert_msg(e != WC_OK, "flipped header byte %u accepted", i);
		if (i < 8)
			ck_assert_int_eq(e, WC_E_FORMAT); /* magic */
		else if (i == 8)
			ck_assert_int_eq(e, WC_E_UNSUPPORTED); /* newer version */
		else if (i >= WC_HEADER_HASH_OFF)
			ck_assert_int_eq(e, WC_E_CORRUPT); /* the check itself */
		else
			ck_assert_msg(e == WC_E_FORMAT || e == WC_E_RANGE || e == WC_E_UNSUPPORTED ||
					      e == WC_E_CORRUPT,
				      "byte %u: %s", i, wc_strerror(e));
	}
	/* Flipped bytes in the prefix, tables, index and metadata: the check catches them. */
	size_t spots[] = {h.prefix_off + 20, h.tables_off + 3, h.index_off + 5, h.index_off + h.index_len - 1,
			  h.meta_off + 10, h.meta_off + h.meta_len - 1};
	for (size_t k = 0; k < sizeof spots / sizeof spots[0]; k++) {
		b[spots[k]] ^= 0x10;
		ck_assert_int_eq(fx_open_bytes(b, len), WC_E_CORRUPT);
		b[spots[k]] ^= 0x10;
	}
	ck_assert_int_eq(fx_open_bytes(b, len), WC_OK);
	free(b);
}
END_TEST

/* With the check recomputed, each field's own validation rejects it. */
START_TEST(inconsistent_fields_rejected)
{
	size_t len;
	uint8_t *b = fx_read_file(fx_wc_path, &len);
	wc_file_header h;
	ck_assert_int_eq(wc_header_decode(b, len, &h), WC_OK);
	uint8_t *m = malloc(len);
	struct {
		size_t off;
		int delta;
		wc_err want;
		const char *needle;
	} cases[] = {
		{20, 8, WC_E_FORMAT, "tile"},                /* tile size: tiles now too small for it */
		{24, 1, WC_E_RANGE, "chunk"},                /* chunk not a multiple of 32 */
		{28, 1, WC_E_FORMAT, "tensor"},              /* tensor count */
		{h.index_off + 0, 1, WC_E_FORMAT, "virtual offset"},
		{h.index_off + 48 + 8, 1, WC_E_FORMAT, "payload offset"},
		{h.index_off + 16, 1, WC_E_FORMAT, "payload offset"}, /* csize: the next tile no longer follows */
		{h.index_off + 20, 1, WC_E_FORMAT, "tile 0"},   /* dsize */
		{h.index_off + 24, 1, WC_E_FORMAT, "tile 0"},   /* tensor */
		{h.index_off + 28, 1, WC_E_FORMAT, "flags"},
		{h.tables_off + 40, 1, WC_E_FORMAT, "frequency table"},
		{h.prefix_off + 8 + 3, 1, WC_E_FORMAT, "prefix"},
	};
	for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
		memcpy(m, b, len);
		m[cases[k].off] = (uint8_t)(m[cases[k].off] + cases[k].delta);
		fx_fix_check(m, &h);
		wc_err e = fx_open_bytes(m, len);
		ck_assert_msg(e == cases[k].want && strstr(wc_last_detail(), cases[k].needle),
			      "case %zu (offset %zu): %s: %s", k, cases[k].off, wc_strerror(e), wc_last_detail());
	}
	free(m);
	free(b);
}
END_TEST

/* Random bytes anywhere before the payloads: never a crash, never accepted
 * unless the byte did not change. */
START_TEST(random_damage_never_crashes)
{
	size_t len;
	uint8_t *b = fx_read_file(fx_wc_path, &len);
	uint64_t rng = 99;
	for (int i = 0; i < 300; i++) {
		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		size_t pos = (size_t)((rng >> 17) % len);
		uint8_t old = b[pos], nv = (uint8_t)(rng >> 5);
		if (nv == old)
			continue;
		b[pos] = nv;
		wc_err e = fx_open_bytes(b, len);
		b[pos] = old;
		wc_file_header h;
		wc_header_decode(b, len, &h);
		int in_payload = pos >= h.payload_off && pos < h.payload_off + h.payload_len;
		if (!in_payload)
			ck_assert_msg(e != WC_OK, "damage at %zu accepted", pos);
	}
	free(b);
}
END_TEST

/* Damage behind a recomputed check (as a malicious writer could make): the
 * structural validation must hold. Open fails, or every read either
 * succeeds or reports an error; nothing crashes or reads out of bounds. */
START_TEST(forged_damage_never_crashes)
{
	size_t len;
	uint8_t *b = fx_read_file(fx_wc_path, &len);
	wc_file_header h;
	ck_assert_int_eq(wc_header_decode(b, len, &h), WC_OK);
	uint8_t *m = malloc(len), *buf = malloc(len);
	uint64_t rng = 4242;
	int opened = 0;
	for (int i = 0; i < 400; i++) {
		memcpy(m, b, len);
		for (int k = 0; k < 1 + i % 3; k++) {
			rng = rng * 6364136223846793005ull + 1442695040888963407ull;
			/* In the index, tables or prefix (the metadata is compressed). */
			size_t span = h.index_len + h.tables_len + h.prefix_len, at = (size_t)((rng >> 17) % span);
			size_t pos = at < h.index_len ? h.index_off + at
				     : at < h.index_len + h.tables_len ? h.tables_off + (at - h.index_len)
				     : h.prefix_off + (at - h.index_len - h.tables_len);
			m[pos] ^= (uint8_t)(1u << ((rng >> 7) % 8));
		}
		fx_fix_check(m, &h);
		char p[320];
		snprintf(p, sizeof p, "%s/forged.wcodec", fx_dir);
		ck_assert_int_eq(st_write_bytes(p, m, len), 0);
		wc_container *c;
		if (wc_container_open(p, &c) != WC_OK)
			continue;
		opened++;
		uint64_t vs = wc_container_virtual_size(c);
		wc_err e = wc_container_pread(c, buf, vs < len ? vs : len, 0);
		ck_assert(e == WC_OK || e == WC_E_CORRUPT);
		wc_container_release(c);
	}
	ck_assert_int_lt(opened, 400); /* most forgeries are caught at open */
	free(buf);
	free(m);
	free(b);
}
END_TEST

START_TEST(damaged_payload_is_corrupt)
{
	size_t len;
	uint8_t *b = fx_read_file(fx_wc_path, &len);
	wc_file_header h;
	ck_assert_int_eq(wc_header_decode(b, len, &h), WC_OK);
	wc_container *c;
	ck_assert_int_eq(wc_container_open(fx_wc_path, &c), WC_OK);
	const wc_tile_info *x = wc_container_tile(c, 3);
	size_t pos = x->coff + x->csize / 2;
	b[pos] ^= 0x04;
	wc_container_release(c);
	char p[320];
	snprintf(p, sizeof p, "%s/dmg.wcodec", fx_dir);
	ck_assert_int_eq(st_write_bytes(p, b, len), 0);
	ck_assert_int_eq(wc_container_open(p, &c), WC_OK); /* payloads are checked on read */
	x = wc_container_tile(c, 3);
	uint8_t *payload = malloc(x->csize), *out = malloc(x->dsize);
	ck_assert_int_eq(wc_container_read_payload(c, 3, payload), WC_E_CORRUPT);
	ck_assert_ptr_nonnull(strstr(wc_last_detail(), "tile 3"));
	/* Decoding the damaged bytes anyway: corrupt stream or dhash mismatch, never OK. */
	ck_assert_int_eq(wc_container_decode_tile(c, 3, payload, out), WC_E_CORRUPT);
	uint8_t *buf = malloc(x->dsize);
	ck_assert_int_eq(wc_container_pread(c, buf, x->dsize, x->voff), WC_E_CORRUPT);
	/* Other tiles still read fine. */
	const wc_tile_info *y = wc_container_tile(c, 4);
	uint8_t *buf2 = malloc(y->dsize);
	ck_assert_int_eq(wc_container_pread(c, buf2, y->dsize, y->voff), WC_OK);
	ck_assert_int_eq(memcmp(buf2, fx_st_bytes + y->voff, y->dsize), 0);
	free(buf2);
	free(buf);
	free(payload);
	free(out);
	wc_container_release(c);
	free(b);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("container_damage");
	TCase *tc = tcase_create("damage");
	tcase_add_unchecked_fixture(tc, fx_setup, fx_teardown); /* one pack for all tests; they never modify it */
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, truncated_files_rejected);
	tcase_add_test(tc, corrupted_header_fields_rejected);
	tcase_add_test(tc, inconsistent_fields_rejected);
	tcase_add_test(tc, random_damage_never_crashes);
	tcase_add_test(tc, forged_damage_never_crashes);
	tcase_add_test(tc, damaged_payload_is_corrupt);
	suite_add_tcase(s, tc);
	return check_run(s);
}
