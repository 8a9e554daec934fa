/* test_metadata.c - the .wcodec metadata (docs/FORMAT.md 1.3): the binary
 * tensor table of version 3 and the JSON of versions 1 and 2 (the files in
 * tests/data), each inconsistent record refused with its reason behind a
 * recomputed check; a file opened without names reads the same bytes. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "container/container.h"
#include "container/format.h"
#include "container_fixture.h"
#include "core/hash.h"
#include "st_builder.h"

static wc_err open_json(const uint8_t *b, const wc_file_header *h, const char *json)
{
	size_t ml;
	uint8_t *m = fx_with_metadata(b, h, json, strlen(json), &ml);
	wc_err e = fx_open_bytes(m, ml);
	free(m);
	return e;
}

/* Replace the first occurrence of `from` in js by `to`. */
static char *edit(const char *js, const char *from, const char *to)
{
	const char *p = strstr(js, from);
	ck_assert_msg(p != NULL, "metadata has no \"%s\"", from);
	size_t a = (size_t)(p - js), n = strlen(js) - strlen(from) + strlen(to);
	char *r = malloc(n + 1);
	memcpy(r, js, a);
	strcpy(r + a, to);
	strcat(r, p + strlen(from));
	return r;
}

static uint8_t *read_fixture(const char *name, size_t *len, wc_file_header *h)
{
	char p[600];
	snprintf(p, sizeof p, "%s/tests/data/%s", getenv("top_srcdir") ? getenv("top_srcdir") : "..", name);
	uint8_t *b = fx_read_file(p, len);
	ck_assert_int_eq(wc_header_decode(b, *len, h), WC_OK);
	return b;
}

/* ---- versions 1 and 2: JSON --------------------------------------------- */

