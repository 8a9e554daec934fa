/* safetensors.c - validating safetensors header parser (see safetensors.h). */
#include "container/safetensors.h"

#include "core/json_walk.h"

#include <stdlib.h>
#include <string.h>

/* The dtypes of the safetensors format (huggingface/safetensors, Dtype in
 * safetensors/src/tensor.rs) with their sizes in bits: F4 and the F6 kinds
 * are packed below a byte, and a tensor of them must end on a byte. */
static const struct {
	const char *name;
	unsigned bits;
} dtype_bits[] = {
	{"BOOL", 8}, {"F4", 4}, {"F6_E2M3", 6}, {"F6_E3M2", 6},
	{"U8", 8}, {"I8", 8}, {"F8_E4M3", 8}, {"F8_E5M2", 8}, {"F8_E8M0", 8},
	{"F8_E4M3FNUZ", 8}, {"F8_E5M2FNUZ", 8},
	{"I16", 16}, {"U16", 16}, {"F16", 16}, {"BF16", 16},
	{"I32", 32}, {"U32", 32}, {"F32", 32},
	{"I64", 64}, {"U64", 64}, {"F64", 64}, {"C64", 64},
};

unsigned wc_st_dtype_bits(const char *dtype)
{
	for (size_t i = 0; i < sizeof dtype_bits / sizeof dtype_bits[0]; i++)
		if (strcmp(dtype, dtype_bits[i].name) == 0)
			return dtype_bits[i].bits;
	return 0;
}

unsigned wc_st_dtype_size(const char *dtype)
{
	unsigned bits = wc_st_dtype_bits(dtype);
	return bits % 8 ? 0 : bits / 8;
}

