/* metadata.c - the .wcodec metadata (docs/FORMAT.md 1.3) read into the
 * container's tensor table, and the prefix checked against it
 * (container_impl.h). */
#include "container/container_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <zstd.h>

#include "codec/tile_codec.h"
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

static wc_err parse_plane(const json_t *pl, uint32_t t, unsigned p, uint32_t ntables, wc_plane_stats *out)
{
	if (!json_is_object(pl))
		return META_BAD("tensor %u plane %u is not an object", t, p);
	const json_t *table = json_object_get(pl, "table");
	if (json_is_null(table)) {
		out->table = WC_NO_TABLE;
	} else if (json_is_integer(table) && json_integer_value(table) >= 0 &&
		   json_integer_value(table) < (json_int_t)ntables) {
		out->table = (uint32_t)json_integer_value(table);
	} else {
		return META_BAD("tensor %u plane %u: \"table\" is neither null nor a table index below %u", t, p,
				ntables);
	}
	const json_t *ent = json_object_get(pl, "entropy");
	if (!json_is_number(ent) || json_number_value(ent) < 0 || json_number_value(ent) > 8)
		return META_BAD("tensor %u plane %u: \"entropy\" is not a number in [0, 8]", t, p);
	out->entropy_bits = json_number_value(ent);
	if (get_u64(pl, "coded_bytes", &out->coded_bytes))
		return META_BAD("tensor %u plane %u: \"coded_bytes\" is not a non-negative integer", t, p);
	return WC_OK;
}

/* A tensor of layout "dict" (docs/FORMAT.md 2.1): "dict": {"offset", "entries"}
 * names its dictionary in the dictionary section, which must directly follow
 * the previous dict tensor's (c->dict_cursor) and be strictly ascending;
 * "plain_entropy" (optional, informative; if present an array of one number
 * in [0, 8] per byte plane) gives the entropy of its byte planes. */
static wc_err parse_dict(const json_t *o, uint32_t i, wc_container *c, wc_tensor_info *t)
{
	const wc_layout plain = t->plain_layout;
	const json_t *d = json_object_get(o, "dict");
	uint64_t off, k;
	if (!json_is_object(d) || get_u64(d, "offset", &off) || get_u64(d, "entries", &k))
		return META_BAD("tensor %u: layout \"dict\" without a \"dict\" object of \"offset\" and \"entries\"", i);
	if (k == 0 || k > WC_DICT_MAX_ENTRIES)
		return META_BAD("tensor %u: %llu dictionary entries, outside [1, %u]", i, (unsigned long long)k,
				WC_DICT_MAX_ENTRIES);
	uint64_t bytes = k * plain.elem_size;
	if (off != c->dict_cursor || off > c->h.dicts_len || bytes > c->h.dicts_len - off)
		return META_BAD("tensor %u: dictionary [%llu, +%llu) is not the next one in the %llu-byte dictionary "
				"section (expected at %llu)", i, (unsigned long long)off, (unsigned long long)bytes,
				(unsigned long long)c->h.dicts_len, (unsigned long long)c->dict_cursor);
	const uint8_t *dict = c->dicts + off;
	if (!wc_dict_sorted(dict, (uint32_t)k, plain.elem_size))
		return META_BAD("tensor %u: dictionary entries are not strictly ascending", i);
	c->dict_cursor = off + bytes;
	t->layout = wc_layout_dict(plain.elem_size, (uint32_t)k);
	t->dict = dict;
	t->dict_entries = (uint32_t)k;
	const json_t *pe = json_object_get(o, "plain_entropy");
	if (pe && (!json_is_array(pe) || json_array_size(pe) != plain.nplanes))
		return META_BAD("tensor %u: \"plain_entropy\" is not an array of %u numbers", i, plain.nplanes);
	if (pe) {
		for (unsigned p = 0; p < plain.nplanes; p++) {
			const json_t *v = json_array_get(pe, p);
			if (!json_is_number(v) || json_number_value(v) < 0 || json_number_value(v) > 8)
				return META_BAD("tensor %u: \"plain_entropy\"[%u] is not a number in [0, 8]", i, p);
			t->plain_entropy[p] = json_number_value(v);
		}
	}
	return WC_OK;
}

