/* test_lossy.c - int8 codes with a scale per output channel (codec/lossy.h,
 * docs/FORMAT.md 2.2): the float conversions round to nearest even, the
 * quantizer's error stays within half a step (plus the dtype's rounding)
 * for every dtype, axis and odd shape, a decode of any part equals that
 * part of the whole, and the axis with the smaller error is chosen. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "codec/lossy.h"
#include "core/le.h"

static float from_bits(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

/* F16 bits to a float, written independently of lossy.c: by ldexp. */
static float f16_value(uint16_t h)
{
	int e = (h >> 10) & 31, m = h & 1023;
	float v = e ? ldexpf((float)(1024 + m), e - 25) : ldexpf((float)m, -24);
	return (h & 0x8000) ? -v : v;
}

START_TEST(f16_rounds_to_nearest_even)
{
	/* every finite F16 value converts back to itself */
	for (uint32_t h = 0; h < 0x10000; h++) {
		if (((h >> 10) & 31) == 31)
			continue;
		ck_assert_uint_eq(wc_f32_to_f16(f16_value((uint16_t)h)), h);
	}
	/* between neighbours a < b: below the midpoint a, above it b, at it the even one */
	for (uint32_t h = 0; h < 0x7bff; h++) {
		float a = f16_value((uint16_t)h), b = f16_value((uint16_t)(h + 1));
		float m = (a + b) / 2; /* exact in binary32 */
		ck_assert_uint_eq(wc_f32_to_f16(nextafterf(m, 0.0f)), h);
		ck_assert_uint_eq(wc_f32_to_f16(nextafterf(m, INFINITY)), h + 1);
		ck_assert_uint_eq(wc_f32_to_f16(m), (h & 1) ? h + 1 : h);
		ck_assert_uint_eq(wc_f32_to_f16(-m), 0x8000u | ((h & 1) ? h + 1 : h));
	}
	ck_assert_uint_eq(wc_f32_to_f16(65504.0f), 0x7bff);
	ck_assert_uint_eq(wc_f32_to_f16(65520.0f), 0x7c00); /* the midpoint to infinity rounds up (even) */
	ck_assert_uint_eq(wc_f32_to_f16(1e9f), 0x7c00);
	ck_assert_uint_eq(wc_f32_to_f16(ldexpf(1.0f, -25)), 0); /* half the smallest subnormal: even, zero */
	ck_assert_uint_eq(wc_f32_to_f16(ldexpf(1.5f, -25)), 1);
	ck_assert_uint_eq(wc_f32_to_f16(-0.0f), 0x8000);
}
END_TEST

START_TEST(bf16_rounds_to_nearest_even)
{
	for (uint32_t h = 0; h < 0x7f7f; h += 7) {
		float a = from_bits(h << 16), b = from_bits((h + 1) << 16);
		float m = from_bits((h << 16) | 0x8000u); /* the midpoint */
		ck_assert(m > a && m < b);
		ck_assert_uint_eq(wc_f32_to_bf16(a), h);
		ck_assert_uint_eq(wc_f32_to_bf16(nextafterf(m, 0.0f)), h);
		ck_assert_uint_eq(wc_f32_to_bf16(nextafterf(m, INFINITY)), h + 1);
		ck_assert_uint_eq(wc_f32_to_bf16(m), (h & 1) ? h + 1 : h);
	}
}
END_TEST

static uint64_t rng = 88172645463325252ull;
static double urand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (double)(rng >> 11) / 9007199254740992.0;
}

static void store(uint8_t *p, wc_lossy_dtype dt, float v)
{
	if (dt == WC_LOSSY_F32) {
		uint32_t u;
		memcpy(&u, &v, 4);
		wc_put_u32(p, u);
	} else {
		wc_put_u16(p, dt == WC_LOSSY_F16 ? wc_f32_to_f16(v) : wc_f32_to_bf16(v));
	}
}

static float value(const uint8_t *p, wc_lossy_dtype dt)
{
	if (dt == WC_LOSSY_F32)
		return from_bits(wc_get_u32(p));
	uint16_t h = wc_get_u16(p);
	return dt == WC_LOSSY_F16 ? f16_value(h) : from_bits((uint32_t)h << 16);
}

/* Shapes: odd sizes, one row, one column, a 4-D convolution. */
static const uint64_t shapes[][4] = {{37, 53}, {1, 301}, {301, 1}, {8, 3, 5, 7}, {64, 64}};
static const unsigned ndims[] = {2, 2, 2, 4, 2};

/* Element i's scale slot under p (the header's definition, written again). */
static uint64_t slot_of(const wc_lossy_params *p, uint64_t i)
{
	const uint64_t per = p->elems / p->channels, c = p->axis ? i % p->channels : i / per,
		       k = p->axis ? i / p->channels : i % per;
	if (!p->group)
		return c;
	return c * ((per + p->group - 1) / p->group) + k / p->group;
}

