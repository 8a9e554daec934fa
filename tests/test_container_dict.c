/* test_container_dict.c - dictionary tensors (docs/FORMAT.md 2.1, 1.8): the
 * packer chooses them where they pay, they round-trip through the reader and
 * the tile source, and a damaged dictionary section or tensor-table record
 * is refused with its reason. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "codec/tile_codec.h"
#include "container/container.h"
#include "container/format.h"
#include "container_fixture.h"
#include "engine/backend.h"
#include "st_builder.h"

/* A tensor of n elements of w bytes drawn from k distinct values (the
 * quantized models of TF.js: few values stored as wide floats). */
static void add_quantized(st_file *f, const char *name, const char *dtype, unsigned w, uint64_t n, uint32_t k,
			  uint64_t *rng)
{
	st_tensor *t = &f->t[f->n++];
	snprintf(t->name, sizeof t->name, "%s", name);
	t->dtype = dtype;
	t->ndim = 1;
	t->shape[0] = n;
	t->nbytes = n * w;
	t->data = malloc(t->nbytes);
	for (uint64_t i = 0; i < n; i++) {
		*rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
		uint64_t r = i < k ? i : (*rng >> 33) % k;
		if (i >= k && (*rng >> 20 & 3)) /* skewed: low levels 3/4 of the time */
			r %= (k + 7) / 8;
		uint64_t v = 0x3f000000u + r * 2654435761u; /* distinct for distinct r (odd multiplier) */
		if (w == 2)
			v = 0x3c00 + r * 40503u;
		for (unsigned b = 0; b < w; b++)
			t->data[i * w + b] = (uint8_t)(v >> (8 * b));
	}
}

static char dwc_path[320];

/* Pack the dictionary test file: which tensors must become "dict" and with
 * how many entries (0: must keep its byte planes). */
static const struct {
	const char *name, *dtype;
	unsigned w;
	uint64_t n;
	uint32_t k, want;
} qt[] = {
	{"f32.q256", "F32", 4, 20000, 256, 256},     /* u8-quantized F32: 1 index plane */
	{"f32.q1", "F32", 4, 30000, 1, 1},           /* constant over 30 tiles: one CONST plane per tile */
	{"bf16.q2", "BF16", 2, 9000, 2, 2},
	{"f16.q300", "F16", 2, 20000, 300, 300},     /* 2 index planes */
	{"f64.q257", "F64", 8, 6000, 257, 257},
	{"i32.q65536", "I32", 4, 300000, 65536, 65536},
	{"i32.q65537", "I32", 4, 300000, 65537, 0}, /* too many: byte planes */
	{"f32.q200", "F32", 4, 150, 200, 0},         /* 150 elements: a dictionary does not pay */
};

static void pack_dict_file(void)
{
	st_file f = {0};
	uint64_t rng = 77;
	for (size_t i = 0; i < sizeof qt / sizeof qt[0]; i++)
		add_quantized(&f, qt[i].name, qt[i].dtype, qt[i].w, qt[i].n, qt[i].k, &rng);
	size_t len;
	uint8_t *b = st_serialize(&f, &len);
	st_free(&f);
	char in[320];
	snprintf(in, sizeof in, "%s/q.safetensors", fx_dir);
	snprintf(dwc_path, sizeof dwc_path, "%s/q.wcodec", fx_dir);
	ck_assert_int_eq(st_write_bytes(in, b, len), 0);
	free(b);
	wc_pack_opts o = {.tile_size = 4096, .chunk_symbols = 1024, .threads = 2, .verify = 1};
	wc_pack_stats s;
	wc_err e = wc_pack_safetensors(in, dwc_path, &o, &s);
	ck_assert_msg(e == WC_OK, "pack: %s", wc_last_detail());
	ck_assert_uint_eq(s.dict_tensors, 6);
	ck_assert_uint_eq(s.dict_bytes, 256 * 4 + 4 + 2 * 2 + 300 * 2 + 257 * 8 + 65536 * 4);
	ck_assert(s.entropy_bound_bytes < s.plain_entropy_bound_bytes);
	ck_assert(s.coded_data_bytes + s.dict_bytes < 1.02 * s.entropy_bound_bytes + 8192);
}

