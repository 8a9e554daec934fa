/* tensor_file.c - one view of .wcodec and safetensors checkpoints (loader.h). */
#include "loader/loader.h"

#include <stdlib.h>
#include <string.h>

#include "container/container_source.h"
#include "container/safetensors.h"
#include "source/source.h"

struct wc_tensor_file {
	wc_container *c; /* a .wcodec file, or NULL */
	wc_source *src;  /* a plain file's bytes, or NULL */
	uint8_t *header; /* a plain file's first 8 + N bytes */
	uint64_t header_len, data_off, data_size;
	char *path; /* for error reasons */
	bool remote; /* wc_tensor_file_remote */
};

bool wc_tensor_file_remote(const wc_tensor_file *f) { return f->remote; }

/* A plain safetensors file: read and validate its header. */
static wc_err open_plain(wc_tensor_file *f, const char *path)
{
	const uint64_t size = wc_source_size(f->src);
	uint8_t first8[8];
	uint64_t n;
	wc_err e;
	if (size < 8)
		return wc_fail(WC_E_FORMAT, "%s: %llu bytes is neither a .wcodec file nor a safetensors file", path,
			       (unsigned long long)size);
	if ((e = wc_source_read(f->src, first8, 8, 0, "safetensors header length")) ||
	    (e = wc_st_header_length(first8, size, &n)))
		return e;
	f->header = malloc(8 + n);
	if (!f->header)
		return wc_fail(WC_E_NOMEM, "%s: header of %llu bytes", path, (unsigned long long)n);
	if ((e = wc_source_read(f->src, f->header, 8 + n, 0, "safetensors header")))
		return e;
	wc_st_header *h;
	if ((e = wc_st_parse(f->header, 8 + n, size, &h)))
		return e;
	f->header_len = n;
	f->data_off = h->data_offset;
	f->data_size = h->data_size;
	wc_st_free(h);
	return WC_OK;
}

wc_err wc_tensor_file_open(const char *path, wc_tensor_file **out)
{
	*out = NULL;
	wc_tensor_file *f = calloc(1, sizeof *f);
	if (!f)
		return wc_fail(WC_E_NOMEM, "out of memory");
	f->path = strdup(path);
	if (!f->path) {
		free(f);
		return wc_fail(WC_E_NOMEM, "out of memory");
	}
	wc_source *src;
	wc_err e = wc_source_open(path, &src);
	if (e) {
		free(f->path);
		free(f);
		return e;
	}
	f->remote = wc_source_read_ahead(src) > 0;
	char magic[8] = { 0 };
	if (wc_source_size(src) >= sizeof magic && wc_source_read(src, magic, sizeof magic, 0, "magic") == WC_OK &&
	    memcmp(magic, WC_MAGIC, sizeof magic) == 0) {
		e = wc_container_open_source(src, &f->c); /* takes src */
	} else {
		f->src = src;
		e = open_plain(f, path);
		if (e && strncmp(wc_last_detail(), path, strlen(path)) != 0) {
			char why[400];
			snprintf(why, sizeof why, "%s", wc_last_detail());
			wc_fail(e, "%s: %s", path, why);
		}
	}
	if (e) {
		wc_tensor_file_close(f);
		return e;
	}
	*out = f;
	return WC_OK;
}

wc_err wc_tensor_file_of_container(wc_container *c, const char *path, wc_tensor_file **out)
{
	*out = NULL;
	wc_tensor_file *f = calloc(1, sizeof *f);
	if (!f || !(f->path = strdup(path ? path : "(container)"))) {
		free(f);
		return wc_fail(WC_E_NOMEM, "out of memory");
	}
	wc_container_retain(c);
	f->c = c;
	*out = f;
	return WC_OK;
}

void wc_tensor_file_close(wc_tensor_file *f)
{
	if (!f)
		return;
	if (f->c)
		wc_container_release(f->c);
	wc_source_close(f->src);
	free(f->header);
	free(f->path);
	free(f);
}

const char *wc_tensor_file_header(const wc_tensor_file *f, size_t *len)
{
	if (f->c) {
		size_t plen;
		const uint8_t *p = wc_container_prefix(f->c, &plen);
		*len = plen - 8; /* the container validated 8 + N == prefix length */
		return (const char *)p + 8;
	}
	*len = (size_t)f->header_len;
	return (const char *)f->header + 8;
}

uint64_t wc_tensor_file_data_size(const wc_tensor_file *f)
{
	if (f->c) {
		size_t plen;
		wc_container_prefix(f->c, &plen);
		return wc_container_virtual_size(f->c) - plen;
	}
	return f->data_size;
}