static wc_err parse_tensor(const json_t *o, uint32_t i, wc_container *c, uint64_t *vcursor, uint32_t *tcursor)
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
	if ((t->end - t->begin) % t->layout.elem_size)
		return META_BAD("tensor %u: %llu bytes is not a whole number of %u-byte elements", i,
				(unsigned long long)(t->end - t->begin), t->layout.elem_size);

	uint64_t first, count;
	if (get_u64(o, "first_tile", &first) || get_u64(o, "tiles", &count))
		return META_BAD("tensor %u: \"first_tile\"/\"tiles\" are not non-negative integers", i);
	const json_t *shared = json_object_get(o, "shared");
	if (shared && !json_is_boolean(shared))
		return META_BAD("tensor %u: \"shared\" is not a boolean", i);
	t->shared = json_is_true(shared);
	if (t->shared) {
		/* Its bytes continue the previous tensor's only tile, a tile of
		 * whole small tensors of one layout (docs/FORMAT.md 1.6). */
		const wc_tensor_info *prev = i ? &c->tensors[i - 1] : NULL;
		if (c->h.version < WC_FORMAT_VERSION_SHARED || !prev || prev->ntiles != 1 || t->end == t->begin ||
		    t->dict || prev->dict || prev->layout.kind != t->layout.kind ||
		    prev->layout.elem_size != t->layout.elem_size || first != prev->first_tile || count != 1)
			return META_BAD("tensor %u: \"shared\" needs format version %u, a non-empty tensor of the "
					"previous one's layout (no dictionary) and that tensor's only tile", i,
					WC_FORMAT_VERSION_SHARED);
	} else {
		uint64_t want = (t->end - t->begin + c->h.tile_size - 1) / c->h.tile_size;
		if (first != *tcursor || count != want || count > c->h.ntiles - first)
			return META_BAD("tensor %u: tiles [%llu, +%llu) are not the %llu tiles after tile %u within %u",
					i, (unsigned long long)first, (unsigned long long)count,
					(unsigned long long)want, *tcursor, c->h.ntiles);
		*tcursor += (uint32_t)count;
	}
	t->first_tile = (uint32_t)first;
	t->ntiles = (uint32_t)count;

	const json_t *planes = json_object_get(o, "planes");
	if (!json_is_array(planes) || json_array_size(planes) != t->layout.nplanes)
		return META_BAD("tensor %u: \"planes\" is not an array of %u entries", i, t->layout.nplanes);
	for (unsigned p = 0; p < WC_MAX_PLANES; p++)
		t->planes[p].table = WC_NO_TABLE;
	for (unsigned p = 0; p < t->layout.nplanes; p++) {
		wc_err e = parse_plane(json_array_get(planes, p), i, p, c->h.ntables, &t->planes[p]);
		if (e)
			return e;
		if (!t->dict)
			t->plain_entropy[p] = t->planes[p].entropy_bits;
	}
	return WC_OK;
}

typedef struct meta_walk {
	wc_container *c;
	uint64_t vcursor; /* where the next tensor must begin */
	uint32_t tcursor; /* its first tile */
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
	return parse_tensor(value, (uint32_t)i, mw->c, &mw->vcursor, &mw->tcursor);
}