static uint64_t load_u64le(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

wc_err wc_st_header_length(const uint8_t *first8, uint64_t file_size, uint64_t *n)
{
	if (file_size < 8)
		return wc_fail(WC_E_FORMAT, "safetensors: file of %llu bytes is shorter than the 8-byte header length",
			       (unsigned long long)file_size);
	uint64_t len = load_u64le(first8);
	if (len > WC_ST_HEADER_MAX)
		return wc_fail(WC_E_RANGE, "safetensors: JSON header length %llu exceeds the limit of %u bytes",
			       (unsigned long long)len, WC_ST_HEADER_MAX);
	if (len < 2)
		return wc_fail(WC_E_FORMAT, "safetensors: JSON header length %llu is too short for an object",
			       (unsigned long long)len);
	if (len > file_size - 8)
		return wc_fail(WC_E_FORMAT,
			       "safetensors: truncated file: header length %llu but only %llu bytes follow it",
			       (unsigned long long)len, (unsigned long long)(file_size - 8));
	*n = len;
	return WC_OK;
}

void wc_st_free(wc_st_header *h)
{
	if (!h)
		return;
	for (uint32_t i = 0; i < h->ntensors; i++) {
		free(h->tensors[i].name);
		free(h->tensors[i].dtype);
		free(h->tensors[i].shape);
	}
	free(h->tensors);
	if (h->metadata)
		json_decref(h->metadata);
	free(h);
}

/* A JSON integer in [0, 2^63). */
static int get_uint(const json_t *v, uint64_t *out)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return -1;
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

static wc_err parse_tensor(const char *name, const json_t *obj, uint64_t data_size, wc_st_tensor *t)
{
	if (!json_is_object(obj))
		return wc_fail(WC_E_FORMAT, "safetensors: tensor \"%s\": entry is not a JSON object", name);
	size_t name_len = strlen(name);
	if (name_len > WC_ST_NAME_MAX)
		return wc_fail(WC_E_RANGE, "safetensors: tensor name of %zu bytes exceeds the limit of %u",
			       name_len, WC_ST_NAME_MAX);

	const json_t *dtype = json_object_get(obj, "dtype");
	if (!dtype)
		return wc_fail(WC_E_FORMAT, "safetensors: tensor \"%s\": missing \"dtype\"", name);
	if (!json_is_string(dtype) || json_string_length(dtype) == 0)
		return wc_fail(WC_E_FORMAT, "safetensors: tensor \"%s\": \"dtype\" is not a non-empty string", name);
	if (json_string_length(dtype) > WC_ST_DTYPE_MAX)
		return wc_fail(WC_E_RANGE, "safetensors: tensor \"%s\": dtype name longer than %u bytes", name,
			       WC_ST_DTYPE_MAX);

	const json_t *shape = json_object_get(obj, "shape");
	if (!shape)
		return wc_fail(WC_E_FORMAT, "safetensors: tensor \"%s\": missing \"shape\"", name);
	if (!json_is_array(shape))
		return wc_fail(WC_E_FORMAT, "safetensors: tensor \"%s\": \"shape\" is not an array", name);
	size_t ndim = json_array_size(shape);
	if (ndim > WC_ST_NDIM_MAX)
		return wc_fail(WC_E_RANGE, "safetensors: tensor \"%s\": %zu dimensions exceed the limit of %u", name,
			       ndim, WC_ST_NDIM_MAX);

	const json_t *offs = json_object_get(obj, "data_offsets");
	if (!offs)
		return wc_fail(WC_E_FORMAT, "safetensors: tensor \"%s\": missing \"data_offsets\"", name);
	uint64_t begin, end;
	if (!json_is_array(offs) || json_array_size(offs) != 2 ||
	    get_uint(json_array_get(offs, 0), &begin) || get_uint(json_array_get(offs, 1), &end))
		return wc_fail(WC_E_FORMAT,
			       "safetensors: tensor \"%s\": \"data_offsets\" is not an array of two non-negative integers",
			       name);
	if (end < begin)
		return wc_fail(WC_E_FORMAT, "safetensors: tensor \"%s\": data_offsets end %llu < begin %llu", name,
			       (unsigned long long)end, (unsigned long long)begin);
	if (end > data_size)
		return wc_fail(WC_E_FORMAT,
			       "safetensors: truncated file: tensor \"%s\" ends at data offset %llu but the data section has %llu bytes",
			       name, (unsigned long long)end, (unsigned long long)data_size);

	t->ndim = (uint32_t)ndim;
	t->begin = begin;
	t->end = end;
	if (!(t->name = strdup(name)) || !(t->dtype = strdup(json_string_value(dtype))))
		return wc_fail(WC_E_NOMEM, "safetensors: out of memory");
	if (ndim && !(t->shape = malloc(ndim * sizeof *t->shape)))
		return wc_fail(WC_E_NOMEM, "safetensors: out of memory");

	/* prod(shape), detecting overflow; a zero dimension makes it 0 but
	 * every dimension is still range-checked. */
	uint64_t nelem = 1;
	int overflow = 0;
	for (size_t d = 0; d < ndim; d++) {
		const json_t *v = json_array_get(shape, d);
		if (!json_is_integer(v))
			return wc_fail(WC_E_FORMAT, "safetensors: tensor \"%s\": shape[%zu] is not an integer", name, d);
		if (json_integer_value(v) < 0)
			return wc_fail(WC_E_FORMAT, "safetensors: tensor \"%s\": shape[%zu] = %lld is negative", name,
				       d, (long long)json_integer_value(v));
		uint64_t dim = (uint64_t)json_integer_value(v);
		t->shape[d] = dim;
		if (dim && nelem > UINT64_MAX / dim)
			overflow = 1;
		nelem *= dim;
	}
	for (size_t d = 0; d < ndim; d++)
		if (t->shape[d] == 0)
			overflow = 0, nelem = 0;
	unsigned bits = wc_st_dtype_bits(t->dtype);
	if (bits) {
		if (overflow || nelem > UINT64_MAX / bits)
			return wc_fail(WC_E_FORMAT, "safetensors: tensor \"%s\": shape overflows 64 bits", name);
		if ((nelem * bits) % 8)
			return wc_fail(WC_E_FORMAT,
				       "safetensors: tensor \"%s\": %llu elements of %s (%u bits) do not end "
				       "on a byte", name, (unsigned long long)nelem, t->dtype, bits);
		if (end - begin != nelem * bits / 8)
			return wc_fail(WC_E_FORMAT,
				       "safetensors: tensor \"%s\": %llu bytes in data_offsets but shape x %s size = %llu bytes",
				       name, (unsigned long long)(end - begin), t->dtype,
				       (unsigned long long)(nelem * bits / 8));
	} else if (overflow) {
		return wc_fail(WC_E_FORMAT, "safetensors: tensor \"%s\": shape overflows 64 bits", name);
	}
	return WC_OK;
}

static wc_err check_metadata(const json_t *md)
{
	if (!json_is_object(md))
		return wc_fail(WC_E_FORMAT, "safetensors: \"__metadata__\" is not a JSON object");
	const char *k;
	const json_t *v;
	json_object_foreach((json_t *)md, k, v) {
		if (!json_is_string(v))
			return wc_fail(WC_E_FORMAT, "safetensors: \"__metadata__\" value of \"%s\" is not a string", k);
	}
	return WC_OK;
}

static int by_offsets(const void *a, const void *b)
{
	const wc_st_tensor *x = a, *y = b;
	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* Tensors in data order must tile [0, data_size) exactly: no overlap, no hole. */
static wc_err check_coverage(const wc_st_header *h)
{
	uint64_t cursor = 0;
	const char *prev = NULL;
	for (uint32_t i = 0; i < h->ntensors; i++) {
		const wc_st_tensor *t = &h->tensors[i];
		if (t->begin < cursor)
			return wc_fail(WC_E_FORMAT,
				       "safetensors: tensors \"%s\" and \"%s\" overlap (data offset %llu < %llu)",
				       prev, t->name, (unsigned long long)t->begin, (unsigned long long)cursor);
		if (t->begin > cursor)
			return wc_fail(WC_E_FORMAT,
				       "safetensors: hole of %llu bytes at data offset %llu before tensor \"%s\"",
				       (unsigned long long)(t->begin - cursor), (unsigned long long)cursor, t->name);
		cursor = t->end;
		prev = t->name;
	}
	if (cursor != h->data_size)
		return wc_fail(WC_E_FORMAT,
			       "safetensors: %llu trailing bytes after the last tensor (file size %llu != 8 + %llu + %llu)",
			       (unsigned long long)(h->data_size - cursor),
			       (unsigned long long)(h->data_offset + h->data_size), (unsigned long long)h->header_len,
			       (unsigned long long)cursor);
	return WC_OK;
}

typedef struct st_walk {
	wc_st_header *h;
	uint32_t cap;
} st_walk;

/* One member of the header: "__metadata__", or a tensor entry. */
static wc_err take_member(void *ctx, const char *key, json_t *val)
{
	st_walk *sw = ctx;
	wc_st_header *h = sw->h;
	if (strcmp(key, "__metadata__") == 0) {
		wc_err e = check_metadata(val);
		if (e)
			return e;
		h->metadata = json_incref(val);
		return WC_OK;
	}
	if (h->ntensors == WC_ST_TENSORS_MAX)
		return wc_fail(WC_E_RANGE, "safetensors: more tensors than the limit of %u", WC_ST_TENSORS_MAX);
	if (h->ntensors == sw->cap) {
		uint32_t cap = sw->cap ? 2 * sw->cap : 64;
		wc_st_tensor *t = realloc(h->tensors, (size_t)cap * sizeof *t);
		if (!t)
			return wc_fail(WC_E_NOMEM, "safetensors: out of memory");
		h->tensors = t;
		sw->cap = cap;
	}
	memset(&h->tensors[h->ntensors], 0, sizeof h->tensors[0]);
	wc_err e = parse_tensor(key, val, h->data_size, &h->tensors[h->ntensors]);
	h->ntensors++; /* counted even on failure so wc_st_free frees its strings */
	return e;
}

wc_err wc_st_parse(const uint8_t *buf, size_t buf_len, uint64_t file_size, wc_st_header **out)
{
	*out = NULL;
	if (buf_len < 8)
		return wc_fail(WC_E_FORMAT, "safetensors: file shorter than the 8-byte header length");
	uint64_t n;
	wc_err e = wc_st_header_length(buf, file_size, &n);
	if (e)
		return e;
	if (n > buf_len - 8)
		return wc_fail(WC_E_FORMAT, "safetensors: truncated header: %llu JSON bytes expected, %zu present",
			       (unsigned long long)n, buf_len - 8);

	wc_st_header *h = calloc(1, sizeof *h);
	if (!h)
		return wc_fail(WC_E_NOMEM, "safetensors: out of memory");
	h->header_len = n;
	h->data_offset = 8 + n;
	h->data_size = file_size - h->data_offset;
	/* One member at a time (json_walk.h): a header of thousands of tensors
	 * never becomes one tree. */
	st_walk sw = { .h = h };
	e = wc_json_walk_object((const char *)buf + 8, (size_t)n, "safetensors: header", take_member, NULL, NULL, &sw);
	if (e)
		goto fail;
	if (h->ntensors)
		qsort(h->tensors, h->ntensors, sizeof *h->tensors, by_offsets);
	if ((e = check_coverage(h)))
		goto fail;
	*out = h;
	return WC_OK;
fail:
	wc_st_free(h);
	return e;
}
