/* metadata_json.c - the JSON metadata of format versions 1 and 2 (docs/FORMAT.md
 * 1.3.2) read into the container's tensor table, and the prefix checked
 * against it (container_impl.h). */
#include "container/container_impl.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "container/format.h"
#include "core/json_walk.h"

/* ---- metadata ------------------------------------------------------- */

static int get_u64(const json_t *obj, const char *key, uint64_t *out)
{
	const json_t *v = json_object_get(obj, key);
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return -1;
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

#define META_BAD(...) wc_fail(WC_E_FORMAT, "wcodec metadata: " __VA_ARGS__)

static wc_err parse_plane(const json_t *pl, uint32_t t, unsigned p, const wc_container *c, wc_tensor_info *ti)
{
	if (!json_is_object(pl))
		return META_BAD("tensor %u plane %u is not an object", t, p);
	const json_t *table = json_object_get(pl, "table"), *ent = json_object_get(pl, "entropy");
	uint64_t coded;
	if (!json_is_null(table) && (!json_is_integer(table) || json_integer_value(table) < 0))
		return META_BAD("tensor %u plane %u: \"table\" is neither null nor a table index", t, p);
	if (!json_is_number(ent))
		return META_BAD("tensor %u plane %u: \"entropy\" is not a number", t, p);
	if (get_u64(pl, "coded_bytes", &coded))
		return META_BAD("tensor %u plane %u: \"coded_bytes\" is not a non-negative integer", t, p);
	return wc_meta_plane(c, t, ti, p, json_is_null(table) ? UINT64_MAX : (uint64_t)json_integer_value(table),
			     json_number_value(ent), coded);
}

/* A tensor of layout "dict": "dict": {"offset", "entries"} names its
 * dictionary; "plain_entropy" (optional, informative; if present an array
 * of one number in [0, 8] per byte plane) gives the entropy of its planes. */
static wc_err parse_dict(const json_t *o, uint32_t i, wc_container *c, wc_tensor_info *t)
{
	const json_t *d = json_object_get(o, "dict");
	uint64_t off, k;
	if (!json_is_object(d) || get_u64(d, "offset", &off) || get_u64(d, "entries", &k))
		return META_BAD("tensor %u: layout \"dict\" without a \"dict\" object of \"offset\" and \"entries\"", i);
	wc_err e = wc_meta_dict(c, i, t, off, k);
	if (e)
		return e;
	const json_t *pe = json_object_get(o, "plain_entropy");
	if (pe && (!json_is_array(pe) || json_array_size(pe) != t->plain_layout.nplanes))
		return META_BAD("tensor %u: \"plain_entropy\" is not an array of %u numbers", i,
				t->plain_layout.nplanes);
	for (unsigned p = 0; pe && p < t->plain_layout.nplanes; p++) {
		const json_t *v = json_array_get(pe, p);
		if (!json_is_number(v) || json_number_value(v) < 0 || json_number_value(v) > 8)
			return META_BAD("tensor %u: \"plain_entropy\"[%u] is not a number in [0, 8]", i, p);
		t->plain_entropy[p] = json_number_value(v);
	}
	return WC_OK;
}

static wc_err parse_tensor(const json_t *o, uint32_t i, wc_container *c, uint64_t *vcursor)
{
	wc_tensor_info *t = &c->tensors[i];
	if (!json_is_object(o))
		return META_BAD("tensor %u is not an object", i);
	const json_t *name = json_object_get(o, "name"), *dtype = json_object_get(o, "dtype");
	if (!json_is_string(name) || json_string_length(name) > WC_LIMIT_NAME_BYTES)
		return META_BAD("tensor %u: \"name\" is not a string of at most %u bytes", i, WC_LIMIT_NAME_BYTES);
	if (!json_is_string(dtype) || json_string_length(dtype) == 0 ||
	    json_string_length(dtype) > WC_LIMIT_DTYPE_BYTES)
		return META_BAD("tensor %u: \"dtype\" is not a string of 1 to %u bytes", i, WC_LIMIT_DTYPE_BYTES);
	if (!(t->name = strdup(json_string_value(name))) || !(t->dtype = strdup(json_string_value(dtype))))
		return wc_fail(WC_E_NOMEM, "out of memory");

	const json_t *shape = json_object_get(o, "shape");
	if (!json_is_array(shape) || json_array_size(shape) > WC_LIMIT_NDIM)
		return META_BAD("tensor %u: \"shape\" is not an array of at most %u dimensions", i, WC_LIMIT_NDIM);
	t->ndim = (uint32_t)json_array_size(shape);
	if (t->ndim) {
		uint64_t *dims = malloc(t->ndim * sizeof *dims);
		if (!dims)
			return wc_fail(WC_E_NOMEM, "out of memory");
		t->shape = dims;
		for (uint32_t d = 0; d < t->ndim; d++) {
			const json_t *v = json_array_get(shape, d);
			if (!json_is_integer(v) || json_integer_value(v) < 0)
				return META_BAD("tensor %u: shape[%u] is not a non-negative integer", i, d);
			dims[d] = (uint64_t)json_integer_value(v);
		}
	}

	if (get_u64(o, "begin", &t->begin) || get_u64(o, "end", &t->end))
		return META_BAD("tensor %u: \"begin\"/\"end\" are not non-negative integers", i);
	if (t->begin != *vcursor || t->end < t->begin || t->end > c->h.virtual_size)
		return META_BAD("tensor %u (\"%s\"): byte range [%llu, %llu) does not follow the previous tensor at %llu "
				"within the virtual file of %llu bytes",
				i, t->name, (unsigned long long)t->begin, (unsigned long long)t->end,
				(unsigned long long)*vcursor, (unsigned long long)c->h.virtual_size);
	*vcursor = t->end;

	const json_t *layout = json_object_get(o, "layout");
	t->plain_layout = wc_layout_for_dtype(t->dtype);
	if (json_is_string(layout) && strcmp(json_string_value(layout), "dict") == 0) {
		wc_err e = parse_dict(o, i, c, t);
		if (e)
			return e;
	} else if (!json_is_string(layout) || wc_layout_parse(json_string_value(layout), &t->layout)) {
		return META_BAD("tensor %u: unknown \"layout\"", i);
	} else {
		t->plain_layout = t->layout;
	}
	uint64_t first, count;
	if (get_u64(o, "first_tile", &first) || get_u64(o, "tiles", &count))
		return META_BAD("tensor %u: \"first_tile\"/\"tiles\" are not non-negative integers", i);
	const json_t *shared = json_object_get(o, "shared");
	if (shared && !json_is_boolean(shared))
		return META_BAD("tensor %u: \"shared\" is not a boolean", i);
	wc_err e = wc_meta_place(c, i, t, json_is_true(shared), first, count);
	if (e)
		return e;

	const json_t *planes = json_object_get(o, "planes");
	if (!json_is_array(planes) || json_array_size(planes) != t->layout.nplanes)
		return META_BAD("tensor %u: \"planes\" is not an array of %u entries", i, t->layout.nplanes);
	for (unsigned p = 0; p < t->layout.nplanes; p++)
		if ((e = parse_plane(json_array_get(planes, p), i, p, c, t)))
			return e;
	return WC_OK;
}

typedef struct meta_walk {
	wc_container *c;
	uint64_t vcursor; /* where the next tensor must begin */
	size_t n;         /* tensors parsed */
} meta_walk;

/* Members other than "tensors" ("format", "version", "writer", keys of
 * later writers): nothing a reader needs. */
static wc_err meta_member(void *ctx, const char *key, json_t *value)
{
	(void)ctx, (void)key, (void)value;
	return WC_OK;
}

static wc_err meta_tensor(void *ctx, size_t i, json_t *value)
{
	meta_walk *mw = ctx;
	if (i >= mw->c->h.ntensors)
		return META_BAD("more than the %u tensors the header says", mw->c->h.ntensors);
	mw->n = i + 1;
	return parse_tensor(value, (uint32_t)i, mw->c, &mw->vcursor);
}

/* The prefix must list the metadata's tensors: same names, dtypes, shapes
 * and byte ranges, in the same order (its count is checked by the caller). */
static wc_err check_prefix(const wc_container *c, const wc_st_header *st)
{
	for (uint32_t i = 0; i < st->ntensors; i++) {
		const wc_st_tensor *a = &st->tensors[i];
		const wc_tensor_info *b = &c->tensors[i];
		int same = strcmp(a->name, b->name) == 0 && strcmp(a->dtype, b->dtype) == 0 && a->ndim == b->ndim &&
			   a->begin + c->h.prefix_len == b->begin && a->end + c->h.prefix_len == b->end;
		for (uint32_t d = 0; same && d < a->ndim; d++)
			same = a->shape[d] == b->shape[d];
		if (!same)
			return wc_fail(WC_E_FORMAT, "wcodec prefix: tensor %u (\"%s\") differs from the metadata", i,
				       b->name);
	}
	return WC_OK;
}

wc_err wc_meta_read_json(wc_container *c, const char *json, size_t len, const wc_st_header *st)
{
	/* One tensor's JSON at a time (json_walk.h): the metadata of thousands
	 * of tensors never becomes one tree. */
	meta_walk mw = { .c = c, .vcursor = c->h.prefix_len };
	wc_err e = wc_json_walk_object(json, len, "wcodec metadata", meta_member, "tensors", meta_tensor, &mw);
	if (!e && mw.n != c->h.ntensors)
		e = META_BAD("%zu tensors listed, the header says %u", mw.n, c->h.ntensors);
	if (!e && mw.vcursor != c->h.virtual_size)
		e = META_BAD("tensors end at %llu, the virtual file at %llu", (unsigned long long)mw.vcursor,
			     (unsigned long long)c->h.virtual_size);
	return e ? e : check_prefix(c, st);
}
