/* test_planes.c - dtype -> layout mapping, layout names, and plane
 * split/merge against the formulas of docs/FORMAT.md section 2. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "codec/codec_internal.h" /* wc_rans_isa_limit: every merge path */
#include "codec/planes.h"
#include "codec_testutil.h"

static void expect_layout(const char *dtype, const char *name, unsigned kind, unsigned w)
{
	wc_layout l = wc_layout_for_dtype(dtype);
	ck_assert_msg(l.kind == kind && l.elem_size == w && l.nplanes == w, "dtype %s", dtype ? dtype : "NULL");
	ck_assert_str_eq(wc_layout_name(l), name);
	wc_layout back;
	ck_assert_int_eq(wc_layout_parse(name, &back), 0);
	ck_assert(back.kind == l.kind && back.elem_size == l.elem_size && back.nplanes == l.nplanes);
}

START_TEST(every_safetensors_dtype)
{
	expect_layout("BF16", "bf16", WC_LAYOUT_BF16, 2);
	expect_layout("F32", "f32", WC_LAYOUT_F32, 4);
	expect_layout("F16", "shuffle2", WC_LAYOUT_SHUFFLE, 2);
	expect_layout("I16", "shuffle2", WC_LAYOUT_SHUFFLE, 2);
	expect_layout("U16", "shuffle2", WC_LAYOUT_SHUFFLE, 2);
	expect_layout("I32", "shuffle4", WC_LAYOUT_SHUFFLE, 4);
	expect_layout("U32", "shuffle4", WC_LAYOUT_SHUFFLE, 4);
	expect_layout("F64", "shuffle8", WC_LAYOUT_SHUFFLE, 8);
	expect_layout("I64", "shuffle8", WC_LAYOUT_SHUFFLE, 8);
	expect_layout("U64", "shuffle8", WC_LAYOUT_SHUFFLE, 8);
	expect_layout("C64", "shuffle8", WC_LAYOUT_SHUFFLE, 8);
	const char *bytes[] = {"BOOL", "U8", "I8", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F4", "bf16", "", "F128", NULL};
	for (size_t i = 0; i < sizeof bytes / sizeof bytes[0]; i++)
		expect_layout(bytes[i], "bytes", WC_LAYOUT_BYTES, 1);
}
END_TEST

START_TEST(layout_parse_rejects_unknown)
{
	wc_layout l = {9, 9, 9};
	ck_assert_int_eq(wc_layout_parse("f16", &l), -1);
	ck_assert_int_eq(wc_layout_parse("BF16", &l), -1);
	ck_assert_int_eq(wc_layout_parse("shuffle3", &l), -1);
	ck_assert_int_eq(wc_layout_parse("", &l), -1);
	ck_assert_int_eq(wc_layout_parse(NULL, &l), -1);
	ck_assert_uint_eq(l.kind, 9);
}
END_TEST

/* Planes of one element computed straight from the FORMAT.md table. */
static void expected_planes(wc_layout l, const uint8_t *e, uint8_t pl[8])
{
	if (l.kind == WC_LAYOUT_BF16) {
		uint16_t v = (uint16_t)(e[0] | e[1] << 8);
		pl[0] = (v >> 7) & 0xff;
		pl[1] = (uint8_t)(((v >> 8) & 0x80) | (v & 0x7f));
	} else if (l.kind == WC_LAYOUT_F32) {
		uint32_t u = e[0] | e[1] << 8 | e[2] << 16 | (uint32_t)e[3] << 24;
		uint32_t r = (u & 0x7fffff) | ((u >> 31) << 23);
		pl[0] = (u >> 23) & 0xff;
		pl[1] = r & 0xff;
		pl[2] = (r >> 8) & 0xff;
		pl[3] = (uint8_t)(r >> 16);
	} else {
		for (unsigned k = 0; k < l.elem_size; k++)
			pl[k] = e[l.elem_size - 1 - k];
	}
}

START_TEST(split_follows_format_and_merge_inverts)
{
	const char *dtypes[] = {"BF16", "F32", "F16", "I32", "F64", "U8"};
	const size_t counts[] = {0, 1, 2, 3, 7, 15, 16, 17, 31, 32, 33, 63, 64, 65, 1000, 4099};
	uint64_t seed = 11;
	for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
		wc_layout l = wc_layout_for_dtype(dtypes[d]);
		for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
			size_t n = counts[c], bytes = n * l.elem_size;
			uint8_t *in = malloc(bytes + 1), *out = malloc(bytes + 1);
			uint8_t *planes[WC_MAX_PLANES];
			for (size_t i = 0; i < bytes; i++)
				in[i] = (uint8_t)tu_next(&seed);
			for (unsigned k = 0; k < l.nplanes; k++)
				planes[k] = malloc(n + 1);
			wc_planes_split(l, in, n, planes);
			for (size_t i = 0; i < n; i++) {
				uint8_t want[8];
				expected_planes(l, in + i * l.elem_size, want);
				for (unsigned k = 0; k < l.nplanes; k++)
					ck_assert_msg(planes[k][i] == want[k], "%s elem %zu plane %u", dtypes[d], i, k);
			}
			/* Every merge path: the decoders' choice capped at scalar
			 * (SSE2 on x86-64), AVX2, and the CPU's best. */
			for (int isa = WC_RANS_ISA_SCALAR; isa <= WC_RANS_ISA_AVX512; isa++) {
				wc_rans_isa_limit = isa;
				memset(out, 0, bytes);
				out[bytes] = 0x5a;
				wc_planes_merge(l, (const uint8_t *const *)planes, n, out);
				ck_assert_msg(memcmp(in, out, bytes) == 0, "%s n=%zu isa %d", dtypes[d], n, isa);
				ck_assert_uint_eq(out[bytes], 0x5a);
			}
			wc_rans_isa_limit = 0;
			for (unsigned k = 0; k < l.nplanes; k++)
				free(planes[k]);
			free(in);
			free(out);
		}
	}
}
END_TEST

