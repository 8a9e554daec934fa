/* test_safetensors.c - the safetensors header parser accepts valid headers
 * and rejects each kind of malformation with a reason naming it. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "container/safetensors.h"

/* A file image: u64 length, the JSON, data_len bytes of data. */
static uint8_t *image(const char *json, size_t data_len, size_t *len)
{
	size_t n = strlen(json);
	*len = 8 + n + data_len;
	uint8_t *b = calloc(1, *len);
	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)((uint64_t)n >> (8 * i));
	memcpy(b + 8, json, n);
	for (size_t i = 0; i < data_len; i++)
		b[8 + n + i] = (uint8_t)(i * 7);
	return b;
}

static wc_err parse(const char *json, size_t data_len, wc_st_header **h)
{
	size_t len;
	uint8_t *b = image(json, data_len, &len);
	wc_clear_detail();
	wc_err e = wc_st_parse(b, len, len, h);
	free(b);
	return e;
}

/* Parsing must fail with `code` and a reason containing `needle`. */
static void expect_reject(const char *json, size_t data_len, wc_err code, const char *needle)
{
	wc_st_header *h = (wc_st_header *)1;
	wc_err e = parse(json, data_len, &h);
	ck_assert_msg(e == code, "%s: got %s (%s), want %s", json, wc_strerror(e), wc_last_detail(),
		      wc_strerror(code));
	ck_assert_ptr_null(h);
	ck_assert_msg(strstr(wc_last_detail(), needle), "reason \"%s\" does not name \"%s\"", wc_last_detail(),
		      needle);
}

START_TEST(valid_header_sorted_by_offset)
{
	wc_st_header *h;
	const char *js = "{\"b\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[4,28]},"
			 "\"__metadata__\":{\"format\":\"pt\"},"
			 "\"a\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]},"
			 "\"z\":{\"dtype\":\"I64\",\"shape\":[0,5],\"data_offsets\":[28,28]},"
			 "\"s\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[28,29]}}    ";
	ck_assert_int_eq(parse(js, 29, &h), WC_OK);
	ck_assert_uint_eq(h->ntensors, 4);
	ck_assert_uint_eq(h->header_len, strlen(js));
	ck_assert_uint_eq(h->data_offset, 8 + strlen(js));
	ck_assert_uint_eq(h->data_size, 29);
	ck_assert_str_eq(h->tensors[0].name, "a");
	ck_assert_str_eq(h->tensors[1].name, "b");
	ck_assert_str_eq(h->tensors[2].name, "z");
	ck_assert_str_eq(h->tensors[3].name, "s");
	ck_assert_str_eq(h->tensors[1].dtype, "F32");
	ck_assert_uint_eq(h->tensors[1].ndim, 2);
	ck_assert_uint_eq(h->tensors[1].shape[1], 3);
	ck_assert_uint_eq(h->tensors[3].ndim, 0);
	ck_assert_uint_eq(h->tensors[3].begin, 28);
	ck_assert_uint_eq(h->tensors[3].end, 29);
	ck_assert_ptr_nonnull(h->metadata);
	ck_assert_str_eq(json_string_value(json_object_get(h->metadata, "format")), "pt");
	wc_st_free(h);
}
END_TEST

START_TEST(empty_and_unknown_dtype)
{
	wc_st_header *h;
	ck_assert_int_eq(parse("{}", 0, &h), WC_OK);
	ck_assert_uint_eq(h->ntensors, 0);
	ck_assert_ptr_null(h->metadata);
	wc_st_free(h);
	/* A dtype the parser does not know: byte count not checked. */
	ck_assert_int_eq(parse("{\"q\":{\"dtype\":\"Q4_K\",\"shape\":[7],\"data_offsets\":[0,4]}}", 4, &h), WC_OK);
	ck_assert_uint_eq(wc_st_dtype_size("Q4_K"), 0);
	ck_assert_uint_eq(wc_st_dtype_size("BF16"), 2);
	ck_assert_uint_eq(wc_st_dtype_size("F64"), 8);
	wc_st_free(h);
}
END_TEST

START_TEST(rejects_bad_json)
{
	expect_reject("[1,2,3]", 0, WC_E_FORMAT, "not an object");
	expect_reject("{\"a\":", 0, WC_E_FORMAT, "not valid JSON");
	expect_reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
		      "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
		      1, WC_E_FORMAT, "duplicate");
	expect_reject("{\"a\":[1]}", 0, WC_E_FORMAT, "\"a\": entry is not a JSON object");
	expect_reject("{\"__metadata__\":{\"k\":3}}", 0, WC_E_FORMAT, "__metadata__");
	expect_reject("{\"__metadata__\":[\"k\"]}", 0, WC_E_FORMAT, "__metadata__");
}
END_TEST