const char *wc_tensor_file_path(const wc_tensor_file *f) { return f->path; }
wc_container *wc_tensor_file_container(const wc_tensor_file *f) { return f->c; }
wc_err wc_tensor_file_read_data(const wc_tensor_file *f, void *dst, size_t len, uint64_t off)
{
	if (f->c)
		return wc_fail(WC_E_INVAL, "%s: a .wcodec file's data section is decoded, not read", f->path);
	if (off > f->data_size || len > f->data_size - off)
		return wc_fail(WC_E_RANGE, "%s: bytes [%llu, %llu) past the data section's %llu", f->path,
			       (unsigned long long)off, (unsigned long long)(off + len),
			       (unsigned long long)f->data_size);
	return wc_source_read(f->src, dst, len, f->data_off + off, "the data section");
}

wc_err wc_tensor_file_tiles(const wc_tensor_file *f, uint64_t off, uint64_t len, uint32_t *first,
			    uint32_t *last)
{
	if (!f->c || len == 0)
		return wc_fail(WC_E_INVAL, "%s: tiles of %llu bytes of a %s file", f->path, (unsigned long long)len,
			       f->c ? ".wcodec" : "plain");
	size_t plen;
	wc_container_prefix(f->c, &plen);
	wc_err e = wc_container_find_tile(f->c, plen + off, first);
	if (!e)
		e = wc_container_find_tile(f->c, plen + off + len - 1, last);
	return e;
}

wc_err wc_tensor_file_tile_extent(const wc_tensor_file *f, uint32_t first, uint32_t last, uint64_t *data_off,
				  uint64_t *data_len, uint64_t *payload_off, uint64_t *payload_len)
{
	if (!f->c)
		return wc_fail(WC_E_INVAL, "%s: a plain file has no tiles", f->path);
	if (first > last || last >= wc_container_ntiles(f->c))
		return wc_fail(WC_E_RANGE, "%s: tiles %u..%u of %u", f->path, first, last, wc_container_ntiles(f->c));
	size_t plen;
	wc_container_prefix(f->c, &plen);
	const wc_tile_info *a = wc_container_tile(f->c, first), *b = wc_container_tile(f->c, last);
	if (data_off)
		*data_off = a->voff - plen;
	if (data_len)
		*data_len = b->voff + b->dsize - a->voff;
	if (payload_off)
		*payload_off = a->coff;
	if (payload_len)
		*payload_len = b->coff + b->csize - a->coff;
	return WC_OK;
}

wc_err wc_tensor_file_read_payloads(const wc_tensor_file *f, uint32_t first, uint32_t last, void *dst)
{
	uint32_t bad;
	wc_err e = wc_tensor_file_tile_extent(f, first, last, NULL, NULL, NULL, NULL);
	if (e || !(e = wc_container_read_payloads(f->c, first, last, dst, &bad)))
		return e;
	return wc_fail_context(e, "%s: tensor '%s'", f->path,
			       wc_container_tensor(f->c, wc_container_tile(f->c, bad)->tensor)->name);
}

wc_err wc_tensor_file_tile_span(const wc_tensor_file *f, uint64_t off, uint64_t len, uint64_t *span_off,
				uint64_t *span_len)
{
	const uint64_t size = wc_tensor_file_data_size(f);
	if (off > size || len > size - off)
		return wc_fail(WC_E_RANGE, "bytes [%llu, %llu) past the data section's %llu", (unsigned long long)off,
			       (unsigned long long)(off + len), (unsigned long long)size);
	*span_off = off;
	*span_len = len;
	if (!f->c || len == 0)
		return WC_OK;
	uint32_t first, last;
	wc_err e = wc_tensor_file_tiles(f, off, len, &first, &last);
	if (e)
		return e;
	size_t plen;
	wc_container_prefix(f->c, &plen);
	const wc_tile_info *a = wc_container_tile(f->c, first), *b = wc_container_tile(f->c, last);
	*span_off = a->voff - plen;
	*span_len = b->voff + b->dsize - a->voff;
	return WC_OK;
}

wc_err wc_load_range_check(wc_tensor_file *const *files, size_t nfiles, const wc_load_range *ranges, size_t i)
{
	const wc_load_range *r = &ranges[i];
	if (r->file >= nfiles || !files[r->file] || r->reserved != 0 || (r->length && !r->dst))
		return wc_fail(WC_E_INVAL, "load range %zu: file %u of %zu, reserved %u, dst %p", i, r->file, nfiles,
			       r->reserved, r->dst);
	const wc_tensor_file *f = files[r->file];
	const uint64_t size = wc_tensor_file_data_size(f);
	if (r->offset > size || r->length > size - r->offset)
		return wc_fail(WC_E_RANGE, "%s: bytes [%llu, %llu) past the data section's %llu", f->path,
			       (unsigned long long)r->offset, (unsigned long long)(r->offset + r->length),
			       (unsigned long long)size);
	return WC_OK;
}

wc_err wc_object_list(const char *prefix_uri, int (*fn)(void *ctx, const char *key, uint64_t size), void *ctx)
{
	return wc_source_list(prefix_uri, fn, ctx);
}
