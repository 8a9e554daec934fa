/* planes.c - dtype -> plane layout, and splitting/merging byte planes
 * (docs/FORMAT.md section 2). */
#include <string.h>

#include "codec/planes.h"

static const struct {
	const char *dtype;
	wc_layout layout;
} dtype_layouts[] = {
	{"BF16", {WC_LAYOUT_BF16, 2, 2}},
	{"F32", {WC_LAYOUT_F32, 4, 4}},
	{"F16", {WC_LAYOUT_SHUFFLE, 2, 2}},
	{"I16", {WC_LAYOUT_SHUFFLE, 2, 2}},
	{"U16", {WC_LAYOUT_SHUFFLE, 2, 2}},
	{"I32", {WC_LAYOUT_SHUFFLE, 4, 4}},
	{"U32", {WC_LAYOUT_SHUFFLE, 4, 4}},
	{"F64", {WC_LAYOUT_SHUFFLE, 8, 8}},
	{"I64", {WC_LAYOUT_SHUFFLE, 8, 8}},
	{"U64", {WC_LAYOUT_SHUFFLE, 8, 8}},
	{"C64", {WC_LAYOUT_SHUFFLE, 8, 8}},
};

static const wc_layout bytes_layout = {WC_LAYOUT_BYTES, 1, 1};

wc_layout wc_layout_for_dtype(const char *dtype)
{
	for (size_t i = 0; dtype && i < sizeof dtype_layouts / sizeof dtype_layouts[0]; i++)
		if (strcmp(dtype, dtype_layouts[i].dtype) == 0)
			return dtype_layouts[i].layout;
	return bytes_layout;
}

static const struct {
	const char *name;
	wc_layout layout;
} layout_names[] = {
	{"bytes", {WC_LAYOUT_BYTES, 1, 1}},
	{"shuffle2", {WC_LAYOUT_SHUFFLE, 2, 2}},
	{"shuffle4", {WC_LAYOUT_SHUFFLE, 4, 4}},
	{"shuffle8", {WC_LAYOUT_SHUFFLE, 8, 8}},
	{"bf16", {WC_LAYOUT_BF16, 2, 2}},
	{"f32", {WC_LAYOUT_F32, 4, 4}},
};

const char *wc_layout_name(wc_layout l)
{
	for (size_t i = 0; i < sizeof layout_names / sizeof layout_names[0]; i++) {
		wc_layout k = layout_names[i].layout;
		if (k.kind == l.kind && k.elem_size == l.elem_size && k.nplanes == l.nplanes)
			return layout_names[i].name;
	}
	return "invalid";
}

int wc_layout_parse(const char *name, wc_layout *out)
{
	for (size_t i = 0; name && i < sizeof layout_names / sizeof layout_names[0]; i++) {
		if (strcmp(name, layout_names[i].name) == 0) {
			*out = layout_names[i].layout;
			return 0;
		}
	}
	return -1;
}

static void split_bf16(const uint8_t *in, size_t n, uint8_t *p0, uint8_t *p1)
{
	for (size_t i = 0; i < n; i++) {
		uint16_t v = (uint16_t)(in[2 * i] | in[2 * i + 1] << 8);
		p0[i] = (uint8_t)(v >> 7);
		p1[i] = (uint8_t)(((v >> 8) & 0x80) | (v & 0x7f));
	}
}

static void merge_bf16(const uint8_t *p0, const uint8_t *p1, size_t n, uint8_t *out)
{
	for (size_t i = 0; i < n; i++) {
		uint16_t v = (uint16_t)((p0[i] << 7) | ((p1[i] & 0x80) << 8) | (p1[i] & 0x7f));
		memcpy(out + 2 * i, &v, 2);
	}
}

static void split_f32(const uint8_t *in, size_t n, uint8_t *const pl[])
{
	for (size_t i = 0; i < n; i++) {
		uint32_t u;
		memcpy(&u, in + 4 * i, 4);
		uint32_t r = (u & 0x7fffff) | ((u >> 31) << 23);
		pl[0][i] = (uint8_t)(u >> 23);
		pl[1][i] = (uint8_t)r;
		pl[2][i] = (uint8_t)(r >> 8);
		pl[3][i] = (uint8_t)(r >> 16);
	}
}

static void merge_f32(const uint8_t *const pl[], size_t n, uint8_t *out)
{
	const uint8_t *p0 = pl[0], *p1 = pl[1], *p2 = pl[2], *p3 = pl[3];
	for (size_t i = 0; i < n; i++) {
		uint32_t u = ((uint32_t)p0[i] << 23) | ((uint32_t)(p3[i] & 0x80) << 24) |
			     ((uint32_t)(p3[i] & 0x7f) << 16) | ((uint32_t)p2[i] << 8) | p1[i];
		memcpy(out + 4 * i, &u, 4);
	}
}

void wc_planes_split(wc_layout l, const uint8_t *in, size_t nelem, uint8_t *const planes[])
{
	switch (l.kind) {
	case WC_LAYOUT_BF16:
		split_bf16(in, nelem, planes[0], planes[1]);
		return;
	case WC_LAYOUT_F32:
		split_f32(in, nelem, planes);
		return;
	default:
		break;
	}
	unsigned w = l.elem_size;
	if (w == 1) {
		memcpy(planes[0], in, nelem);
		return;
	}
	for (unsigned k = 0; k < w; k++) {
		uint8_t *dst = planes[k];
		const uint8_t *src = in + (w - 1 - k);
		for (size_t i = 0; i < nelem; i++)
			dst[i] = src[i * w];
	}
}

/* Shuffle merges with a constant element size, so the compiler can unroll. */
#define MERGE_SHUFFLE(W)                                                   \
	static void merge_shuffle##W(const uint8_t *const pl[], size_t n, uint8_t *out) \
	{                                                                  \
		for (size_t i = 0; i < n; i++)                             \
			for (unsigned k = 0; k < (W); k++)                 \
				out[i * (W) + ((W) - 1 - k)] = pl[k][i];   \
	}
MERGE_SHUFFLE(2)
MERGE_SHUFFLE(4)
MERGE_SHUFFLE(8)

void wc_planes_merge(wc_layout l, const uint8_t *const planes[], size_t nelem, uint8_t *out)
{
	switch (l.kind) {
	case WC_LAYOUT_BF16:
		merge_bf16(planes[0], planes[1], nelem, out);
		return;
	case WC_LAYOUT_F32:
		merge_f32(planes, nelem, out);
		return;
	default:
		break;
	}
	switch (l.elem_size) {
	case 2: merge_shuffle2(planes, nelem, out); return;
	case 4: merge_shuffle4(planes, nelem, out); return;
	case 8: merge_shuffle8(planes, nelem, out); return;
	default: memmove(out, planes[0], nelem); return;
	}
}
