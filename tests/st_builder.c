/* st_builder.c - see st_builder.h. */
#include "st_builder.h"

#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t next(uint64_t *s) /* splitmix64 */
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static double gauss(uint64_t *s)
{
	double u = ((next(s) >> 11) + 1.0) / 9007199254740993.0, v = (next(s) >> 11) / 9007199254740992.0;
	return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static unsigned elem_size(const char *dtype)
{
	static const char *const two[] = {"I16", "U16", "F16", "BF16"}, *const four[] = {"I32", "U32", "F32"},
				 *const eight[] = {"I64", "U64", "F64", "C64"};
	for (size_t i = 0; i < 4; i++)
		if (!strcmp(dtype, two[i]))
			return 2;
	for (size_t i = 0; i < 3; i++)
		if (!strcmp(dtype, four[i]))
			return 4;
	for (size_t i = 0; i < 4; i++)
		if (!strcmp(dtype, eight[i]))
			return 8;
	return 1;
}

static uint32_t f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

static uint16_t bf16_bits(float f)
{
	uint32_t u = f32_bits(f);
	u += 0x7fff + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}

static uint16_t f16_bits(float f) /* round-to-nearest for normal values, enough for |f| < 1 */
{
	uint32_t u = f32_bits(f), sign = (u >> 16) & 0x8000;
	int exp = (int)((u >> 23) & 0xff) - 127 + 15;
	uint32_t mant = u & 0x7fffff;
	if (exp <= 0)
		return (uint16_t)sign; /* flush tiny values */
	if (exp >= 31)
		return (uint16_t)(sign | 0x7c00);
	uint32_t h = sign | ((uint32_t)exp << 10) | (mant >> 13);
	if ((mant & 0x1fff) > 0x1000 || ((mant & 0x1fff) == 0x1000 && (h & 1)))
		h++;
	return (uint16_t)h;
}

void st_add(st_file *f, const char *name, const char *dtype, uint32_t ndim, const uint64_t *shape,
	    const char *fill, uint64_t *rng)
{
	st_tensor *t = &f->t[f->n++];
	snprintf(t->name, sizeof t->name, "%s", name);
	t->dtype = dtype;
	t->ndim = ndim;
	uint64_t n = 1;
	for (uint32_t d = 0; d < ndim; d++)
		n *= (t->shape[d] = shape[d]);
	unsigned es = elem_size(dtype);
	t->nbytes = n * es;
	t->data = malloc(t->nbytes ? t->nbytes : 1);
	uint8_t *p = t->data;
	for (uint64_t i = 0; i < n; i++, p += es) {
		if (!strcmp(fill, "const")) {
			memset(p, 0x3c, es);
		} else if (!strcmp(fill, "small")) {
			uint64_t v = next(rng) % 300;
			for (unsigned k = 0; k < es; k++)
				p[k] = (uint8_t)(v >> (8 * k));
		} else if (!strcmp(fill, "weights") && !strcmp(dtype, "BF16")) {
			uint16_t v = bf16_bits((float)(0.02 * gauss(rng)));
			memcpy(p, &v, 2);
		} else if (!strcmp(fill, "weights") && !strcmp(dtype, "F16")) {
			uint16_t v = f16_bits((float)(0.02 * gauss(rng)));
			memcpy(p, &v, 2);
		} else if (!strcmp(fill, "weights") && !strcmp(dtype, "F32")) {
			float v = (float)(0.02 * gauss(rng));
			memcpy(p, &v, 4);
		} else {
			uint64_t v = next(rng);
			memcpy(p, &v, es);
		}
	}
}

void st_all_dtypes(st_file *f, uint64_t seed)
{
	static const char *const dtypes[] = {"BOOL", "U8", "I8", "F8_E4M3", "F8_E5M2", "I16", "U16", "F16",
					     "BF16", "I32", "U32", "F32", "I64", "U64", "F64", "C64", "F8_E8M0"};
	uint64_t rng = seed;
	memset(f, 0, sizeof *f);
	char name[64];
	for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
		const char *d = dtypes[i];
		uint64_t zero[2] = {3, 0}, one[1] = {1}, vec[1] = {1000}, mat[2] = {37, 129}, big[1] = {5000};
		snprintf(name, sizeof name, "%s.empty", d);
		st_add(f, name, d, 2, zero, "random", &rng);
		snprintf(name, sizeof name, "%s.scalar", d);
		st_add(f, name, d, 0, NULL, "random", &rng);
		snprintf(name, sizeof name, "%s.one", d);
		st_add(f, name, d, 1, one, "random", &rng);
		snprintf(name, sizeof name, "%s.random", d);
		st_add(f, name, d, 1, vec, "random", &rng);
		snprintf(name, sizeof name, "%s.const", d);
		st_add(f, name, d, 1, big, "const", &rng);
		snprintf(name, sizeof name, "%s.small", d);
		st_add(f, name, d, 2, mat, "small", &rng);
	}
	uint64_t w[2] = {64, 160};
	st_add(f, "model.bf16.weight", "BF16", 2, w, "weights", &rng);
	st_add(f, "model.f16.weight", "F16", 2, w, "weights", &rng);
	st_add(f, "model.f32.weight", "F32", 2, w, "weights", &rng);
}