START_TEST(json_metadata_checked)
{
	size_t len, n;
	wc_file_header h;
	uint8_t *b = read_fixture("all-v2.wcodec", &len, &h);
	ck_assert_uint_eq(h.version, 2);
	char *js = (char *)fx_metadata_of(b, &h, &n);
	ck_assert_int_eq(open_json(b, &h, js), WC_OK); /* recompressed as it was */
	struct {
		const char *from, *to, *needle;
	} cases[] = {
		{"{\"format\"", "[{\"format\"", "metadata"}, /* not an object */
		{"\"layout\":\"bf16\"", "\"layout\":\"bf17\"", "layout"},
		{"\"layout\":\"bf16\"", "\"layout\":\"bytes\"", "planes"}, /* plane count no longer matches */
		{"\"tiles\":1,", "\"tiles\":2,", "tiles"},
		{"\"first_tile\":0", "\"first_tile\":1", "tiles"},
		{"\"table\":0,", "\"table\":99999,", "table"},
		{"\"entropy\":", "\"entropy\":9,\"x\":", "entropy"},
		{"\"name\":\"bf16.one\"", "\"name\":\"bf16.two\"", "prefix"},
		{"\"name\":\"bf16.one\"", "\"name\":\"bf16.scalar\"", "prefix"},
		{"\"dtype\":\"BF16\"", "\"dtype\":\"F16\"", "prefix"},
		{"\"shape\":[33,65]", "\"shape\":[65,33]", "prefix"},
		{"\"shape\":[33,65]", "\"shape\":[33,-65]", "shape"},
		{"\"begin\":", "\"begin\":1,\"x\":", "byte range"},
		{"\"shared\":true", "\"shared\":1", "boolean"},
		{"\"shared\":true", "\"shared\":false", "tiles"}, /* then it needs tiles of its own */
		/* dictionaries: i64.const has one entry at offset 8 */
		{"\"offset\":8,\"entries\":1}", "\"offset\":8,\"entries\":65537}", "entries"},
		{"\"offset\":8,\"entries\":1}", "\"offset\":8,\"entries\":0}", "entries"},
		{"\"offset\":8,", "\"offset\":4,", "dictionary"},
		{"\"layout\":\"dict\"", "\"layout\":\"shuffle8\"", "planes"},
		{"\"dict\":{", "\"notdict\":{", "dict"},
		{"\"plain_entropy\":[", "\"plain_entropy\":[9,", "plain_entropy"},
	};
	for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
		char *e2 = edit(js, cases[k].from, cases[k].to);
		wc_err e = open_json(b, &h, e2);
		ck_assert_msg(e == WC_E_FORMAT && strstr(wc_last_detail(), cases[k].needle),
			      "metadata case %zu (%s): %s: %s", k, cases[k].to, wc_strerror(e), wc_last_detail());
		free(e2);
	}
	/* A version-1 header cannot have shared tiles. */
	size_t ml;
	uint8_t *m = fx_with_metadata(b, &h, js, n, &ml);
	wc_put_u32(m + 8, 1);
	wc_file_header h1;
	ck_assert_int_eq(wc_header_decode(m, ml, &h1), WC_OK);
	fx_fix_check(m, &h1);
	ck_assert_int_eq(fx_open_bytes(m, ml), WC_E_FORMAT);
	ck_assert_msg(strstr(wc_last_detail(), "shared") != NULL, "%s", wc_last_detail());
	free(m);
	/* JSON far longer than the prefix could call for (16 bytes a prefix
	 * byte and 1 MiB): refused before it is decompressed. */
	size_t big = 16 * (size_t)h.prefix_len + (1u << 20) + 1;
	char *padded = malloc(big + 1);
	memset(padded, ' ', big);
	memcpy(padded, js, n);
	padded[big] = 0;
	m = fx_with_metadata(b, &h, padded, big, &ml);
	ck_assert_int_eq(fx_open_bytes(m, ml), WC_E_RANGE);
	ck_assert_msg(strstr(wc_last_detail(), "prefix") != NULL, "%s", wc_last_detail());
	free(m);
	padded[big - 1] = 0; /* one byte less: accepted */
	m = fx_with_metadata(b, &h, padded, big - 1, &ml);
	ck_assert_int_eq(fx_open_bytes(m, ml), WC_OK);
	free(m);
	free(padded);
	/* Metadata that is not a zstd frame. */
	memcpy(b + h.meta_off, "{}", 2);
	fx_fix_check(b, &h);
	ck_assert_int_eq(fx_open_bytes(b, len), WC_E_FORMAT);
	ck_assert_ptr_nonnull(strstr(wc_last_detail(), "zstd"));
	free(js);
	free(b);
}
END_TEST

/* Files of versions 1 and 2 have their names whichever way they are opened. */
START_TEST(old_versions_keep_their_names)
{
	const char *names[] = {"all-v1.wcodec", "all-v2.wcodec"};
	for (int k = 0; k < 2; k++) {
		size_t len;
		wc_file_header h;
		uint8_t *b = read_fixture(names[k], &len, &h);
		ck_assert_uint_eq(h.version, (unsigned)k + 1);
		for (int with = 0; with < 2; with++) {
			char p[320];
			snprintf(p, sizeof p, "%s/old.wcodec", fx_dir);
			ck_assert_int_eq(st_write_bytes(p, b, len), 0);
			wc_container *c;
			ck_assert_int_eq(with ? wc_container_open(p, &c) : wc_container_open_tiles(p, &c), WC_OK);
			uint32_t i;
			ck_assert_int_eq(wc_container_find_tensor(c, "bf16.one", &i), WC_OK);
			ck_assert_str_eq(wc_container_tensor(c, i)->dtype, "BF16");
			wc_container_release(c);
		}
		free(b);
	}
}
END_TEST

/* ---- version 3: the tensor table ---------------------------------------- */

