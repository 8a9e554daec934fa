/* lossy.c - int8 codes with a scale per output channel (lossy.h). */
#include "codec/lossy.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "core/le.h"

#define LEVELS 26 /* clipping levels 0.50, 0.52, ..., 1.00 of a channel's largest magnitude */
#define MIN_PER_CHANNEL 32u /* a 32-bit scale per 32 elements: a bit per weight */

unsigned wc_lossy_dtype_size(wc_lossy_dtype dt) { return dt == WC_LOSSY_F32 ? 4u : 2u; }

int wc_lossy_dtype_of(const char *s)
{
	if (strcmp(s, "F32") == 0)
		return WC_LOSSY_F32;
	if (strcmp(s, "BF16") == 0)
		return WC_LOSSY_BF16;
	if (strcmp(s, "F16") == 0)
		return WC_LOSSY_F16;
	return -1;
}

uint16_t wc_f32_to_bf16(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40u); /* NaN stays NaN */
	return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

uint16_t wc_f32_to_f16(float f)
{
	uint32_t x;
	memcpy(&x, &f, 4);
	const uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
	if (ax > 0x7f800000u)
		return (uint16_t)(sign | 0x7e00u);
	if (ax >= 0x47800000u) /* 65536 and above, infinity */
		return (uint16_t)(sign | 0x7c00u);
	if (ax < 0x33000000u) /* below 2^-25: zero */
		return (uint16_t)sign;
	const uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u;
	uint32_t q, rem, half;
	if (e < 113) { /* a subnormal F16: units of 2^-24 */
		const uint32_t shift = 126u - e;
		q = m >> shift;
		rem = m & ((1u << shift) - 1u);
		half = 1u << (shift - 1u);
	} else {
		q = ((e - 112u) << 10) | ((m >> 13) & 0x3ffu);
		rem = m & 0x1fffu;
		half = 0x1000u;
	}
	if (rem > half || (rem == half && (q & 1u)))
		q++; /* a carry into the exponent is right, up to infinity */
	return (uint16_t)(sign | q);
}