START_TEST(round_trip_within_half_a_step)
{
	const wc_lossy_dtype dt = (wc_lossy_dtype)(_i % 3);
	const unsigned si = (unsigned)_i / 3 % 5, nd = ndims[si];
	const unsigned bits = _i >= 15 ? 4 : 8, group = bits == 4 ? 16 : 0; /* int4 in groups of 16 */
	const float qmax = bits == 8 ? 127.0f : 7.0f;
	const uint64_t *shape = shapes[si];
	uint64_t n = 1;
	for (unsigned d = 0; d < nd; d++)
		n *= shape[d];
	const unsigned w = wc_lossy_dtype_size(dt);
	uint8_t *in = malloc(n * w), *out = malloc(n * w), *part = malloc(n * w);
	int8_t *codes = malloc(n);
	float *scales = malloc(wc_lossy_scales_room(shape, nd, group) * sizeof *scales);
	for (uint64_t i = 0; i < n; i++) /* channels of different magnitudes along the last axis */
		store(in + i * w, dt, (float)((urand() - 0.5) * (1.0 + (double)(i % shape[nd - 1]))));
	wc_lossy_params p;
	wc_lossy_stats st;
	ck_assert_int_eq(wc_lossy_quantize(in, dt, shape, nd, bits, group, codes, scales, &p, &st), WC_OK);
	ck_assert_uint_eq(p.elems, n);
	ck_assert_uint_eq(p.channels, p.axis ? shape[nd - 1] : shape[0]);
	ck_assert(p.scales == scales);
	wc_lossy_dequant(&p, codes, 0, (size_t)n, out);
	double sig = 0, d2 = 0, dmax = 0;
	ck_assert_uint_eq(p.bits, bits);
	ck_assert_uint_eq(p.group, group);
	for (uint64_t i = 0; i < n; i++) {
		ck_assert(codes[i] >= -qmax && codes[i] <= qmax);
		float s = scales[slot_of(&p, i)];
		float x = value(in + i * w, dt), y = value(out + i * w, dt);
		/* half a step, the largest clipping, and the dtype's rounding of the result */
		double bound = 0.5 * s + (double)fabsf(x) * 0.5 + fabs((double)y) * (dt == WC_LOSSY_F32 ? 0 : 1.0 / 256);
		ck_assert_msg(fabs((double)x - y) <= bound, "element %llu: %g decoded as %g (scale %g)",
			      (unsigned long long)i, (double)x, (double)y, (double)s);
		/* the decode is the definition: code * scale in binary32, then the dtype */
		uint8_t want[4];
		store(want, dt, (float)codes[i] * s);
		ck_assert_int_eq(memcmp(want, out + i * w, w), 0);
		sig += (double)x * x;
		d2 += ((double)x - y) * ((double)x - y);
		if (fabs((double)x - y) > dmax)
			dmax = fabs((double)x - y);
	}
	ck_assert(fabs(st.snr_db - (d2 > 0 ? 10 * log10(sig / d2) : 999.0)) < 1e-6); /* 999: exact */
	ck_assert(fabs(st.max_abs_err - dmax) < 1e-12);
	ck_assert(st.snr_db > (bits == 8 ? 30 : 12)); /* uniform values: about 40 dB as int8, 18 as int4 */
	/* any part decodes as that part of the whole */
	for (uint64_t first = 0; first < n; first += 1 + (uint64_t)(urand() * 97)) {
		size_t len = (size_t)(n - first < 113 ? n - first : 113);
		wc_lossy_dequant(&p, codes + first, first, len, part);
		ck_assert_int_eq(memcmp(part, out + first * w, len * w), 0);
	}
	free(in);
	free(out);
	free(part);
	free(codes);
	free(scales);
}
END_TEST

START_TEST(axis_with_less_error_and_zero_channels)
{
	/* scales that differ along the first axis: axis 0 */
	uint64_t shape[2] = {16, 40};
	float in[640];
	for (int i = 0; i < 640; i++)
		in[i] = (float)((urand() - 0.5) * (i / 40 + 1) * (i / 40 + 1));
	int8_t codes[640];
	float scales[40];
	wc_lossy_params p;
	wc_lossy_stats st;
	ck_assert_int_eq(wc_lossy_quantize((const uint8_t *)in, WC_LOSSY_F32, shape, 2, 8, 0, codes, scales, &p, &st),
			 WC_OK);
	ck_assert_uint_eq(p.axis, 0);
	ck_assert_uint_eq(p.channels, 16);
	/* an all-zero tensor: scales 0, codes 0, exact */
	memset(in, 0, sizeof in);
	ck_assert_int_eq(wc_lossy_quantize((const uint8_t *)in, WC_LOSSY_F32, shape, 2, 8, 0, codes, scales, &p, &st),
			 WC_OK);
	for (int i = 0; i < 640; i++)
		ck_assert_int_eq(codes[i], 0);
	ck_assert(st.snr_db == 999.0 && st.max_abs_err == 0 && st.rel_frobenius == 0);
	/* refused: one dimension, non-finite values */
	ck_assert_int_eq(wc_lossy_quantize((const uint8_t *)in, WC_LOSSY_F32, shape, 1, 8, 0, codes, scales, &p, &st),
			 WC_E_INVAL);
	in[7] = NAN;
	ck_assert_int_eq(wc_lossy_quantize((const uint8_t *)in, WC_LOSSY_F32, shape, 2, 8, 0, codes, scales, &p, &st),
			 WC_E_INVAL);
	ck_assert_int_eq(wc_lossy_dtype_of("BF16"), WC_LOSSY_BF16);
	ck_assert_int_eq(wc_lossy_dtype_of("I8"), -1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("lossy");
	TCase *tc = tcase_create("lossy");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, f16_rounds_to_nearest_even);
	tcase_add_test(tc, bf16_rounds_to_nearest_even);
	tcase_add_loop_test(tc, round_trip_within_half_a_step, 0, 2 * 3 * 5); /* int8, int4 */
	tcase_add_test(tc, axis_with_less_error_and_zero_channels);
	suite_add_tcase(s, tc);
	return check_run(s);
}