START_TEST(tensor_table_checked)
{
	size_t len, n;
	uint8_t *b = fx_read_file(fx_wc_path, &len);
	wc_file_header h;
	ck_assert_int_eq(wc_header_decode(b, len, &h), WC_OK);
	ck_assert_uint_eq(h.version, WC_FORMAT_VERSION);
	uint8_t *t = fx_metadata_of(b, &h, &n);
	fx_record *r = calloc(h.ntensors, sizeof *r);
	fx_walk_records(t, n, h.ntensors, r);
	/* a tensor of its own tile with a table */
	uint32_t own = UINT32_MAX, pair = UINT32_MAX;
	for (uint32_t i = 0; i + 1 < h.ntensors; i++) {
		if (own == UINT32_MAX && r[i].bytes && !(r[i].flags & WC_TT_SHARED) && r[i].code != WC_TT_LAYOUT_DICT &&
		    wc_get_u32(t + r[i].off + WC_TT_HEAD_BYTES) != WC_TT_NO_TABLE)
			own = i;
		/* two tensors of tiles of their own, whose tile counts stay the
		 * same when 8 bytes (a multiple of every element size) move from
		 * the first to the second */
		const uint64_t T = h.tile_size, x = r[i].bytes, y = r[i + 1].bytes;
		if (pair == UINT32_MAX && !((r[i].flags | r[i + 1].flags) & WC_TT_SHARED) && r[i].code != WC_TT_LAYOUT_DICT &&
		    r[i + 1].code != WC_TT_LAYOUT_DICT && x > 8 && y && (x - 8 + T - 1) / T == (x + T - 1) / T &&
		    (y + 8 + T - 1) / T == (y + T - 1) / T)
			pair = i;
	}
	ck_assert_msg(own != UINT32_MAX, "the fixture has no tensor with a frequency table");
	ck_assert_msg(pair != UINT32_MAX, "the fixture has no two tensors to move bytes between");
	uint32_t shared = 0;
	while (shared < h.ntensors && !(r[shared].flags & WC_TT_SHARED))
		shared++;
	ck_assert_msg(shared < h.ntensors, "the fixture has no shared tile");
	size_t ml;
	uint8_t *m = fx_with_metadata(b, &h, t, n, &ml);
	ck_assert_int_eq(fx_open_bytes(m, ml), WC_OK); /* recompressed as it was */
	free(m);

	uint8_t *e2 = malloc(n + 1);
	struct {
		uint32_t tensor;
		size_t at; /* byte of the record */
		uint32_t value, width;
		const char *needle;
	} cases[] = {
		{0, 0, 9, 1, "layout code"}, /* 7 and 8 are int8 and int4 (lossy) */
		{0, 1, 2, 1, "reserved"},
		{0, 3, 1, 1, "reserved"},
		{own, 2, 1, 1, "reserved"},              /* a "plain" code without a dictionary */
		{own, 8, 0x40000000u, 4, "pass the end"}, /* bytes: 2^62 more */
		{own, WC_TT_HEAD_BYTES, 0x7fffffffu, 4, "table"},
		{own, WC_TT_HEAD_BYTES + 4, 0x7fc00000u, 4, "entropy"}, /* NaN */
		{own, WC_TT_HEAD_BYTES + 4, 0x41100000u, 4, "entropy"}, /* 9.0 */
		{0, 1, WC_TT_SHARED, 1, "shared"},
		{shared, 1, 0, 1, "tiles"}, /* a shared tensor made one of its own */
	};
	for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
		memcpy(e2, t, n);
		uint8_t *p = e2 + r[cases[k].tensor].off + cases[k].at;
		if (cases[k].width == 1)
			p[0] = (uint8_t)cases[k].value;
		else
			wc_put_u32(p, cases[k].value);
		m = fx_with_metadata(b, &h, e2, n, &ml);
		for (int names = 0; names < 2; names++) {
			wc_err e = fx_open_bytes_as(m, ml, names);
			ck_assert_msg(e == WC_E_FORMAT && strstr(wc_last_detail(), cases[k].needle),
				      "table case %zu (tensor %u byte %zu), names %d: %s: %s", k, cases[k].tensor,
				      cases[k].at, names, wc_strerror(e), wc_last_detail());
		}
		free(m);
	}
	/* One byte too many, one too few. */
	memcpy(e2, t, n);
	e2[n] = 0;
	m = fx_with_metadata(b, &h, e2, n + 1, &ml);
	ck_assert_int_eq(fx_open_bytes(m, ml), WC_E_FORMAT);
	ck_assert_msg(strstr(wc_last_detail(), "after the last") != NULL, "%s", wc_last_detail());
	free(m);
	m = fx_with_metadata(b, &h, e2, n - 1, &ml);
	ck_assert_int_eq(fx_open_bytes(m, ml), WC_E_FORMAT);
	ck_assert_msg(strstr(wc_last_detail(), "ends") != NULL, "%s", wc_last_detail());
	free(m);
	/* A header claiming more tensors than its prefix can list (a small file
	 * whose metadata would decompress to megabytes): refused at once. */
	{
		uint8_t *claim = malloc(len);
		memcpy(claim, b, len);
		wc_put_u32(claim + 28, (uint32_t)(h.prefix_len / 40 + 1));
		fx_fix_check(claim, &h);
		ck_assert_int_eq(fx_open_bytes(claim, len), WC_E_RANGE);
		ck_assert_msg(strstr(wc_last_detail(), "cannot be listed"), "%s", wc_last_detail());
		free(claim);
	}
	/* A table longer than 132 bytes a tensor: refused before it is decompressed. */
	size_t big = (size_t)h.ntensors * WC_TT_RECORD_MAX + 1;
	uint8_t *zeros = calloc(big, 1);
	m = fx_with_metadata(b, &h, zeros, big, &ml);
	ck_assert_int_eq(fx_open_bytes(m, ml), WC_E_RANGE);
	free(m);
	free(zeros);
	/* 8 bytes moved from one tensor to the next: the tensor table still
	 * holds together, but the prefix's tensors are no longer the table's
	 * (and the tiles' sizes no longer the tensors'). */
	memcpy(e2, t, n);
	wc_put_u64(e2 + r[pair].off + 4, r[pair].bytes - 8);
	wc_put_u64(e2 + r[pair + 1].off + 4, r[pair + 1].bytes + 8);
	m = fx_with_metadata(b, &h, e2, n, &ml);
	ck_assert_int_eq(fx_open_bytes(m, ml), WC_E_FORMAT);
	ck_assert_msg(strstr(wc_last_detail(), "prefix") != NULL, "%s", wc_last_detail());
	ck_assert_int_eq(fx_open_bytes_as(m, ml, 0), WC_E_FORMAT);
	ck_assert_msg(strstr(wc_last_detail(), "tile") != NULL, "%s", wc_last_detail());
	free(m);
	free(e2);
	free(r);
	free(t);
	free(b);
}
END_TEST

