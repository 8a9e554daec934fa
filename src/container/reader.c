/* reader.c - opening and validating a .wcodec file; tile access (container.h). */
#include "container/container.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pthread.h>

#include <jansson.h>
#include <xxhash.h>
#include <zstd.h>

#include "codec/tile_codec.h"
#include "container/format.h"
#include "container/safetensors.h"
#include "core/fileio.h"
#include "core/json_walk.h"
#include "core/hash.h"

struct wc_container {
	wc_tile_source src; /* first: wc_container_source() hands out &src */
	atomic_uint refs;
	int fd;
	wc_file_header h;
	uint8_t *prefix;
	wc_tensor_info *tensors;
	uint32_t *by_name; /* tensor indices sorted by name */
	wc_tile_info *tiles;
	wc_freqtab *tables;
	uint8_t *dicts;       /* the dictionary section (h.dicts_len bytes), or NULL */
	uint64_t dict_cursor; /* while parsing: where the next tensor's dictionary must start */
};

/* ---- reading helpers ------------------------------------------------ */

static void free_tensors(wc_container *c)
{
	if (!c->tensors)
		return;
	for (uint32_t i = 0; i < c->h.ntensors; i++) {
		free((char *)c->tensors[i].name);
		free((char *)c->tensors[i].dtype);
		free((uint64_t *)c->tensors[i].shape);
	}
	free(c->tensors);
}

static void container_free(wc_container *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->prefix);
	free_tensors(c);
	free(c->by_name);
	free(c->tiles);
	free(c->tables);
	free(c->dicts);
	free(c);
}

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
static wc_err parse_metadata(wc_container *c, const uint8_t *frame, size_t frame_len)
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

/* The prefix must be the safetensors header of the tensors listed in the
 * metadata: same names, dtypes, shapes and byte ranges, in the same order. */
/* The prefix parsed as a safetensors header, on a thread of its own while
 * the metadata is parsed when both are large (a header of thousands of
 * tensors: 21 of the 79 ms an 8,317-tensor file took to open). */
typedef struct prefix_parse {
	const wc_container *c;
	wc_st_header *st;
	wc_err err;
	char why[400];
} prefix_parse;

static void *parse_prefix(void *arg)
{
	prefix_parse *pp = arg;
	pp->err = wc_st_parse(pp->c->prefix, pp->c->h.prefix_len, pp->c->h.virtual_size, &pp->st);
	if (pp->err)
		snprintf(pp->why, sizeof pp->why, "%s", wc_last_detail());
	return NULL;
}

static wc_err check_prefix(wc_container *c, prefix_parse *pp)
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

/* ---- tile index ----------------------------------------------------- */

static wc_err check_tiles(wc_container *c)
{
	uint64_t voff = c->h.prefix_len, coff = c->h.payload_off;
	for (uint32_t t = 0; t < c->h.ntensors; t++) {
		const wc_tensor_info *ti = &c->tensors[t];
		if (ti->shared)
			continue; /* in the tile of the tensor before it */
		/* The bytes this tensor's tiles hold: its own, and those of the
		 * tensors that share its tile. */
		uint64_t end = ti->end;
		for (uint32_t u = t + 1; u < c->h.ntensors && c->tensors[u].shared; u++)
			end = c->tensors[u].end;
		for (uint32_t k = 0; k < ti->ntiles; k++) {
			uint32_t i = ti->first_tile + k;
			const wc_tile_info *x = &c->tiles[i];
			if (x->tensor != t)
				return wc_fail(WC_E_FORMAT, "tile %u: tensor %u, expected %u", i, x->tensor, t);
			if (x->flags)
				return wc_fail(WC_E_FORMAT, "tile %u: reserved flags 0x%x", i, x->flags);
			if (x->voff != voff)
				return wc_fail(WC_E_FORMAT, "tile %u: virtual offset %llu, expected %llu", i,
					       (unsigned long long)x->voff, (unsigned long long)voff);
			/* Tile k of a tensor holds its bytes [k*T, min((k+1)*T, size)); a
			 * shared tile all of its tensors' bytes, at most T of them. */
			uint64_t left = end - voff;
			uint64_t want = left < c->h.tile_size ? left : c->h.tile_size;
			if (x->dsize != want || x->dsize % ti->layout.elem_size || (end > ti->end && want != left))
				return wc_fail(WC_E_FORMAT, "tile %u: decoded size %u, expected %llu for tensor %u", i,
					       x->dsize, (unsigned long long)left, t);
			if (x->coff != coff)
				return wc_fail(WC_E_FORMAT, "tile %u: payload offset %llu, expected %llu", i,
					       (unsigned long long)x->coff, (unsigned long long)coff);
			if (x->csize < WC_TILE_HEADER_BYTES(ti->layout.nplanes) ||
			    x->csize > 2ull * x->dsize + 65536u ||
			    x->csize > c->h.payload_off + c->h.payload_len - coff)
				return wc_fail(WC_E_FORMAT, "tile %u: payload size %u invalid", i, x->csize);
			voff += x->dsize;
			coff += x->csize;
		}
		if (voff != end)
			return wc_fail(WC_E_FORMAT, "tensor %u: tiles end at %llu, tensor at %llu", t,
				       (unsigned long long)voff, (unsigned long long)end);
	}
	if (coff != c->h.payload_off + c->h.payload_len)
		return wc_fail(WC_E_FORMAT, "payloads end at %llu, payload section at %llu", (unsigned long long)coff,
			       (unsigned long long)(c->h.payload_off + c->h.payload_len));
	return WC_OK;
}