START_TEST(known_values)
{
	/* BF16 1.0 = 0x3f80: exponent 127, mantissa 0; -2.0 = 0xc000. */
	wc_layout l = wc_layout_for_dtype("BF16");
	const uint8_t in[4] = {0x80, 0x3f, 0x00, 0xc0};
	uint8_t p0[2], p1[2];
	uint8_t *pl[2] = {p0, p1};
	wc_planes_split(l, in, 2, pl);
	ck_assert_uint_eq(p0[0], 127);
	ck_assert_uint_eq(p1[0], 0);
	ck_assert_uint_eq(p0[1], 128);
	ck_assert_uint_eq(p1[1], 0x80);
	/* F32 -1.5 = 0xbfc00000: exponent 127, r = 0x400000 | 1<<23. */
	wc_layout f = wc_layout_for_dtype("F32");
	const uint8_t fin[4] = {0x00, 0x00, 0xc0, 0xbf};
	uint8_t q[4][1];
	uint8_t *ql[4] = {q[0], q[1], q[2], q[3]};
	wc_planes_split(f, fin, 1, ql);
	ck_assert_uint_eq(q[0][0], 127);
	ck_assert_uint_eq(q[1][0], 0);
	ck_assert_uint_eq(q[2][0], 0);
	ck_assert_uint_eq(q[3][0], 0xc0);
}
END_TEST

START_TEST(histogram_counts_each_plane)
{
	const char *dtypes[] = {"BF16", "F32", "F16", "I64", "U8"};
	uint64_t seed = 77;
	for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
		wc_layout l = wc_layout_for_dtype(dtypes[d]);
		size_t n = 3000; /* several blocks and a partial one */
		uint8_t *in = malloc(n * l.elem_size);
		for (size_t i = 0; i < n * l.elem_size; i++)
			in[i] = (uint8_t)(tu_next(&seed) % 37);
		uint64_t (*h)[256] = calloc(WC_MAX_PLANES, sizeof *h);
		wc_planes_histogram(l, in, 1000, h);
		wc_planes_histogram(l, in + 1000 * l.elem_size, n - 1000, h); /* accumulates */
		uint8_t *planes[WC_MAX_PLANES] = {0};
		for (unsigned p = 0; p < l.nplanes; p++)
			planes[p] = malloc(n);
		wc_planes_split(l, in, n, planes);
		for (unsigned p = 0; p < l.nplanes; p++) {
			uint64_t want[256] = {0}, total = 0;
			for (size_t i = 0; i < n; i++)
				want[planes[p][i]]++;
			for (int s = 0; s < 256; s++) {
				ck_assert_msg(h[p][s] == want[s], "%s plane %u symbol %d", dtypes[d], p, s);
				total += h[p][s];
			}
			ck_assert_uint_eq(total, n);
			free(planes[p]);
		}
		free(h);
		free(in);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("planes");
	TCase *tc = tcase_create("planes");
	tcase_add_test(tc, every_safetensors_dtype);
	tcase_add_test(tc, layout_parse_rejects_unknown);
	tcase_add_test(tc, split_follows_format_and_merge_inverts);
	tcase_add_test(tc, known_values);
	tcase_add_test(tc, histogram_counts_each_plane);
	suite_add_tcase(s, tc);
	return check_run(s);
}
