/* reader.c - opening and validating a .wcodec file; tile access (container.h).
 * The metadata and the prefix are checked by metadata.c. */
#include "container/container.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pthread.h>

#include <xxhash.h>

#include "codec/tile_codec.h"
#include "container/container_impl.h"
#include "container/container_source.h"
#include "container/format.h"
#include "container/lossy_job.h"
#include "core/fileio.h"
#include "core/hash.h"

/* ---- reading helpers ------------------------------------------------ */

static void free_tensors(wc_container *c)
{
	if (!c->tensors)
		return;
	for (uint32_t i = 0; i < c->h.ntensors; i++) {
		free((char *)c->tensors[i].name);
		free((char *)c->tensors[i].dtype);
		free((uint64_t *)c->tensors[i].shape);
		free((float *)c->tensors[i].lossy_scales);
	}
	free(c->tensors);
}

static void container_free(wc_container *c)
{
	wc_source_close(c->src_bytes);
	free(c->name);
	free(c->prefix);
	free_tensors(c);
	free(c->by_name);
	free(c->tiles);
	free(c->tables);
	free(c->dicts);
	free(c->lossy_jobs);
	free(c);
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
	if (c->h.ntensors && !c->tensors[0].name)
		return WC_OK; /* opened without names */
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

/* The decode job kind of lossy tiles (lossy_job.h), registered on open. */
static const wc_job_kind_ops lossy_job_kind = {.name = "lossy", .cpu_decode = wc_lossy_decode_job};

/* Each lossy tensor's tiles' job data (its parameters, each tile's first
 * element); nothing without lossy tensors. */
static wc_err build_lossy_jobs(wc_container *c)
{
	int any = 0;
	for (uint32_t i = 0; i < c->h.ntensors; i++)
		any |= c->tensors[i].lossy;
	if (!any)
		return WC_OK;
	wc_err e = wc_job_kind_register(WC_JOB_LOSSY, &lossy_job_kind);
	if (e)
		return e;
	if (!(c->lossy_jobs = calloc(c->h.ntiles ? c->h.ntiles : 1, sizeof *c->lossy_jobs)))
		return wc_fail(WC_E_NOMEM, "out of memory for %u tiles' job data", c->h.ntiles);
	for (uint32_t i = 0; i < c->h.ntensors; i++) {
		const wc_tensor_info *t = &c->tensors[i];
		if (!t->lossy)
			continue;
		const unsigned w = t->plain_layout.elem_size;
		const wc_lossy_params p = {
			.dtype = (uint8_t)(w == 4 ? WC_LOSSY_F32 : t->plain_layout.kind == WC_LAYOUT_BF16 ? WC_LOSSY_BF16
													: WC_LOSSY_F16),
			.bits = (uint8_t)t->lossy, .axis = t->lossy_axis, .channels = t->lossy_channels,
			.group = t->lossy_group, .elems = (t->end - t->begin) / w, .scales = t->lossy_scales};
		for (uint32_t k = 0; k < t->ntiles; k++)
			c->lossy_jobs[t->first_tile + k] = (wc_lossy_job){p, (uint64_t)k * c->h.tile_size / w};
	}
	return WC_OK;
}

static wc_err load(wc_container *c, const char *path, int names)
{
	uint64_t size = wc_source_size(c->src_bytes);
	if (size < WC_HEADER_BYTES)
		return wc_fail(WC_E_FORMAT, "%s: %llu bytes is shorter than the %u-byte header", path,
			       (unsigned long long)size, WC_HEADER_BYTES);
	/* Everything but the payloads is read into memory and hashed, in few
	 * reads (each a request to an object store): the header, with as much
	 * more as the source advises (the prefix, mostly); the prefix if that
	 * missed it; and the sections after the payloads, which run to the end
	 * of the file (docs/FORMAT.md 1.1), at once. */
	uint8_t hdr[WC_HEADER_BYTES];
	size_t head_len = wc_source_read_ahead(c->src_bytes);
	if (head_len < WC_HEADER_BYTES)
		head_len = WC_HEADER_BYTES;
	if (head_len > size)
		head_len = (size_t)size;
	uint8_t *head = malloc(head_len), *tail = NULL;
	if (!head)
		return wc_fail(WC_E_NOMEM, "out of memory reading the header of %s", path);
	wc_err e = wc_source_read(c->src_bytes, head, head_len, 0, "header");
	if (!e) {
		memcpy(hdr, head, sizeof hdr);
		e = wc_header_decode(hdr, size, &c->h);
	}
	if (e) {
		free(head);
		return e;
	}
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
	if (c->h.prefix_off + c->h.prefix_len <= head_len)
		memcpy(c->prefix, head + c->h.prefix_off, c->h.prefix_len);
	else if ((e = wc_source_read(c->src_bytes, c->prefix, c->h.prefix_len, c->h.prefix_off, "prefix")))
		goto out;
	/* tables, dictionaries, index and metadata: [tables_off, size) */
	const uint64_t tail_off = c->h.tables_off;
	const struct { uint8_t *dst; uint64_t off, len; } part[] = {
		{ tables, c->h.tables_off, c->h.tables_len }, { c->dicts, c->h.dicts_off, c->h.dicts_len },
		{ index, c->h.index_off, c->h.index_len }, { meta, c->h.meta_off, c->h.meta_len } };
	int one_read = tail_off <= size;
	for (size_t k = 0; k < sizeof part / sizeof part[0] && one_read; k++)
		one_read = !part[k].len ||
			   (part[k].off >= tail_off && part[k].off <= size && part[k].len <= size - part[k].off);
	if (one_read && !(tail = malloc(size - tail_off ? (size_t)(size - tail_off) : 1))) {
		e = wc_fail(WC_E_NOMEM, "out of memory reading the index of %s", path);
		goto out;
	}
	if (one_read && (e = wc_source_read(c->src_bytes, tail, (size_t)(size - tail_off), tail_off, "index")))
		goto out;
	static const char *const names_of[] = { "frequency tables", "dictionaries", "tile index", "metadata" };
	for (size_t k = 0; k < sizeof part / sizeof part[0]; k++) {
		if (!part[k].len)
			continue;
		if (one_read)
			memcpy(part[k].dst, tail + (part[k].off - tail_off), (size_t)part[k].len);
		else if ((e = wc_source_read(c->src_bytes, part[k].dst, (size_t)part[k].len, part[k].off, names_of[k])))
			goto out;
	}

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
	if (!(e = wc_container_read_tensors(c, meta, c->h.meta_len, names)) && !(e = check_tiles(c)) &&
	    !(e = build_lossy_jobs(c)))
		e = build_name_index(c);
out:
	free(head);
	free(tail);
	free(tables);
	free(index);
	free(meta);
	return e;
}

/* The summary of a file of `size` bytes whose first WC_HEADER_BYTES are
 * hdr (wc_container_peek). */
static wc_err peek_header(const uint8_t *hdr, uint64_t size, const char *name, wc_container_summary *out)
{
	wc_file_header h;
	wc_err e = wc_header_decode(hdr, size, &h);
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

static wc_err too_short(const char *name, uint64_t size)
{
	return wc_fail(WC_E_FORMAT, "%s: %llu bytes is shorter than the %u-byte header", name,
		       (unsigned long long)size, WC_HEADER_BYTES);
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
		return too_short(name, size);
	uint8_t hdr[WC_HEADER_BYTES];
	wc_err e = wc_pread_full(fd, hdr, sizeof hdr, 0, "header");
	if (e) {
		char why[400];
		snprintf(why, sizeof why, "%s", wc_last_detail());
		return wc_fail(e, "%s: %s", name, why);
	}
	return peek_header(hdr, size, name, out);
}

wc_err wc_container_peek_source(wc_source *src, wc_container_summary *out)
{
	memset(out, 0, sizeof *out);
	const char *name = wc_source_name(src);
	uint64_t size = wc_source_size(src);
	if (size < WC_HEADER_BYTES)
		return too_short(name, size);
	uint8_t hdr[WC_HEADER_BYTES];
	wc_err e = wc_source_read(src, hdr, sizeof hdr, 0, "header");
	return e ? e : peek_header(hdr, size, name, out);
}

static const wc_tile_source_ops source_ops;

/* Takes src: closed on failure. */
static wc_err open_container(wc_source *src, int names, wc_container **out)
{
	*out = NULL;
	const char *path = wc_source_name(src);
	wc_container *c = calloc(1, sizeof *c);
	if (!c) {
		wc_source_close(src);
		return wc_fail(WC_E_NOMEM, "out of memory");
	}
	atomic_init(&c->refs, 1);
	c->src_bytes = src;
	wc_err e = load(c, path, names);
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
	if (!(c->name = strdup(path))) {
		container_free(c);
		return wc_fail(WC_E_NOMEM, "out of memory");
	}
	*out = c;
	return WC_OK;
}

static wc_err open_path(const char *path, int names, wc_container **out)
{
	*out = NULL;
	wc_source *src;
	wc_err e = wc_source_open(path, &src);
	return e ? e : open_container(src, names, out);
}

wc_err wc_container_open(const char *path, wc_container **out) { return open_path(path, 1, out); }
wc_err wc_container_open_source(wc_source *src, wc_container **out) { return open_container(src, 1, out); }
wc_err wc_container_open_tiles(const char *path, wc_container **out) { return open_path(path, 0, out); }
wc_err wc_container_open_tiles_source(wc_source *src, wc_container **out) { return open_container(src, 0, out); }

void wc_container_retain(wc_container *c) { atomic_fetch_add(&c->refs, 1); }

void wc_container_release(wc_container *c)
{
	if (c && atomic_fetch_sub(&c->refs, 1) == 1)
		container_free(c);
}

uint64_t wc_container_id(const wc_container *c) { return c->src.id; }
uint32_t wc_container_version(const wc_container *c) { return c->h.version; }

uint64_t wc_container_memory(const wc_container *c)
{
	uint64_t n = sizeof *c + c->h.prefix_len + c->h.dicts_len;
	n += (uint64_t)c->h.ntensors * (sizeof *c->tensors + (c->by_name ? sizeof *c->by_name : 0));
	n += (uint64_t)c->h.ntiles * sizeof *c->tiles + (uint64_t)c->h.ntables * sizeof *c->tables;
	for (uint32_t i = 0; i < c->h.ntensors && c->tensors[i].name; i++) /* with malloc's 16-byte headers */
		n += strlen(c->tensors[i].name) + strlen(c->tensors[i].dtype) + 2 +
		     c->tensors[i].ndim * sizeof(uint64_t) + 48;
	return n;
}
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
	if (!c->by_name)
		return wc_fail(WC_E_NOTFOUND, "no tensor named \"%s\": the file was opened without names", name);
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
	return wc_container_read_payloads(c, i, i, buf, NULL);
}

/* Bytes a read window fetched for tile first's payload should span (a
 * source with windows: the mount's objects): the payloads from it,
 * adjacent in the file, that fit in a window whole, so that the window
 * ends where a payload does: a tile cut by its end would be read again on
 * its own. */
static uint64_t window_span(const wc_container *c, uint32_t first)
{
	const size_t w = wc_source_window(c->src_bytes);
	uint64_t span = 0;
	for (uint32_t i = first; w && i < c->h.ntiles; i++) {
		const wc_tile_info *t = &c->tiles[i];
		if ((i > first && t->coff != c->tiles[i - 1].coff + c->tiles[i - 1].csize) || span + t->csize > w)
			break;
		span += t->csize;
	}
	return span;
}

wc_err wc_container_read_payloads(const wc_container *c, uint32_t first, uint32_t last, uint8_t *buf,
				  uint32_t *bad)
{
	if (bad)
		*bad = first;
	if (first > last || last >= c->h.ntiles)
		return first == last ? wc_fail(WC_E_RANGE, "tile %u of %u", first, c->h.ntiles)
				     : wc_fail(WC_E_RANGE, "tiles %u..%u of %u", first, last, c->h.ntiles);
	const wc_tile_info *a = &c->tiles[first], *b = &c->tiles[last];
	char what[48];
	if (first == last)
		snprintf(what, sizeof what, "tile %u", first);
	else
		snprintf(what, sizeof what, "tiles %u..%u", first, last);
	wc_err e = wc_source_read_within(c->src_bytes, buf, (size_t)(b->coff + b->csize - a->coff), a->coff,
					 window_span(c, first), what);
	for (uint32_t i = first; e == WC_OK && i <= last; i++)
		if ((e = wc_container_check_payload(c, i, buf + (c->tiles[i].coff - a->coff))) && bad)
			*bad = i;
	return e;
}

wc_err wc_container_check_payload(const wc_container *c, uint32_t i, const uint8_t *buf)
{
	if (i >= c->h.ntiles)
		return wc_fail(WC_E_RANGE, "tile %u of %u", i, c->h.ntiles);
	const wc_tile_info *t = &c->tiles[i];
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
	wc_tile_job job;
	memset(&job, 0, sizeof job);
	job.payload = payload;
	job.payload_size = c->tiles[i].csize;
	job.out = out;
	job.out_size = c->tiles[i].dsize;
	c->src.ops->describe_job(&c->src, i, &job);
	wc_err e = wc_decode_job_cpu(&job); /* the tile's kind's decoder, then its dhash */
	if (e)
		return wc_fail(e == WC_E_NOMEM ? e : WC_E_CORRUPT, "tile %u: %s", i, job.detail);
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
	if (c->lossy_jobs && c->tensors[t->tensor].lossy) {
		job->kind = WC_JOB_LOSSY;
		job->kind_data = &c->lossy_jobs[i];
	}
}

static void src_name_tile(const wc_tile_source *s, uint32_t i, char *buf, size_t cap)
{
	const wc_container *c = of_source(s);
	if (i >= c->h.ntiles) {
		snprintf(buf, cap, "%s: tile %" PRIu32 " (it has %" PRIu32 ")", c->name, i, c->h.ntiles);
		return;
	}
	uint32_t t = c->tiles[i].tensor;
	if (c->tensors[t].name)
		snprintf(buf, cap, "%s: tensor '%s', tile %" PRIu32, c->name, c->tensors[t].name, i);
	else /* opened without names (wc_container_open_tiles) */
		snprintf(buf, cap, "%s: tensor %" PRIu32 ", tile %" PRIu32, c->name, t, i);
}

wc_err wc_container_set_name(wc_container *c, const char *name, const char *reopen_path)
{
	char *n = strdup(name);
	if (!n)
		return wc_fail(WC_E_NOMEM, "out of memory");
	wc_err e = wc_source_set_path(c->src_bytes, reopen_path ? reopen_path : name);
	if (e) {
		free(n);
		return e;
	}
	free(c->name);
	c->name = n;
	return WC_OK;
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
	.name_tile = src_name_tile,
};

wc_tile_source *wc_container_source(wc_container *c) { return &c->src; }