START_TEST(dict_tensors_round_trip)
{
	pack_dict_file();
	size_t len;
	uint8_t *b = fx_read_file(dwc_path, &len), *in;
	size_t in_len;
	char inp[320];
	snprintf(inp, sizeof inp, "%s/q.safetensors", fx_dir);
	in = fx_read_file(inp, &in_len);
	wc_file_header h;
	ck_assert_int_eq(wc_header_decode(b, len, &h), WC_OK);
	ck_assert_uint_eq(h.flags, 1); /* WC_FLAG_DICTS: refused by readers without dictionaries */
	ck_assert_uint_eq(h.dicts_off, h.tables_off + h.tables_len);
	wc_container *c;
	ck_assert_int_eq(wc_container_open(dwc_path, &c), WC_OK);
	for (size_t i = 0; i < sizeof qt / sizeof qt[0]; i++) {
		uint32_t idx;
		ck_assert_int_eq(wc_container_find_tensor(c, qt[i].name, &idx), WC_OK);
		const wc_tensor_info *t = wc_container_tensor(c, idx);
		ck_assert_msg(t->dict_entries == qt[i].want, "%s: %u entries", qt[i].name, t->dict_entries);
		ck_assert_str_eq(wc_layout_name(t->layout), qt[i].want ? "dict" : wc_layout_name(t->plain_layout));
		ck_assert_uint_eq(t->plain_layout.elem_size, qt[i].w);
		if (qt[i].want) {
			ck_assert_uint_eq(t->layout.nplanes, qt[i].want <= 256 ? 1 : 2);
			ck_assert_ptr_nonnull(t->dict);
			ck_assert(wc_dict_sorted(t->dict, t->dict_entries, qt[i].w));
			double pe = 0;
			for (unsigned p = 0; p < t->plain_layout.nplanes; p++)
				pe += t->plain_entropy[p];
			ck_assert_msg(pe > 0 || qt[i].k == 1, "%s: no byte-plane entropy recorded", qt[i].name);
		} else {
			ck_assert_ptr_null(t->dict);
		}
	}
	uint8_t *all = malloc(in_len);
	ck_assert_int_eq(wc_container_pread(c, all, in_len, 0), WC_OK);
	ck_assert_int_eq(memcmp(all, in, in_len), 0);
	/* The tile source hands the dictionary to backends; the CPU reference decodes it. */
	wc_tile_source *src = wc_container_source(c);
	for (uint32_t i = 0; i < wc_container_ntiles(c); i += 7) {
		const wc_tile_info *x = wc_container_tile(c, i);
		uint8_t *payload = malloc(x->csize), *out = malloc(x->dsize);
		ck_assert_int_eq(src->ops->read_payload(src, i, payload), WC_OK);
		wc_tile_job job;
		memset(&job, 0, sizeof job);
		src->ops->describe_job(src, i, &job);
		job.payload = payload;
		job.payload_size = x->csize;
		job.out = out;
		job.out_size = x->dsize;
		ck_assert_int_eq(wc_decode_job_cpu(&job), WC_OK);
		ck_assert_int_eq(memcmp(out, in + x->voff, x->dsize), 0);
		free(payload);
		free(out);
	}
	wc_container_release(c);
	free(all);
	free(in);
	free(b);
}
END_TEST