/* The metadata section is one zstd frame holding the JSON (docs/FORMAT.md 1.3). */
wc_err wc_container_parse_metadata(wc_container *c, const uint8_t *frame, size_t frame_len)
{
	unsigned long long len = ZSTD_getFrameContentSize(frame, frame_len);
	if (len == ZSTD_CONTENTSIZE_ERROR || len == ZSTD_CONTENTSIZE_UNKNOWN)
		return META_BAD("not a zstd frame with its content size");
	if (len > WC_LIMIT_META_JSON_BYTES)
		return wc_fail(WC_E_RANGE, "wcodec metadata: %llu bytes of JSON exceed the limit of %u", len,
			       WC_LIMIT_META_JSON_BYTES);
	char *buf = malloc(len ? (size_t)len : 1);
	if (!buf)
		return wc_fail(WC_E_NOMEM, "out of memory for %llu bytes of metadata", len);
	size_t got = ZSTD_decompress(buf, (size_t)len, frame, frame_len);
	if (ZSTD_isError(got) || got != len) {
		free(buf);
		return META_BAD("zstd frame does not decode to its %llu bytes: %s", len,
				ZSTD_isError(got) ? ZSTD_getErrorName(got) : "short");
	}
	c->tensors = calloc(c->h.ntensors ? c->h.ntensors : 1, sizeof *c->tensors);
	if (!c->tensors) {
		free(buf);
		return wc_fail(WC_E_NOMEM, "out of memory");
	}
	/* One tensor's JSON at a time (json_walk.h): the metadata of thousands
	 * of tensors never becomes one tree. */
	meta_walk mw = { .c = c, .vcursor = c->h.prefix_len };
	wc_err e = wc_json_walk_object(buf, (size_t)len, "wcodec metadata", meta_member, "tensors", meta_tensor, &mw);
	free(buf);
	if (!e && mw.n != c->h.ntensors)
		e = META_BAD("%zu tensors listed, the header says %u", mw.n, c->h.ntensors);
	if (!e && mw.vcursor != c->h.virtual_size)
		e = META_BAD("tensors end at %llu, the virtual file at %llu", (unsigned long long)mw.vcursor,
			     (unsigned long long)c->h.virtual_size);
	if (!e && mw.tcursor != c->h.ntiles)
		e = META_BAD("tensors hold %u tiles, the header says %u", mw.tcursor, c->h.ntiles);
	if (!e && c->dict_cursor != c->h.dicts_len)
		e = META_BAD("dictionaries end at %llu, the dictionary section has %llu bytes",
			     (unsigned long long)c->dict_cursor, (unsigned long long)c->h.dicts_len);
	return e;
}

void *wc_container_parse_prefix(void *arg)
{
	wc_prefix_parse *pp = arg;
	pp->err = wc_st_parse(pp->c->prefix, pp->c->h.prefix_len, pp->c->h.virtual_size, &pp->st);
	if (pp->err)
		snprintf(pp->why, sizeof pp->why, "%s", wc_last_detail());
	return NULL;
}

wc_err wc_container_check_prefix(wc_container *c, wc_prefix_parse *pp)
{
	wc_st_header *st = pp->st;
	wc_err e = pp->err;
	if (e)
		return wc_fail(WC_E_FORMAT, "wcodec prefix: %s", pp->why);
	if (st->data_offset != c->h.prefix_len) {
		e = wc_fail(WC_E_FORMAT, "wcodec prefix: safetensors data starts at %llu, prefix is %llu bytes",
			    (unsigned long long)st->data_offset, (unsigned long long)c->h.prefix_len);
		goto out;
	}
	if (st->ntensors != c->h.ntensors) {
		e = wc_fail(WC_E_FORMAT, "wcodec prefix: %u tensors in the prefix, %u in the metadata", st->ntensors,
			    c->h.ntensors);
		goto out;
	}
	for (uint32_t i = 0; i < st->ntensors; i++) {
		const wc_st_tensor *a = &st->tensors[i];
		const wc_tensor_info *b = &c->tensors[i];
		int same = strcmp(a->name, b->name) == 0 && strcmp(a->dtype, b->dtype) == 0 && a->ndim == b->ndim &&
			   a->begin + c->h.prefix_len == b->begin && a->end + c->h.prefix_len == b->end;
		for (uint32_t d = 0; same && d < a->ndim; d++)
			same = a->shape[d] == b->shape[d];
		if (!same) {
			e = wc_fail(WC_E_FORMAT, "wcodec prefix: tensor %u (\"%s\") differs from the metadata", i, b->name);
			goto out;
		}
	}
out:
	return e;
}

