/* metadata.c - the container's tensor table (docs/FORMAT.md 1.3): the
 * prefix's tensors with the binary tensor table of version 3 beside them, or
 * the JSON metadata of versions 1 and 2 (metadata_json.c), and the rules
 * every version shares (container_impl.h). */
#include "container/container_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "codec/lossy.h"
#include "codec/tile_codec.h"
#include "container/format.h"

#define META_BAD(...) wc_fail(WC_E_FORMAT, "wcodec metadata: " __VA_ARGS__)

/* ---- rules of every version ------------------------------------------ */

wc_err wc_meta_dict(wc_container *c, uint32_t i, wc_tensor_info *t, uint64_t off, uint64_t k)
{
	const wc_layout plain = t->plain_layout;
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
	return WC_OK;
}

wc_err wc_meta_place(wc_container *c, uint32_t i, wc_tensor_info *t, int shared, uint64_t first, uint64_t count)
{
	if ((t->end - t->begin) % t->layout.elem_size)
		return META_BAD("tensor %u: %llu bytes is not a whole number of %u-byte elements", i,
				(unsigned long long)(t->end - t->begin), t->layout.elem_size);
	if (shared) {
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
		if (first != c->tile_cursor || count != want || count > c->h.ntiles - first)
			return META_BAD("tensor %u: tiles [%llu, +%llu) are not the %llu tiles after tile %u within %u",
					i, (unsigned long long)first, (unsigned long long)count,
					(unsigned long long)want, c->tile_cursor, c->h.ntiles);
		c->tile_cursor += (uint32_t)count;
	}
	t->shared = shared;
	t->first_tile = (uint32_t)first;
	t->ntiles = (uint32_t)count;
	return WC_OK;
}

wc_err wc_meta_plane(const wc_container *c, uint32_t i, wc_tensor_info *t, unsigned p, uint64_t table,
		     double entropy, uint64_t coded)
{
	if (table != UINT64_MAX && table >= c->h.ntables)
		return META_BAD("tensor %u plane %u: table %llu is not below the %u tables", i, p,
				(unsigned long long)table, c->h.ntables);
	if (!(entropy >= 0 && entropy <= 8)) /* NaN fails too */
		return META_BAD("tensor %u plane %u: entropy %g is not a number in [0, 8]", i, p, entropy);
	t->planes[p].table = table == UINT64_MAX ? WC_NO_TABLE : (uint32_t)table;
	t->planes[p].entropy_bits = entropy;
	t->planes[p].coded_bytes = coded;
	if (!t->dict && !t->lossy)
		t->plain_entropy[p] = entropy;
	return WC_OK;
}

/* ---- version 3: the tensor table (docs/FORMAT.md 1.3.1) ------------- */