START_TEST(rejects_bad_fields)
{
	expect_reject("{\"t\":{\"shape\":[1],\"data_offsets\":[0,1]}}", 1, WC_E_FORMAT, "\"t\": missing \"dtype\"");
	expect_reject("{\"t\":{\"dtype\":\"U8\",\"data_offsets\":[0,1]}}", 1, WC_E_FORMAT, "missing \"shape\"");
	expect_reject("{\"t\":{\"dtype\":\"U8\",\"shape\":[1]}}", 1, WC_E_FORMAT, "missing \"data_offsets\"");
	expect_reject("{\"t\":{\"dtype\":5,\"shape\":[1],\"data_offsets\":[0,1]}}", 1, WC_E_FORMAT, "dtype");
	expect_reject("{\"t\":{\"dtype\":\"U8\",\"shape\":3,\"data_offsets\":[0,1]}}", 1, WC_E_FORMAT,
		      "not an array");
	expect_reject("{\"t\":{\"dtype\":\"U8\",\"shape\":[1.5],\"data_offsets\":[0,1]}}", 1, WC_E_FORMAT,
		      "not an integer");
	expect_reject("{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0]}}", 1, WC_E_FORMAT,
		      "data_offsets");
	expect_reject("{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[-1,0]}}", 1, WC_E_FORMAT,
		      "data_offsets");
	expect_reject("{\"t\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,1]}}", 1, WC_E_FORMAT,
		      "negative");
	expect_reject("{\"t\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296,2],\"data_offsets\":[0,1]}}", 1,
		      WC_E_FORMAT, "overflows");
	expect_reject("{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,0]}}", 1, WC_E_FORMAT,
		      "end 0 < begin 1");
	expect_reject("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, WC_E_FORMAT,
		      "shape x F32 size = 8");
}
END_TEST

START_TEST(rejects_bad_layout)
{
	expect_reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
		      "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[2,6]}}",
		      6, WC_E_FORMAT, "\"a\" and \"b\" overlap");
	expect_reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
		      "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[6,10]}}",
		      10, WC_E_FORMAT, "hole of 2 bytes");
	expect_reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[2,6]}}", 6, WC_E_FORMAT, "hole");
	expect_reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 9, WC_E_FORMAT,
		      "5 trailing bytes");
	expect_reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 3, WC_E_FORMAT,
		      "truncated");
}
END_TEST

START_TEST(rejects_bad_length)
{
	uint8_t b[16] = {0};
	wc_st_header *h;
	ck_assert_int_eq(wc_st_parse(b, 7, 7, &h), WC_E_FORMAT);
	/* Length beyond the file. */
	b[0] = 100;
	ck_assert_int_eq(wc_st_parse(b, 16, 16, &h), WC_E_FORMAT);
	ck_assert_ptr_nonnull(strstr(wc_last_detail(), "truncated"));
	/* Length beyond the limit. */
	memset(b, 0, 8);
	b[4] = 1; /* 2^32 */
	ck_assert_int_eq(wc_st_parse(b, 16, 1ull << 40, &h), WC_E_RANGE);
	/* Buffer shorter than 8 + N although the file is long enough. */
	size_t len;
	uint8_t *img = image("{}", 0, &len);
	ck_assert_int_eq(wc_st_parse(img, len - 1, len, &h), WC_E_FORMAT);
	ck_assert_int_eq(wc_st_parse(img, len, len, &h), WC_OK);
	wc_st_free(h);
	free(img);
}
END_TEST

/* F4 and F6_* pack elements below a byte: a tensor's byte count is its
 * bits / 8, and its bits must end on a byte. */
START_TEST(sub_byte_dtypes)
{
	wc_st_header *h;
	ck_assert_uint_eq(wc_st_dtype_bits("F4"), 4);
	ck_assert_uint_eq(wc_st_dtype_bits("F6_E2M3"), 6);
	ck_assert_uint_eq(wc_st_dtype_size("F4"), 0);
	ck_assert_uint_eq(wc_st_dtype_size("C64"), 8);
	ck_assert_int_eq(parse("{\"a\":{\"dtype\":\"F4\",\"shape\":[2,3],\"data_offsets\":[0,3]},"
			       "\"b\":{\"dtype\":\"F6_E3M2\",\"shape\":[4],\"data_offsets\":[3,6]}}",
			       6, &h), WC_OK);
	ck_assert_uint_eq(h->ntensors, 2);
	wc_st_free(h);
	expect_reject("{\"a\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}", 2,
		      WC_E_FORMAT, "do not end on a byte");
	expect_reject("{\"a\":{\"dtype\":\"F6_E2M3\",\"shape\":[4],\"data_offsets\":[0,4]}}", 4,
		      WC_E_FORMAT, "size = 3 bytes");
}
END_TEST

/* Random single-byte corruptions of a valid header never crash or leak and
 * either parse or fail with FORMAT/RANGE. */
START_TEST(mutations_never_crash)
{
	const char *js = "{\"a\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[0,8]},"
			 "\"__metadata__\":{\"x\":\"y\"},"
			 "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}";
	size_t len;
	uint8_t *img = image(js, 12, &len);
	uint32_t rng = 12345;
	for (int iter = 0; iter < 4000; iter++) {
		uint8_t *m = malloc(len);
		memcpy(m, img, len);
		rng = rng * 1103515245u + 12345u;
		size_t pos = (rng >> 8) % len;
		rng = rng * 1103515245u + 12345u;
		m[pos] = (uint8_t)(rng >> 16);
		wc_st_header *h = NULL;
		wc_err e = wc_st_parse(m, len, len, &h);
		ck_assert(e == WC_OK || e == WC_E_FORMAT || e == WC_E_RANGE);
		if (e == WC_OK)
			wc_st_free(h);
		else
			ck_assert_str_ne(wc_last_detail(), "");
		free(m);
	}
	free(img);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("safetensors");
	TCase *tc = tcase_create("parse");
	tcase_add_test(tc, valid_header_sorted_by_offset);
	tcase_add_test(tc, empty_and_unknown_dtype);
	tcase_add_test(tc, rejects_bad_json);
	tcase_add_test(tc, rejects_bad_fields);
	tcase_add_test(tc, rejects_bad_layout);
	tcase_add_test(tc, rejects_bad_length);
	tcase_add_test(tc, sub_byte_dtypes);
	tcase_add_test(tc, mutations_never_crash);
	suite_add_tcase(s, tc);
	return check_run(s);
}