START_TEST(damaged_dictionaries_rejected)
{
	pack_dict_file();
	size_t len;
	uint8_t *b = fx_read_file(dwc_path, &len);
	wc_file_header h;
	ck_assert_int_eq(wc_header_decode(b, len, &h), WC_OK);
	uint8_t *m = malloc(len);
	/* A flipped dictionary byte: the header check catches it. */
	memcpy(m, b, len);
	m[h.dicts_off + 5] ^= 0x20;
	ck_assert_int_eq(fx_open_bytes(m, len), WC_E_CORRUPT);
	/* With the check recomputed: entries out of order are a format error. */
	memcpy(m, b, len);
	uint8_t tmp[4];
	memcpy(tmp, m + h.dicts_off, 4); /* f32.q256 is the first dictionary: swap entries 0 and 1 */
	memcpy(m + h.dicts_off, m + h.dicts_off + 4, 4);
	memcpy(m + h.dicts_off + 4, tmp, 4);
	fx_fix_check(m, &h);
	ck_assert_int_eq(fx_open_bytes(m, len), WC_E_FORMAT);
	ck_assert_ptr_nonnull(strstr(wc_last_detail(), "ascending"));
	/* A duplicate entry too. */
	memcpy(m, b, len);
	memcpy(m + h.dicts_off + 4, m + h.dicts_off, 4);
	fx_fix_check(m, &h);
	ck_assert_int_eq(fx_open_bytes(m, len), WC_E_FORMAT);
	/* Header: an unknown flag is a newer format; no flag with a dictionary
	 * section is a broken one; a wrong section length breaks the layout. */
	memcpy(m, b, len);
	m[12] = 3;
	fx_fix_check(m, &h);
	ck_assert_int_eq(fx_open_bytes(m, len), WC_E_UNSUPPORTED);
	ck_assert_ptr_nonnull(strstr(wc_last_detail(), "flags"));
	m[12] = 0;
	fx_fix_check(m, &h);
	ck_assert_int_eq(fx_open_bytes(m, len), WC_E_FORMAT);
	memcpy(m, b, len);
	wc_put_u64(m + 144, h.dicts_len - 4);
	fx_fix_check(m, &h);
	ck_assert_int_eq(fx_open_bytes(m, len), WC_E_FORMAT);
	free(m);

	/* Tensor-table records that do not match the dictionary section
	 * (docs/FORMAT.md 1.3.1): f32.q256 is the first tensor. */
	size_t n;
	uint8_t *t = fx_metadata_of(b, &h, &n), *e2 = malloc(n);
	fx_record *r = calloc(h.ntensors, sizeof *r);
	fx_walk_records(t, n, h.ntensors, r);
	ck_assert_uint_eq(r[0].code, WC_TT_LAYOUT_DICT);
	ck_assert_uint_eq(wc_get_u32(t + r[0].off + WC_TT_HEAD_BYTES), 256);
	struct {
		size_t at;
		uint32_t value, width;
		const char *needle;
	} cases[] = {
		{WC_TT_HEAD_BYTES, 65537, 4, "entries"},
		{WC_TT_HEAD_BYTES, 0, 4, "entries"},
		{WC_TT_HEAD_BYTES, 255, 4, "dictionar"}, /* the next one no longer follows */
		{2, 9, 1, "layout code"},                /* the values' layout */
		{2, 0, 1, "dictionar"},                  /* 1-byte values: the section no longer adds up */
		{WC_TT_HEAD_BYTES + 4, 0x41100000u, 4, "plain entropy"}, /* 9.0 */
	};
	for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
		memcpy(e2, t, n);
		if (cases[k].width == 1)
			e2[r[0].off + cases[k].at] = (uint8_t)cases[k].value;
		else
			wc_put_u32(e2 + r[0].off + cases[k].at, cases[k].value);
		size_t ml;
		m = fx_with_metadata(b, &h, e2, n, &ml);
		wc_err e = fx_open_bytes(m, ml);
		ck_assert_msg(e == WC_E_FORMAT && strstr(wc_last_detail(), cases[k].needle),
			      "dict table case %zu: %s: %s", k, wc_strerror(e), wc_last_detail());
		free(m);
	}
	/* Values of another layout of the same size (shuffle4 for F32): the
	 * tiles decode as before, but the prefix's dtype says f32. */
	memcpy(e2, t, n);
	e2[r[0].off + 2] = 2;
	size_t ml;
	m = fx_with_metadata(b, &h, e2, n, &ml);
	ck_assert_int_eq(fx_open_bytes_as(m, ml, 0), WC_OK);
	ck_assert_int_eq(fx_open_bytes(m, ml), WC_E_FORMAT);
	ck_assert_msg(strstr(wc_last_detail(), "dictionary") != NULL, "%s", wc_last_detail());
	free(m);
	free(r);
	free(e2);
	free(t);
	free(b);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("container_dict");
	TCase *tc = tcase_create("dict");
	tcase_add_unchecked_fixture(tc, fx_setup, fx_teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, dict_tensors_round_trip);
	tcase_add_test(tc, damaged_dictionaries_rejected);
	suite_add_tcase(s, tc);
	return check_run(s);
}