static const wc_container *sort_ctx;
static int by_name(const void *a, const void *b)
{
	return strcmp(sort_ctx->tensors[*(const uint32_t *)a].name, sort_ctx->tensors[*(const uint32_t *)b].name);
}

static wc_err build_name_index(wc_container *c)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	c->by_name = malloc((c->h.ntensors ? c->h.ntensors : 1) * sizeof *c->by_name);
	if (!c->by_name)
		return wc_fail(WC_E_NOMEM, "out of memory");
	for (uint32_t i = 0; i < c->h.ntensors; i++)
		c->by_name[i] = i;
	pthread_mutex_lock(&lock); /* qsort has no context argument in C11 */
	sort_ctx = c;
	qsort(c->by_name, c->h.ntensors, sizeof *c->by_name, by_name);
	pthread_mutex_unlock(&lock);
	for (uint32_t i = 1; i < c->h.ntensors; i++)
		if (strcmp(c->tensors[c->by_name[i - 1]].name, c->tensors[c->by_name[i]].name) == 0)
			return wc_fail(WC_E_FORMAT, "wcodec metadata: tensor name \"%s\" appears twice",
				       c->tensors[c->by_name[i]].name);
	return WC_OK;
}

/* ---- open ----------------------------------------------------------- */

static wc_err load(wc_container *c, const char *path)
{
	struct stat st;
	if (fstat(c->fd, &st) != 0) /* a regular file: wc_open_regular */
		return wc_fail(WC_E_IO, "%s: %s", path, strerror(errno));
	uint64_t size = (uint64_t)st.st_size;
	if (size < WC_HEADER_BYTES)
		return wc_fail(WC_E_FORMAT, "%s: %llu bytes is shorter than the %u-byte header", path,
			       (unsigned long long)size, WC_HEADER_BYTES);
	uint8_t hdr[WC_HEADER_BYTES];
	wc_err e = wc_pread_full(c->fd, hdr, sizeof hdr, 0, "header");
	if (e || (e = wc_header_decode(hdr, size, &c->h)))
		return e;

	/* Everything but the payloads is read into memory and hashed. */
	uint8_t *tables = NULL, *index = NULL, *meta = NULL;
	c->prefix = malloc(c->h.prefix_len);
	tables = malloc(c->h.tables_len ? c->h.tables_len : 1);
	index = malloc(c->h.index_len ? c->h.index_len : 1);
	meta = malloc(c->h.meta_len);
	c->tables = calloc(c->h.ntables ? c->h.ntables : 1, sizeof *c->tables);
	c->tiles = calloc(c->h.ntiles ? c->h.ntiles : 1, sizeof *c->tiles);
	c->dicts = malloc(c->h.dicts_len ? c->h.dicts_len : 1);
	if (!c->prefix || !tables || !index || !meta || !c->tables || !c->tiles || !c->dicts) {
		e = wc_fail(WC_E_NOMEM, "out of memory reading the index of %s", path);
		goto out;
	}
	if ((e = wc_pread_full(c->fd, c->prefix, c->h.prefix_len, c->h.prefix_off, "prefix")) ||
	    (e = wc_pread_full(c->fd, tables, c->h.tables_len, c->h.tables_off, "frequency tables")) ||
	    (e = wc_pread_full(c->fd, c->dicts, c->h.dicts_len, c->h.dicts_off, "dictionaries")) ||
	    (e = wc_pread_full(c->fd, index, c->h.index_len, c->h.index_off, "tile index")) ||
	    (e = wc_pread_full(c->fd, meta, c->h.meta_len, c->h.meta_off, "metadata")))
		goto out;

	XXH3_state_t *hs = XXH3_createState();
	if (!hs) {
		e = wc_fail(WC_E_NOMEM, "out of memory");
		goto out;
	}
	XXH3_64bits_reset(hs);
	XXH3_64bits_update(hs, hdr, WC_HEADER_HASH_OFF);
	XXH3_64bits_update(hs, c->prefix, c->h.prefix_len);
	XXH3_64bits_update(hs, tables, c->h.tables_len);
	XXH3_64bits_update(hs, c->dicts, c->h.dicts_len);
	XXH3_64bits_update(hs, index, c->h.index_len);
	XXH3_64bits_update(hs, meta, c->h.meta_len);
	uint64_t check = XXH3_64bits_digest(hs);
	XXH3_freeState(hs);
	if (check != c->h.check) {
		e = wc_fail(WC_E_CORRUPT, "%s: header/index checksum mismatch (%016llx != %016llx): damaged header, "
			    "prefix, tables, index or metadata", path, (unsigned long long)check,
			    (unsigned long long)c->h.check);
		goto out;
	}

	if ((e = wc_tables_decode(tables, c->h.tables_len, c->h.ntables, c->tables)))
		goto out;
	for (uint32_t i = 0; i < c->h.ntiles; i++)
		wc_index_entry_decode(index + (size_t)i * WC_INDEX_ENTRY_BYTES, &c->tiles[i]);
	/* The prefix's safetensors header and the metadata say the same, each
	 * in JSON: parse them side by side when there is much of both. */
	prefix_parse pp = { .c = c };
	pthread_t tid;
	const int threaded = c->h.prefix_len >= (256u << 10) && pthread_create(&tid, NULL, parse_prefix, &pp) == 0;
	e = parse_metadata(c, meta, c->h.meta_len);
	if (threaded)
		pthread_join(tid, NULL);
	else if (!e)
		parse_prefix(&pp);
	if (!e && !(e = check_tiles(c)) && !(e = build_name_index(c)))
		e = check_prefix(c, &pp);
	wc_st_free(pp.st);
	if (e)
		goto out;
out:
	free(tables);
	free(index);
	free(meta);
	return e;
}