/* wc_container_open_tiles: no names, the same bytes, less memory. */
START_TEST(open_without_names_reads_the_same)
{
	wc_container *a, *c;
	ck_assert_int_eq(wc_container_open(fx_wc_path, &a), WC_OK);
	ck_assert_int_eq(wc_container_open_tiles(fx_wc_path, &c), WC_OK);
	ck_assert_uint_eq(wc_container_ntensors(a), wc_container_ntensors(c));
	uint32_t i;
	for (i = 0; i < wc_container_ntensors(c); i++) {
		const wc_tensor_info *x = wc_container_tensor(a, i), *y = wc_container_tensor(c, i);
		ck_assert_ptr_nonnull(x->name);
		ck_assert_ptr_null(y->name);
		ck_assert_ptr_null(y->dtype);
		ck_assert_uint_eq(x->begin, y->begin);
		ck_assert_uint_eq(x->end, y->end);
		ck_assert_uint_eq(x->first_tile, y->first_tile);
		ck_assert_uint_eq(x->layout.kind, y->layout.kind);
	}
	ck_assert_int_eq(wc_container_find_tensor(c, wc_container_tensor(a, 0)->name, &i), WC_E_NOTFOUND);
	ck_assert_uint_lt(wc_container_memory(c), wc_container_memory(a));
	uint8_t *buf = malloc(fx_st_len);
	ck_assert_int_eq(wc_container_pread(c, buf, fx_st_len, 0), WC_OK);
	ck_assert_mem_eq(buf, fx_st_bytes, fx_st_len);
	free(buf);
	wc_container_release(a);
	wc_container_release(c);
}
END_TEST