static double get_f32(const uint8_t *p)
{
	uint32_t u = wc_get_u32(p);
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

/* A lossy tensor's fields (docs/FORMAT.md 1.3.1, 2.2) at r and its scales,
 * the next 4 * nscales bytes of the dictionary section. */
static wc_err read_lossy(wc_container *c, uint32_t i, wc_tensor_info *t, unsigned bits, uint8_t plain,
			 uint8_t flags, const uint8_t *r, uint64_t bytes)
{
	static const char *const want[] = {"f32", "bf16", "shuffle2"}; /* by wc_lossy_dtype */
	const uint8_t dtype = r[0], axis = r[1];
	const uint32_t ch = wc_get_u32(r + 4), group = wc_get_u16(r + 2);
	if (dtype > WC_LOSSY_F16 || axis > 1 || (flags & WC_TT_SHARED) || group > WC_LOSSY_GROUP_MAX)
		return META_BAD("tensor %u: lossy dtype %u, axis %u, group %u for int%u, flags 0x%02x", i, dtype, axis,
				group, bits, flags);
	if (wc_tt_layout_of(plain, &t->plain_layout) || strcmp(wc_layout_name(t->plain_layout), want[dtype]))
		return META_BAD("tensor %u: layout code %u for lossy values of dtype %u", i, plain, dtype);
	const unsigned w = t->plain_layout.elem_size;
	const uint64_t elems = bytes / w;
	if (bytes % w || elems == 0 || ch == 0 || elems % ch)
		return META_BAD("tensor %u: %llu bytes are not %u channels of whole %u-byte elements", i,
				(unsigned long long)bytes, ch, w);
	const wc_lossy_params lp = {.channels = ch, .group = group, .elems = elems};
	const uint64_t ns = wc_lossy_nscales(&lp), sb = 4ull * ns;
	if (c->dict_cursor > c->h.dicts_len || sb > c->h.dicts_len - c->dict_cursor)
		return META_BAD("tensor %u: %llu scales pass the end of the %llu-byte dictionary section", i,
				(unsigned long long)ns, (unsigned long long)c->h.dicts_len);
	float *sc = malloc(sb);
	if (!sc)
		return wc_fail(WC_E_NOMEM, "out of memory for tensor %u's %llu scales", i, (unsigned long long)ns);
	for (uint64_t k = 0; k < ns; k++) {
		const double v = get_f32(c->dicts + c->dict_cursor + 4ull * k);
		if (!(v >= 0) || isinf(v)) { /* NaN fails too */
			free(sc);
			return META_BAD("tensor %u: scale %llu is %g, not a finite number >= 0", i, (unsigned long long)k, v);
		}
		sc[k] = (float)v;
	}
	double stats[4];
	for (int k = 0; k < 4; k++)
		if (!((stats[k] = get_f32(r + 8 + 4 * k)) >= 0) || isinf(stats[k])) {
			free(sc);
			return META_BAD("tensor %u: lossy error measure %d is %g, not a finite number >= 0", i, k, stats[k]);
		}
	c->dict_cursor += sb;
	wc_layout_parse("bytes", &t->layout);
	t->lossy = (int)bits;
	t->lossy_axis = axis;
	t->lossy_channels = ch;
	t->lossy_group = group;
	t->lossy_nscales = ns;
	t->lossy_scales = sc;
	t->lossy_snr_db = stats[0];
	t->lossy_max_abs_err = stats[1];
	t->lossy_mean_abs_err = stats[2];
	t->lossy_rel_frobenius = stats[3];
	return WC_OK;
}

static wc_err read_record(wc_container *c, uint32_t i, const uint8_t *r, size_t left, uint64_t *vcursor,
			  size_t *used)
{
	wc_tensor_info *t = &c->tensors[i];
	const size_t at = left;
	if (left < WC_TT_HEAD_BYTES)
		return META_BAD("the tensor table ends before tensor %u", i);
	const uint8_t code = r[0], flags = r[1], plain = r[2];
	const uint64_t bytes = wc_get_u64(r + 4);
	const int lossy = code == WC_TT_LAYOUT_INT8 || code == WC_TT_LAYOUT_INT4;
	if ((flags & ~WC_TT_SHARED) || r[3] || (code != WC_TT_LAYOUT_DICT && !lossy && plain))
		return META_BAD("tensor %u: reserved bits set (flags 0x%02x, plain %u, reserved %u)", i, flags, plain,
				r[3]);
	if (bytes > c->h.virtual_size - *vcursor)
		return META_BAD("tensor %u: %llu bytes from %llu pass the end of the %llu-byte virtual file", i,
				(unsigned long long)bytes, (unsigned long long)*vcursor,
				(unsigned long long)c->h.virtual_size);
	t->begin = *vcursor;
	t->end = *vcursor += bytes;
	r += WC_TT_HEAD_BYTES, left -= WC_TT_HEAD_BYTES;
	wc_err e;
	if (code == WC_TT_LAYOUT_DICT) {
		if (wc_tt_layout_of(plain, &t->plain_layout))
			return META_BAD("tensor %u: unknown layout code %u for its dictionary's values", i, plain);
		const unsigned n = t->plain_layout.nplanes;
		if (left < 4 + 4 * (size_t)n)
			return META_BAD("the tensor table ends inside tensor %u's dictionary", i);
		if ((e = wc_meta_dict(c, i, t, c->dict_cursor, wc_get_u32(r))))
			return e;
		for (unsigned p = 0; p < n; p++) {
			t->plain_entropy[p] = get_f32(r + 4 + 4 * p);
			if (!(t->plain_entropy[p] >= 0 && t->plain_entropy[p] <= 8))
				return META_BAD("tensor %u: plain entropy %u is not a number in [0, 8]", i, p);
		}
		r += 4 + 4 * (size_t)n, left -= 4 + 4 * (size_t)n;
	} else if (lossy) {
		if (left < WC_TT_INT8_BYTES)
			return META_BAD("the tensor table ends inside tensor %u's lossy fields", i);
		if ((e = read_lossy(c, i, t, code == WC_TT_LAYOUT_INT8 ? 8 : 4, plain, flags, r, bytes)))
			return e;
		r += WC_TT_INT8_BYTES, left -= WC_TT_INT8_BYTES;
	} else if (wc_tt_layout_of(code, &t->layout)) {
		return META_BAD("tensor %u: unknown layout code %u", i, code);
	} else {
		t->plain_layout = t->layout;
	}
	/* The tiles follow from the sizes (docs/FORMAT.md 1.6). */
	const int shared = flags & WC_TT_SHARED;
	uint64_t first = shared ? (i ? c->tensors[i - 1].first_tile : 0) : c->tile_cursor;
	uint64_t count = shared ? 1 : (bytes + c->h.tile_size - 1) / c->h.tile_size;
	if ((e = wc_meta_place(c, i, t, shared, first, count)))
		return e;
	if (left < (size_t)t->layout.nplanes * WC_TT_PLANE_BYTES)
		return META_BAD("the tensor table ends inside tensor %u's planes", i);
	for (unsigned p = 0; p < t->layout.nplanes; p++, r += WC_TT_PLANE_BYTES, left -= WC_TT_PLANE_BYTES) {
		uint32_t table = wc_get_u32(r);
		if ((e = wc_meta_plane(c, i, t, p, table == WC_TT_NO_TABLE ? UINT64_MAX : table, get_f32(r + 4),
				       wc_get_u64(r + 8))))
			return e;
	}
	*used = at - left;
	return WC_OK;
}

static wc_err read_table(wc_container *c, const uint8_t *table, size_t len)
{
	size_t pos = 0;
	uint64_t vcursor = c->h.prefix_len;
	for (uint32_t i = 0; i < c->h.ntensors; i++) {
		size_t used = 0;
		wc_err e = read_record(c, i, table + pos, len - pos, &vcursor, &used);
		if (e)
			return e;
		pos += used;
	}
	if (pos != len)
		return META_BAD("%zu bytes after the last tensor's record", len - pos);
	if (vcursor != c->h.virtual_size)
		return META_BAD("tensors end at %llu, the virtual file at %llu", (unsigned long long)vcursor,
				(unsigned long long)c->h.virtual_size);
	return WC_OK;
}

/* The prefix's tensors (st) are the table's: same byte ranges, and a dict
 * tensor's values of its dtype's element size. Their names, dtypes and
 * shapes move into the container. */
static wc_err take_names(wc_container *c, wc_st_header *st)
{
	for (uint32_t i = 0; i < c->h.ntensors; i++) {
		wc_st_tensor *s = &st->tensors[i];
		wc_tensor_info *t = &c->tensors[i];
		if (s->begin + c->h.prefix_len != t->begin || s->end + c->h.prefix_len != t->end)
			return wc_fail(WC_E_FORMAT, "wcodec prefix: tensor %u (\"%s\") has bytes [%llu, %llu), the tensor "
				       "table [%llu, %llu)", i, s->name, (unsigned long long)(s->begin + c->h.prefix_len),
				       (unsigned long long)(s->end + c->h.prefix_len), (unsigned long long)t->begin,
				       (unsigned long long)t->end);
		wc_layout want = wc_layout_for_dtype(s->dtype);
		if (t->dict && (want.kind != t->plain_layout.kind || want.elem_size != t->plain_layout.elem_size))
			return wc_fail(WC_E_FORMAT, "wcodec prefix: tensor %u (\"%s\", %s) has a dictionary of layout "
				       "\"%s\" values", i, s->name, s->dtype, wc_layout_name(t->plain_layout));
		if (t->lossy && (want.kind != t->plain_layout.kind || want.elem_size != t->plain_layout.elem_size ||
				 wc_lossy_dtype_of(s->dtype) < 0 || s->ndim < 2 ||
				 s->shape[t->lossy_axis ? s->ndim - 1 : 0] != t->lossy_channels))
			return wc_fail(WC_E_FORMAT, "wcodec prefix: tensor %u (\"%s\", %s, %u dimensions) is not %u "
				       "channels on its %s axis of lossy \"%s\" values", i, s->name, s->dtype, s->ndim,
				       t->lossy_channels, t->lossy_axis ? "last" : "first",
				       wc_layout_name(t->plain_layout));
		t->name = s->name;
		t->dtype = s->dtype;
		t->ndim = s->ndim;
		t->shape = s->shape;
		s->name = s->dtype = NULL;
		s->shape = NULL;
	}
	return WC_OK;
}

/* ---- every version --------------------------------------------------- */

static wc_err parse_prefix(const wc_container *c, wc_st_header **st)
{
	wc_err e = wc_st_parse(c->prefix, c->h.prefix_len, c->h.virtual_size, st);
	if (e) {
		char why[400];
		snprintf(why, sizeof why, "%s", wc_last_detail());
		return wc_fail(WC_E_FORMAT, "wcodec prefix: %s", why);
	}
	if ((*st)->data_offset != c->h.prefix_len)
		return wc_fail(WC_E_FORMAT, "wcodec prefix: safetensors data starts at %llu, prefix is %llu bytes",
			       (unsigned long long)(*st)->data_offset, (unsigned long long)c->h.prefix_len);
	if ((*st)->ntensors != c->h.ntensors)
		return wc_fail(WC_E_FORMAT, "wcodec prefix: %u tensors in the prefix, %u in the header",
			       (*st)->ntensors, c->h.ntensors);
	return WC_OK;
}

wc_err wc_container_read_tensors(wc_container *c, const uint8_t *frame, size_t frame_len, int names)
{
	unsigned long long len = ZSTD_getFrameContentSize(frame, frame_len);
	if (len == ZSTD_CONTENTSIZE_ERROR || len == ZSTD_CONTENTSIZE_UNKNOWN)
		return META_BAD("not a zstd frame with its content size");
	/* Bounded before anything is decompressed: a tensor table by the
	 * header's tensor count. */
	const int binary = c->h.version >= WC_FORMAT_VERSION_TABLE;
	if (binary && len > (unsigned long long)c->h.ntensors * WC_TT_RECORD_MAX)
		return wc_fail(WC_E_RANGE, "wcodec metadata: a tensor table of %llu bytes for %u tensors (at most %u "
			       "bytes each)", len, c->h.ntensors, WC_TT_RECORD_MAX);
	/* JSON (versions 1 and 2) says per tensor about twice what the prefix
	 * does: bounded by the prefix's real bytes, so a small file cannot
	 * claim hundreds of MiB of metadata. */
	const uint64_t json_max = 16 * c->h.prefix_len + (1u << 20);
	if (!binary && (len > WC_LIMIT_META_JSON_BYTES || len > json_max))
		return wc_fail(WC_E_RANGE, "wcodec metadata: %llu bytes of JSON exceed the limit of %llu for a "
			       "%llu-byte prefix", len,
			       (unsigned long long)(json_max < WC_LIMIT_META_JSON_BYTES ? json_max
										: WC_LIMIT_META_JSON_BYTES),
			       (unsigned long long)c->h.prefix_len);
	wc_st_header *st = NULL;
	uint8_t *buf = malloc(len ? (size_t)len : 1);
	c->tensors = calloc(c->h.ntensors ? c->h.ntensors : 1, sizeof *c->tensors);
	wc_err e = WC_OK;
	if (!buf || !c->tensors) {
		e = wc_fail(WC_E_NOMEM, "out of memory for %llu bytes of metadata", len);
		goto out;
	}
	size_t got = ZSTD_decompress(buf, (size_t)len, frame, frame_len);
	if (ZSTD_isError(got) || got != len) {
		e = META_BAD("zstd frame does not decode to its %llu bytes: %s", len,
			     ZSTD_isError(got) ? ZSTD_getErrorName(got) : "short");
		goto out;
	}
	if (binary) {
		/* The tiles need only the table; the prefix's JSON is parsed
		 * when the names are asked for. */
		uint64_t n;
		if (!(e = read_table(c, buf, (size_t)len)) && !(e = wc_st_header_length(c->prefix, c->h.virtual_size, &n)) &&
		    8 + n != c->h.prefix_len)
			e = wc_fail(WC_E_FORMAT, "wcodec prefix: a %llu-byte safetensors header in a %llu-byte prefix",
				    (unsigned long long)n, (unsigned long long)c->h.prefix_len);
		if (!e && names && !(e = parse_prefix(c, &st)))
			e = take_names(c, st);
	} else if (!(e = parse_prefix(c, &st))) {
		e = wc_meta_read_json(c, (const char *)buf, (size_t)len, st);
	}
	if (!e && c->tile_cursor != c->h.ntiles)
		e = META_BAD("tensors hold %u tiles, the header says %u", c->tile_cursor, c->h.ntiles);
	if (!e && c->dict_cursor != c->h.dicts_len)
		e = META_BAD("dictionaries end at %llu, the dictionary section has %llu bytes",
			     (unsigned long long)c->dict_cursor, (unsigned long long)c->h.dicts_len);
out:
	free(buf);
	wc_st_free(st);
	return e;
}