wc_err wc_container_peek(int fd, const char *name, wc_container_summary *out)
{
	memset(out, 0, sizeof *out);
	struct stat st;
	if (fstat(fd, &st) != 0)
		return wc_fail(WC_E_IO, "%s: %s", name, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return wc_fail(WC_E_FORMAT, "%s: not a regular file", name);
	uint64_t size = (uint64_t)st.st_size;
	if (size < WC_HEADER_BYTES)
		return wc_fail(WC_E_FORMAT, "%s: %llu bytes is shorter than the %u-byte header", name,
			       (unsigned long long)size, WC_HEADER_BYTES);
	uint8_t hdr[WC_HEADER_BYTES];
	wc_file_header h;
	wc_err e = wc_pread_full(fd, hdr, sizeof hdr, 0, "header");
	if (!e)
		e = wc_header_decode(hdr, size, &h);
	if (e) {
		char why[400];
		snprintf(why, sizeof why, "%s", wc_last_detail());
		return wc_fail(e, "%s: %s", name, why);
	}
	out->virtual_size = h.virtual_size;
	out->file_size = size;
	out->tile_size = h.tile_size;
	out->ntensors = h.ntensors;
	out->ntiles = h.ntiles;
	return WC_OK;
}

static const wc_tile_source_ops source_ops;

wc_err wc_container_open(const char *path, wc_container **out)
{
	*out = NULL;
	wc_container *c = calloc(1, sizeof *c);
	if (!c)
		return wc_fail(WC_E_NOMEM, "out of memory");
	atomic_init(&c->refs, 1);
	wc_err e = wc_open_regular(path, &c->fd);
	if (e) {
		free(c);
		return e;
	}
	e = load(c, path);
	if (e) {
		/* Keep the reason, naming the file once. */
		if (strncmp(wc_last_detail(), path, strlen(path)) != 0) {
			char why[400];
			snprintf(why, sizeof why, "%s", wc_last_detail());
			wc_fail(e, "%s: %s", path, why);
		}
		container_free(c);
		return e;
	}
	c->src.ops = &source_ops;
	c->src.id = wc_tile_source_new_id();
	*out = c;
	return WC_OK;
}

void wc_container_retain(wc_container *c) { atomic_fetch_add(&c->refs, 1); }

void wc_container_release(wc_container *c)
{
	if (c && atomic_fetch_sub(&c->refs, 1) == 1)
		container_free(c);
}

uint64_t wc_container_id(const wc_container *c) { return c->src.id; }
uint32_t wc_container_version(const wc_container *c) { return c->h.version; }
uint64_t wc_container_virtual_size(const wc_container *c) { return c->h.virtual_size; }
uint64_t wc_container_file_size(const wc_container *c) { return c->h.file_size; }
uint32_t wc_container_tile_size(const wc_container *c) { return c->h.tile_size; }
uint32_t wc_container_chunk_symbols(const wc_container *c) { return c->h.chunk_symbols; }

const uint8_t *wc_container_prefix(const wc_container *c, size_t *len)
{
	*len = (size_t)c->h.prefix_len;
	return c->prefix;
}

uint32_t wc_container_ntensors(const wc_container *c) { return c->h.ntensors; }

const wc_tensor_info *wc_container_tensor(const wc_container *c, uint32_t i)
{
	return i < c->h.ntensors ? &c->tensors[i] : NULL;
}

wc_err wc_container_find_tensor(const wc_container *c, const char *name, uint32_t *index)
{
	size_t lo = 0, hi = c->h.ntensors;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int cmp = strcmp(c->tensors[c->by_name[mid]].name, name);
		if (cmp == 0) {
			*index = c->by_name[mid];
			return WC_OK;
		}
		if (cmp < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return wc_fail(WC_E_NOTFOUND, "no tensor named \"%s\"", name);
}

uint32_t wc_container_ntiles(const wc_container *c) { return c->h.ntiles; }

const wc_tile_info *wc_container_tile(const wc_container *c, uint32_t i)
{
	return i < c->h.ntiles ? &c->tiles[i] : NULL;
}

wc_err wc_container_find_tile(const wc_container *c, uint64_t voff, uint32_t *tile)
{
	if (voff < c->h.prefix_len || voff >= c->h.virtual_size)
		return wc_fail(WC_E_RANGE, "virtual offset %llu is not in the data section [%llu, %llu)",
			       (unsigned long long)voff, (unsigned long long)c->h.prefix_len,
			       (unsigned long long)c->h.virtual_size);
	/* Last tile with tile.voff <= voff; tiles cover the data section exactly. */
	uint32_t lo = 0, hi = c->h.ntiles;
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (c->tiles[mid].voff <= voff)
			lo = mid;
		else
			hi = mid;
	}
	*tile = lo;
	return WC_OK;
}

const wc_freqtab *wc_container_tables(const wc_container *c, uint32_t *ntables)
{
	*ntables = c->h.ntables;
	return c->tables;
}

wc_err wc_container_read_payload(const wc_container *c, uint32_t i, uint8_t *buf)
{
	if (i >= c->h.ntiles)
		return wc_fail(WC_E_RANGE, "tile %u of %u", i, c->h.ntiles);
	const wc_tile_info *t = &c->tiles[i];
	char what[32];
	snprintf(what, sizeof what, "tile %u", i);
	wc_err e = wc_pread_full(c->fd, buf, t->csize, t->coff, what);
	if (e)
		return e;
	uint64_t h = wc_xxh3_64(buf, t->csize);
	if (h != t->chash)
		return wc_fail(WC_E_CORRUPT, "tile %u: payload checksum mismatch (%016llx != %016llx)", i,
			       (unsigned long long)h, (unsigned long long)t->chash);
	return WC_OK;
}

wc_err wc_container_decode_tile(const wc_container *c, uint32_t i, const uint8_t *payload, uint8_t *out)
{
	if (i >= c->h.ntiles)
		return wc_fail(WC_E_RANGE, "tile %u of %u", i, c->h.ntiles);
	const wc_tile_info *t = &c->tiles[i];
	const wc_tensor_info *ti = &c->tensors[t->tensor];
	wc_err e = wc_tile_decode_dict(ti->layout, payload, t->csize, c->tables, c->h.ntables, c->h.chunk_symbols,
				       ti->dict, ti->dict_entries, out, t->dsize);
	if (e) {
		char why[400];
		snprintf(why, sizeof why, "%s", wc_last_detail());
		return wc_fail(e == WC_E_NOMEM ? e : WC_E_CORRUPT, "tile %u: %s", i, why);
	}
	uint64_t h = wc_xxh3_64(out, t->dsize);
	if (h != t->dhash)
		return wc_fail(WC_E_CORRUPT, "tile %u: decoded checksum mismatch (%016llx != %016llx)", i,
			       (unsigned long long)h, (unsigned long long)t->dhash);
	return WC_OK;
}

wc_err wc_container_pread(const wc_container *c, uint8_t *buf, size_t len, uint64_t off)
{
	if (off > c->h.virtual_size || len > c->h.virtual_size - off)
		return wc_fail(WC_E_RANGE, "read of %zu bytes at %llu past the end (%llu)", len,
			       (unsigned long long)off, (unsigned long long)c->h.virtual_size);
	if (len && off < c->h.prefix_len) {
		size_t n = (size_t)(c->h.prefix_len - off) < len ? (size_t)(c->h.prefix_len - off) : len;
		memcpy(buf, c->prefix + off, n);
		buf += n;
		len -= n;
		off += n;
	}
	if (!len)
		return WC_OK;
	uint8_t *payload = malloc(2ull * c->h.tile_size + 65536u), *tile = malloc(c->h.tile_size);
	wc_err e = WC_OK;
	if (!payload || !tile) {
		e = wc_fail(WC_E_NOMEM, "out of memory");
		goto out;
	}
	uint32_t i;
	if ((e = wc_container_find_tile(c, off, &i)))
		goto out;
	for (; len; i++) {
		const wc_tile_info *t = &c->tiles[i];
		if ((e = wc_container_read_payload(c, i, payload)) || (e = wc_container_decode_tile(c, i, payload, tile)))
			goto out;
		size_t skip = (size_t)(off - t->voff);
		size_t n = t->dsize - skip < len ? t->dsize - skip : len;
		memcpy(buf, tile + skip, n);
		buf += n;
		len -= n;
		off += n;
	}
out:
	free(payload);
	free(tile);
	return e;
}

/* ---- the container as a tile source --------------------------------- */

static const wc_container *of_source(const wc_tile_source *s) { return (const wc_container *)s; }

static uint32_t src_ntiles(const wc_tile_source *s) { return of_source(s)->h.ntiles; }

static uint32_t src_dsize(const wc_tile_source *s, uint32_t i)
{
	const wc_container *c = of_source(s);
	return i < c->h.ntiles ? c->tiles[i].dsize : 0;
}

static uint32_t src_csize(const wc_tile_source *s, uint32_t i)
{
	const wc_container *c = of_source(s);
	return i < c->h.ntiles ? c->tiles[i].csize : 0;
}

static wc_err src_read_payload(const wc_tile_source *s, uint32_t i, uint8_t *buf)
{
	return wc_container_read_payload(of_source(s), i, buf);
}

static void src_describe_job(const wc_tile_source *s, uint32_t i, wc_tile_job *job)
{
	const wc_container *c = of_source(s);
	const wc_tile_info *t = &c->tiles[i < c->h.ntiles ? i : 0];
	/* Zero every field this source does not use (kinds added later extend
	 * the struct), keeping the ones the caller owns. */
	const uint8_t *payload = job->payload;
	uint8_t *out = job->out;
	uint32_t payload_size = job->payload_size, out_size = job->out_size;
	wc_err status = job->status;
	memset(job, 0, sizeof *job);
	job->payload = payload;
	job->payload_size = payload_size;
	job->out = out;
	job->out_size = out_size;
	job->status = status;
	job->kind = WC_JOB_PLANES;
	job->layout = c->tensors[t->tensor].layout;
	job->chunk_symbols = c->h.chunk_symbols;
	job->tables = c->tables;
	job->ntables = c->h.ntables;
	job->table_key = c->src.id;
	job->dhash = t->dhash;
	job->dict = c->tensors[t->tensor].dict;
	job->dict_entries = c->tensors[t->tensor].dict_entries;
}

static void src_retain(wc_tile_source *s) { wc_container_retain((wc_container *)s); }
static void src_release(wc_tile_source *s) { wc_container_release((wc_container *)s); }

static const wc_tile_source_ops source_ops = {
	.ntiles = src_ntiles,
	.tile_dsize = src_dsize,
	.tile_csize = src_csize,
	.read_payload = src_read_payload,
	.describe_job = src_describe_job,
	.retain = src_retain,
	.release = src_release,
};

wc_tile_source *wc_container_source(wc_container *c) { return &c->src; }
