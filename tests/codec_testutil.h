/* codec_testutil.h - deterministic data generators for the codec tests. */
#ifndef WC_CODEC_TESTUTIL_H
#define WC_CODEC_TESTUTIL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* splitmix64: a small, well-mixed deterministic generator. */
static inline uint64_t tu_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline double tu_uniform(uint64_t *s) { return (double)(tu_next(s) >> 11) * 0x1p-53; }

/* Standard normal by Box-Muller. */
static inline double tu_normal(uint64_t *s)
{
	double u = tu_uniform(s), v = tu_uniform(s);
	if (u < 1e-300)
		u = 1e-300;
	return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static inline uint16_t tu_f32_to_bf16(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	u += 0x7fff + ((u >> 16) & 1); /* round to nearest even */
	return (uint16_t)(u >> 16);
}

/* IEEE 754 binary32 -> binary16 bits, round to nearest even (overflow to
 * infinity, subnormals kept, NaN stays NaN), in integer arithmetic: C11 has
 * no half type, and _Float16 is missing from some compilers' x86 targets. */
static inline uint16_t tu_f32_to_f16(float f)
{
	uint32_t x;
	memcpy(&x, &f, 4);
	uint32_t sign = (x >> 16) & 0x8000u, exp = (x >> 23) & 0xffu, man = x & 0x7fffffu;
	if (exp == 0xffu)
		return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0));
	int e = (int)exp - 127 + 15;
	if (e >= 31)
		return (uint16_t)(sign | 0x7c00u);
	uint32_t h, rem, half;
	if (e <= 0) { /* binary16 subnormal: units of 2^-24 */
		if (e < -10)
			return (uint16_t)sign;
		man |= 0x800000u;
		unsigned shift = (unsigned)(14 - e);
		h = man >> shift;
		rem = man & ((1u << shift) - 1);
		half = 1u << (shift - 1);
	} else {
		h = ((uint32_t)e << 10) | (man >> 13);
		rem = man & 0x1fffu;
		half = 0x1000u;
	}
	if (rem > half || (rem == half && (h & 1))) /* a carry into the exponent is right */
		h++;
	return (uint16_t)(sign | h);
}

/* binary16 bits -> binary32, exact. */
static inline float tu_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
	if (exp == 0) {
		float v = ldexpf((float)man, -24);
		return sign ? -v : v;
	}
	uint32_t x = sign | (exp == 31 ? 0x7f800000u | (man << 13) : ((exp + 112) << 23) | (man << 13));
	float v;
	memcpy(&v, &x, 4);
	return v;
}

/* Realistic weights: N(0, std) as BF16 (2 bytes each), F16 or F32. */
static inline void tu_weights_bf16(uint8_t *out, size_t n, double std, uint64_t seed)
{
	for (size_t i = 0; i < n; i++) {
		uint16_t v = tu_f32_to_bf16((float)(tu_normal(&seed) * std));
		memcpy(out + 2 * i, &v, 2);
	}
}

static inline void tu_weights_f16(uint8_t *out, size_t n, double std, uint64_t seed)
{
	for (size_t i = 0; i < n; i++) {
		uint16_t v = tu_f32_to_f16((float)(tu_normal(&seed) * std));
		memcpy(out + 2 * i, &v, 2);
	}
}

static inline void tu_weights_f32(uint8_t *out, size_t n, double std, uint64_t seed)
{
	for (size_t i = 0; i < n; i++) {
		float f = (float)(tu_normal(&seed) * std);
		memcpy(out + 4 * i, &f, 4);
	}
}

static inline void tu_hist(const uint8_t *p, size_t n, uint64_t hist[256])
{
	memset(hist, 0, 256 * sizeof hist[0]);
	for (size_t i = 0; i < n; i++)
		hist[p[i]]++;
}

#endif