uint8_t *st_serialize(const st_file *f, size_t *len)
{
	size_t cap = 256 + f->n * 256, pos = 0;
	char *js = malloc(cap);
	pos += (size_t)snprintf(js + pos, cap - pos, "{\"__metadata__\":{\"format\":\"pt\"}");
	uint64_t off = 0;
	for (size_t i = 0; i < f->n; i++) {
		const st_tensor *t = &f->t[i];
		pos += (size_t)snprintf(js + pos, cap - pos, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", t->name, t->dtype);
		for (uint32_t d = 0; d < t->ndim; d++)
			pos += (size_t)snprintf(js + pos, cap - pos, "%s%llu", d ? "," : "",
						(unsigned long long)t->shape[d]);
		pos += (size_t)snprintf(js + pos, cap - pos, "],\"data_offsets\":[%llu,%llu]}",
					(unsigned long long)off, (unsigned long long)(off + t->nbytes));
		off += t->nbytes;
	}
	js[pos++] = '}';
	while (pos % 8)
		js[pos++] = ' ';
	*len = 8 + pos + off;
	uint8_t *b = malloc(*len);
	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)((uint64_t)pos >> (8 * i));
	memcpy(b + 8, js, pos);
	size_t o = 8 + pos;
	for (size_t i = 0; i < f->n; i++) {
		memcpy(b + o, f->t[i].data, f->t[i].nbytes);
		o += f->t[i].nbytes;
	}
	free(js);
	return b;
}

int st_write_bytes(const char *path, const uint8_t *b, size_t len)
{
	FILE *fp = fopen(path, "wb");
	if (!fp)
		return -1;
	size_t w = fwrite(b, 1, len, fp);
	return (fclose(fp) == 0 && w == len) ? 0 : -1;
}

int st_copy_flipped(const char *src, const char *dst, uint64_t off, uint8_t mask)
{
	FILE *in = fopen(src, "rb");
	if (!in)
		return -1;
	uint8_t *b = NULL;
	long n = -1;
	if (fseek(in, 0, SEEK_END) == 0 && (n = ftell(in)) >= 0 && fseek(in, 0, SEEK_SET) == 0)
		b = malloc(n ? (size_t)n : 1);
	int rc = -1;
	if (b && fread(b, 1, (size_t)n, in) == (size_t)n && off < (uint64_t)n) {
		b[off] ^= mask;
		rc = st_write_bytes(dst, b, (size_t)n);
	}
	fclose(in);
	free(b);
	return rc;
}

void st_free(st_file *f)
{
	for (size_t i = 0; i < f->n; i++)
		free(f->t[i].data);
	f->n = 0;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

char *st_temp_dir(char *dir, size_t n, const char *stem)
{
	snprintf(dir, n, "%s/%s.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", stem);
	return mkdtemp(dir);
}

void st_add_channels_last(st_file *f, const char *name, uint64_t rows, uint64_t cols, uint64_t *rng)
{
	const uint64_t shape[2] = { rows, cols };
	st_add(f, name, "F32", 2, shape, "weights", rng);
	st_tensor *t = &f->t[f->n - 1];
	for (uint64_t e = 0; e < rows * cols; e++) {
		float v;
		memcpy(&v, t->data + 4 * e, 4);
		v *= (float)(1u << (e % cols % 8));
		memcpy(t->data + 4 * e, &v, 4);
	}
}

int st_remove_tree(const char *dir)
{
	return nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}