/* A lossy (int8) tensor's record and scales are checked at open. */
START_TEST(lossy_record_checked)
{
	char in[320], out[320];
	snprintf(in, sizeof in, "%s/lossy.safetensors", fx_dir);
	snprintf(out, sizeof out, "%s/lossy.wcodec", fx_dir);
	st_file f = {.n = 0};
	uint64_t rng = 7;
	const uint64_t shape[2] = {24, 40};
	st_add(&f, "w", "BF16", 2, shape, "weights", &rng);
	size_t sl;
	uint8_t *sb = st_serialize(&f, &sl);
	st_free(&f);
	ck_assert_int_eq(st_write_bytes(in, sb, sl), 0);
	free(sb);
	wc_pack_opts o = {.tile_size = 4096, .verify = 1, .lossy_bits = 8};
	wc_pack_stats s;
	ck_assert_msg(wc_pack_safetensors(in, out, &o, &s) == WC_OK, "%s", wc_last_detail());
	ck_assert_uint_eq(s.lossy_tensors, 1);
	size_t len, n, ml;
	uint8_t *b = fx_read_file(out, &len);
	wc_file_header h;
	ck_assert_int_eq(wc_header_decode(b, len, &h), WC_OK);
	uint8_t *t = fx_metadata_of(b, &h, &n);
	fx_record r;
	fx_walk_records(t, n, 1, &r);
	ck_assert_uint_eq(r.code, WC_TT_LAYOUT_INT8);
	uint8_t *m = fx_with_metadata(b, &h, t, n, &ml);
	ck_assert_int_eq(fx_open_bytes(m, ml), WC_OK);
	free(m);
	const size_t L = WC_TT_HEAD_BYTES; /* the lossy fields start here */
	struct {
		size_t at;
		uint32_t value, width;
		const char *needle;
	} cases[] = {
		{L + 0, 3, 1, "lossy dtype"},            /* no such dtype */
		{L + 0, 0, 1, "layout code"},            /* F32 codes for the bf16 plain layout */
		{L + 1, 2, 1, "axis"},
		{L + 3, 0x90, 1, "group"},               /* 36864: more than 32768 */
		{L + 4, 0, 4, "channels"},
		{L + 4, 7, 4, "channels"},               /* 960 elements are not 7 channels */
		{L + 4, 960, 4, "scales pass"},          /* more scales than the section holds */
		{L + 8, 0x7fc00000u, 4, "error measure"}, /* NaN */
		{L + 12, 0xbf800000u, 4, "error measure"}, /* -1 */
		{1, WC_TT_SHARED, 1, "lossy"},
		{2, 0, 1, "layout code"},                /* plain: bytes */
	};
	uint8_t *e2 = malloc(n);
	for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
		memcpy(e2, t, n);
		if (cases[k].width == 1)
			e2[cases[k].at] = (uint8_t)cases[k].value;
		else
			wc_put_u32(e2 + cases[k].at, cases[k].value);
		m = fx_with_metadata(b, &h, e2, n, &ml);
		for (int names = 0; names < 2; names++) {
			wc_err e = fx_open_bytes_as(m, ml, names);
			ck_assert_msg(e == WC_E_FORMAT && strstr(wc_last_detail(), cases[k].needle),
				      "lossy case %zu, names %d: %s: %s", k, names, wc_strerror(e), wc_last_detail());
		}
		free(m);
	}
	/* The channels on the other axis (24 rows, 40 columns): only a reader
	 * that parses the prefix sees that the shape has not that many. */
	memcpy(e2, t, n);
	e2[L + 1] ^= 1;
	m = fx_with_metadata(b, &h, e2, n, &ml);
	ck_assert_int_eq(fx_open_bytes_as(m, ml, 0), WC_OK);
	ck_assert_int_eq(fx_open_bytes_as(m, ml, 1), WC_E_FORMAT);
	ck_assert_msg(strstr(wc_last_detail(), e2[L + 1] ? "channels on its last axis" : "channels on its first axis"),
		      "%s", wc_last_detail());
	free(m);
	/* The codes as stored: they decode to the file's bytes; a payload
	 * changed (with its chash made right) gives codes that do not, and is
	 * refused naming its tile. */
	{
		wc_container *c;
		ck_assert_int_eq(wc_container_open(out, &c), WC_OK);
		wc_lossy_desc d;
		ck_assert_int_eq(wc_container_lossy_desc(c, 0, &d), WC_OK);
		ck_assert_uint_eq(d.bits, 8);
		ck_assert_uint_eq(d.elems, 960);
		int8_t *codes = malloc(d.elems);
		float *scales = malloc(d.nscales * sizeof *scales);
		ck_assert_int_eq(wc_container_lossy_codes(c, 0, codes, scales), WC_OK);
		const wc_tensor_info *ti = wc_container_tensor(c, 0);
		for (uint64_t e = 0; e < d.elems; e++) {
			float sc = scales[d.axis ? e % d.channels : e / (d.elems / d.channels)];
			ck_assert(sc == ti->lossy_scales[d.axis ? e % d.channels : e / (d.elems / d.channels)]);
			ck_assert(codes[e] >= -127 && codes[e] <= 127);
		}
		wc_container_release(c);
		uint8_t *bad = malloc(len);
		memcpy(bad, b, len);
		wc_tile_info x;
		wc_index_entry_decode(bad + h.index_off, &x);
		bad[x.coff + x.csize - 1] ^= 0x01; /* the last code byte of tile 0 (a RAW or rANS body) */
		x.chash = wc_xxh3_64(bad + x.coff, x.csize);
		wc_index_entry_encode(&x, bad + h.index_off);
		fx_fix_check(bad, &h);
		char p2[320];
		snprintf(p2, sizeof p2, "%s/lossy-bad.wcodec", fx_dir);
		ck_assert_int_eq(st_write_bytes(p2, bad, len), 0);
		ck_assert_int_eq(wc_container_open(p2, &c), WC_OK);
		wc_err e = wc_container_lossy_codes(c, 0, codes, scales);
		ck_assert_msg(e == WC_E_CORRUPT && strstr(wc_last_detail(), "tile 0"), "%s: %s", wc_strerror(e),
			      wc_last_detail());
		ck_assert_int_eq(wc_container_lossy_desc(c, 1, &d), WC_E_RANGE);
		wc_container_release(c);
		free(bad);
		free(codes);
		free(scales);
	}
	/* A scale that is not a finite number >= 0. */
	memcpy(b + h.dicts_off + 4, "\x00\x00\xc0\x7f", 4); /* NaN */
	fx_fix_check(b, &h);
	ck_assert_int_eq(fx_open_bytes(b, len), WC_E_FORMAT);
	ck_assert_msg(strstr(wc_last_detail(), "scale 1") != NULL, "%s", wc_last_detail());
	free(e2);
	free(t);
	free(b);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("metadata");
	TCase *tc = tcase_create("metadata");
	tcase_add_unchecked_fixture(tc, fx_setup, fx_teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, json_metadata_checked);
	tcase_add_test(tc, old_versions_keep_their_names);
	tcase_add_test(tc, tensor_table_checked);
	tcase_add_test(tc, lossy_record_checked);
	tcase_add_test(tc, open_without_names_reads_the_same);
	suite_add_tcase(s, tc);
	return check_run(s);
}