static float f16_to_f32(uint16_t h)
{
	const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
	uint32_t u;
	if (e == 31)
		u = sign | 0x7f800000u | (m << 13);
	else if (e)
		u = sign | ((e + 112u) << 23) | (m << 13);
	else if (!m)
		u = sign;
	else { /* subnormal: normalise */
		uint32_t k = 0, mm = m;
		while (!(mm & 0x400u)) {
			mm <<= 1;
			k++;
		}
		u = sign | ((113u - k) << 23) | ((mm & 0x3ffu) << 13);
	}
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static float load(const uint8_t *in, wc_lossy_dtype dt, uint64_t i)
{
	if (dt == WC_LOSSY_F32) {
		uint32_t u = wc_get_u32(in + 4 * i);
		float f;
		memcpy(&f, &u, 4);
		return f;
	}
	uint16_t h = wc_get_u16(in + 2 * i);
	if (dt == WC_LOSSY_F16)
		return f16_to_f32(h);
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

/* v rounded to the dtype and back (what a reader sees). */
static float as_dtype(float v, wc_lossy_dtype dt)
{
	if (dt == WC_LOSSY_F32)
		return v;
	if (dt == WC_LOSSY_F16)
		return f16_to_f32(wc_f32_to_f16(v));
	uint32_t u = (uint32_t)wc_f32_to_bf16(v) << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static int8_t code_of(float x, float s, float qmax)
{
	if (s == 0.0f)
		return 0;
	float q = rintf(x / s);
	return (int8_t)(q > qmax ? qmax : q < -qmax ? -qmax : q);
}

uint64_t wc_lossy_nscales(const wc_lossy_params *p)
{
	const uint64_t per = p->elems / p->channels;
	return (uint64_t)p->channels * (p->group ? (per + p->group - 1) / p->group : 1);
}

/* The scale of each of consecutive elements, without a division per
 * element: element e is at position k of channel c (axis 0: c = e / per,
 * k = e % per; axis 1: c = e % C, k = e / C), in group g = k / group of
 * it, and its scale is scales[c * groups + g]. */
typedef struct chan_walk {
	uint64_t c, k, g, kg; /* kg: k's place within its group */
	uint64_t per, C, groups, group;
	int axis;
} chan_walk;

static inline chan_walk walk_at(const wc_lossy_params *p, uint64_t e)
{
	chan_walk w = {.per = p->elems / p->channels, .C = p->channels, .axis = p->axis};
	w.group = p->group ? p->group : w.per;
	w.groups = (w.per + w.group - 1) / w.group;
	w.c = p->axis == 0 ? e / w.per : e % p->channels;
	w.k = p->axis == 0 ? e % w.per : e / p->channels;
	w.g = w.k / w.group;
	w.kg = w.k % w.group;
	return w;
}

static inline uint64_t walk_slot(const chan_walk *w) { return w->c * w->groups + w->g; }

static inline void walk_k(chan_walk *w)
{
	w->k++;
	if (++w->kg == w->group) {
		w->kg = 0;
		w->g++;
	}
}

static inline void walk_next(chan_walk *w)
{
	if (w->axis) {
		if (++w->c == w->C) {
			w->c = 0;
			walk_k(w);
		}
	} else {
		walk_k(w);
		if (w->k == w->per) {
			w->k = w->kg = w->g = 0;
			w->c++;
		}
	}
}

/* Choose the scales of p's slots (p->channels on p->axis, in groups of
 * p->group) for x[0..n) with codes in [-qmax, qmax], and return the total
 * squared error they give. err and amax: room for 2 * slots and slots. */
static double choose(const float *x, const wc_lossy_params *p, float qmax, float *scales, double *err, float *amax)
{
	const uint64_t n = p->elems, S = wc_lossy_nscales(p);
	for (uint64_t c = 0; c < S; c++)
		amax[c] = 0.0f;
	chan_walk w = walk_at(p, 0);
	for (uint64_t e = 0; e < n; e++, walk_next(&w)) {
		float a = fabsf(x[e]);
		if (a > amax[walk_slot(&w)])
			amax[walk_slot(&w)] = a;
	}
	for (uint64_t c = 0; c < S; c++) {
		scales[c] = amax[c] / qmax;
		err[c] = INFINITY;
	}
	double *cur = err + S;
	for (int l = 0; l < LEVELS; l++) {
		const float r = 0.5f + 0.02f * (float)l;
		for (uint64_t c = 0; c < S; c++)
			cur[c] = 0.0;
		w = walk_at(p, 0);
		for (uint64_t e = 0; e < n; e++, walk_next(&w)) {
			const uint64_t slot = walk_slot(&w);
			float s = amax[slot] * r / qmax;
			double d = (double)((float)code_of(x[e], s, qmax) * s) - (double)x[e];
			cur[slot] += d * d;
		}
		for (uint64_t c = 0; c < S; c++)
			if (cur[c] < err[c]) {
				err[c] = cur[c];
				scales[c] = amax[c] * r / qmax;
			}
	}
	double total = 0.0;
	for (uint64_t c = 0; c < S; c++)
		total += err[c];
	return total;
}

uint64_t wc_lossy_scales_room(const uint64_t *shape, unsigned ndim, uint32_t group)
{
	uint64_t n = 1, best = 0;
	for (unsigned d = 0; d < ndim; d++)
		n *= shape[d];
	for (int a = 0; a < 2 && ndim; a++) {
		const uint64_t C = a ? shape[ndim - 1] : shape[0];
		if (!C)
			continue;
		const uint64_t per = n / C, k = C * (group ? (per + group - 1) / group : 1);
		best = k > best ? k : best;
	}
	return best ? best : 1;
}

wc_err wc_lossy_quantize(const uint8_t *in, wc_lossy_dtype dt, const uint64_t *shape, unsigned ndim, unsigned bits,
			 uint32_t group, int8_t *codes, float *scales, wc_lossy_params *p, wc_lossy_stats *st)
{
	if (ndim < 2 || dt > WC_LOSSY_F16 || (bits != 8 && bits != 4))
		return wc_fail(WC_E_INVAL, "lossy: a tensor of 2 or more dimensions and dtype F32, BF16 or F16; "
					   "int8 or int4 codes");
	uint64_t n = 1;
	for (unsigned d = 0; d < ndim; d++)
		n *= shape[d];
	const uint64_t C0 = shape[0], C1 = shape[ndim - 1];
	if (n == 0 || C0 == 0 || C1 == 0 || C0 > UINT32_MAX || C1 > UINT32_MAX)
		return wc_fail(WC_E_INVAL, "lossy: an empty tensor, or more than 2^32 channels");
	const float qmax = bits == 8 ? 127.0f : 7.0f;
	const uint64_t room = wc_lossy_scales_room(shape, ndim, group);
	float *x = malloc(n * sizeof *x), *s1 = malloc(room * sizeof *s1), *amax = malloc(room * sizeof *amax);
	double *err = malloc(2 * room * sizeof *err);
	if (!x || !s1 || !amax || !err) {
		free(x);
		free(s1);
		free(amax);
		free(err);
		return wc_fail(WC_E_NOMEM, "lossy: no memory for a tensor of %llu elements", (unsigned long long)n);
	}
	wc_err e = WC_OK;
	for (uint64_t i = 0; i < n && !e; i++)
		if (!isfinite(x[i] = load(in, dt, i)))
			e = wc_fail(WC_E_INVAL, "lossy: element %llu is not finite", (unsigned long long)i);
	if (!e) {
		/* An axis qualifies when its scales cost at most a bit per
		 * weight (MIN_PER_CHANNEL elements per channel); of two that
		 * do, the one with less error; of none, the fewer channels. */
		const int ok0 = n / C0 >= MIN_PER_CHANNEL, ok1 = n / C1 >= MIN_PER_CHANNEL;
		const int last = ok0 && ok1 ? -1 : ok0 != ok1 ? ok1 : C1 < C0; /* -1: by the error */
		const wc_lossy_params p0 = {.dtype = (uint8_t)dt, .bits = (uint8_t)bits, .axis = 0,
					    .channels = (uint32_t)C0, .group = group, .elems = n, .scales = scales};
		wc_lossy_params p1 = p0;
		p1.axis = 1;
		p1.channels = (uint32_t)C1;
		if (last == 1) { /* the only axis that qualifies: no trial of the other */
			choose(x, &p1, qmax, scales, err, amax);
			*p = p1;
		} else {
			double e0 = choose(x, &p0, qmax, scales, err, amax);
			*p = p0;
			if (last < 0 && choose(x, &p1, qmax, s1, err, amax) < e0) {
				memcpy(scales, s1, wc_lossy_nscales(&p1) * sizeof *scales);
				*p = p1;
			}
		}
		double sig = 0, d2 = 0, dabs = 0, dmax = 0;
		chan_walk w = walk_at(p, 0);
		for (uint64_t i = 0; i < n; i++, walk_next(&w)) {
			float s = scales[walk_slot(&w)];
			codes[i] = code_of(x[i], s, qmax);
			double d = (double)as_dtype((float)codes[i] * s, dt) - (double)x[i];
			sig += (double)x[i] * x[i];
			d2 += d * d;
			dabs += fabs(d);
			if (fabs(d) > dmax)
				dmax = fabs(d);
		}
		st->snr_db = d2 > 0 ? 10.0 * log10(sig / d2) : 999.0;
		st->max_abs_err = dmax;
		st->mean_abs_err = dabs / (double)n;
		st->rel_frobenius = sig > 0 ? sqrt(d2 / sig) : 0.0;
	}
	free(x);
	free(s1);
	free(amax);
	free(err);
	return e;
}

#if defined(__x86_64__)
#include <immintrin.h>
/* n floats to F16 bits with the F16C instruction (round to nearest even,
 * as wc_f32_to_f16); returns how many it converted (a multiple of 8). */
__attribute__((target("avx2,f16c"))) static size_t to_f16_f16c(const float *f, size_t n, uint8_t *out)
{
	size_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm_storeu_si128((__m128i *)(out + 2 * i), _mm256_cvtps_ph(_mm256_loadu_ps(f + i), _MM_FROUND_TO_NEAREST_INT));
	return i;
}
#endif

#define BLOCK 256 /* elements dequantized at a time, from L1 */

void wc_lossy_dequant(const wc_lossy_params *p, const int8_t *codes, uint64_t first, size_t n, uint8_t *out)
{
#if defined(__x86_64__)
	/* every AVX2 CPU has F16C (Intel since Haswell, AMD since Piledriver) */
	const int f16c = p->dtype == WC_LOSSY_F16 && (wc_cpu_features() & WC_CPU_AVX2);
#endif
	chan_walk w = walk_at(p, first);
	int8_t c[BLOCK];
	float f[BLOCK];
	for (size_t b = 0; b < n; b += BLOCK) {
		const size_t m = n - b < BLOCK ? n - b : BLOCK;
		/* The codes first: a caller may decode in place, its codes in
		 * the tail of out (lossy_job.c), and this block's output reaches
		 * no code after the block's. */
		memcpy(c, codes + b, m);
		for (size_t i = 0; i < m; i++, walk_next(&w))
			f[i] = p->scales[walk_slot(&w)];
		for (size_t i = 0; i < m; i++)
			f[i] = (float)c[i] * f[i];
		uint8_t *o = out + b * wc_lossy_dtype_size((wc_lossy_dtype)p->dtype);
		size_t i = 0;
		if (p->dtype == WC_LOSSY_F32) {
			for (; i < m; i++) {
				uint32_t u;
				memcpy(&u, &f[i], 4);
				wc_put_u32(o + 4 * i, u);
			}
		} else if (p->dtype == WC_LOSSY_BF16) {
			for (; i < m; i++)
				wc_put_u16(o + 2 * i, wc_f32_to_bf16(f[i]));
		} else {
#if defined(__x86_64__)
			if (f16c)
				i = to_f16_f16c(f, m, o);
#endif
			for (; i < m; i++)
				wc_put_u16(o + 2 * i, wc_f32_to_f16(f[i]));
		}
	}
}
