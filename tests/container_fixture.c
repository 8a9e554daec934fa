/* container_fixture.c - the every-dtype file the container tests share (see container_fixture.h). */
#include "container_fixture.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "container/container.h"

#include "st_builder.h"
#include "wcodec_resign.h"

char fx_dir[256];
char fx_st_path[300], fx_wc_path[300];
uint8_t *fx_st_bytes;
size_t fx_st_len;

uint8_t *fx_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	ck_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	*len = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *b = malloc(*len ? *len : 1);
	ck_assert_uint_eq(fread(b, 1, *len, f), *len);
	fclose(f);
	return b;
}

/* Build the every-dtype safetensors file and pack it with 4 KiB tiles. */
void fx_setup(void)
{
	ck_assert_ptr_nonnull(st_temp_dir(fx_dir, sizeof fx_dir, "wc_test_container"));
	snprintf(fx_st_path, sizeof fx_st_path, "%s/in.safetensors", fx_dir);
	snprintf(fx_wc_path, sizeof fx_wc_path, "%s/out.wcodec", fx_dir);
	st_file f;
	st_all_dtypes(&f, 42);
	fx_st_bytes = st_serialize(&f, &fx_st_len);
	st_free(&f);
	ck_assert_int_eq(st_write_bytes(fx_st_path, fx_st_bytes, fx_st_len), 0);
	wc_pack_opts o = {.tile_size = 4096, .chunk_symbols = 256, .threads = 3, .verify = 1};
	wc_pack_stats s;
	wc_err e = wc_pack_safetensors(fx_st_path, fx_wc_path, &o, &s);
	ck_assert_msg(e == WC_OK, "pack: %s", wc_last_detail());
	ck_assert_uint_eq(s.input_bytes, fx_st_len);
}

void fx_teardown(void)
{
	ck_assert_int_eq(st_remove_tree(fx_dir), 0);
	free(fx_st_bytes);
}

void fx_fix_check(uint8_t *b, const wc_file_header *h)
{
	tu_wcodec_fix_check(b, h);
}

wc_err fx_open_bytes_as(const uint8_t *b, size_t len, int names)
{
	char p[320];
	snprintf(p, sizeof p, "%s/mod.wcodec", fx_dir);
	ck_assert_int_eq(st_write_bytes(p, b, len), 0);
	wc_container *c = NULL;
	wc_clear_detail();
	wc_err e = names ? wc_container_open(p, &c) : wc_container_open_tiles(p, &c);
	if (e == WC_OK)
		wc_container_release(c);
	else
		ck_assert_str_ne(wc_last_detail(), "");
	return e;
}

wc_err fx_open_bytes(const uint8_t *b, size_t len) { return fx_open_bytes_as(b, len, 1); }

/* The file b (header h) with its metadata content replaced by the n bytes
 * at content (zstd-compressed as the format stores it), check recomputed. */
uint8_t *fx_with_metadata(const uint8_t *b, const wc_file_header *h, const void *content, size_t n, size_t *out_len)
{
	size_t cap = ZSTD_compressBound(n);
	uint8_t *z = malloc(cap);
	size_t zl = ZSTD_compress(z, cap, content, n, 3);
	ck_assert(!ZSTD_isError(zl));
	*out_len = h->meta_off + zl;
	uint8_t *m = malloc(*out_len);
	memcpy(m, b, h->meta_off);
	memcpy(m + h->meta_off, z, zl);
	wc_put_u64(m + 120, zl);       /* meta_len */
	wc_put_u64(m + 128, *out_len); /* file_size */
	wc_file_header h2 = *h;
	h2.meta_len = zl;
	fx_fix_check(m, &h2);
	free(z);
	return m;
}

/* The metadata content, NUL-terminated (for JSON); *n its bytes. */
uint8_t *fx_metadata_of(const uint8_t *b, const wc_file_header *h, size_t *n)
{
	unsigned long long len = ZSTD_getFrameContentSize(b + h->meta_off, h->meta_len);
	uint8_t *m = malloc(len + 1);
	ck_assert_uint_eq(ZSTD_decompress(m, len, b + h->meta_off, h->meta_len), len);
	m[len] = 0;
	*n = (size_t)len;
	return m;
}

void fx_walk_records(const uint8_t *t, size_t n, uint32_t ntensors, fx_record *out)
{
	size_t pos = 0;
	for (uint32_t i = 0; i < ntensors; i++) {
		fx_record r = {.off = pos, .len = WC_TT_HEAD_BYTES, .code = t[pos], .flags = t[pos + 1],
			    .bytes = wc_get_u64(t + pos + 4)};
		wc_layout l;
		unsigned planes;
		if (r.code == WC_TT_LAYOUT_DICT) {
			ck_assert_int_eq(wc_tt_layout_of(t[pos + 2], &l), 0);
			planes = wc_get_u32(t + pos + WC_TT_HEAD_BYTES) <= 256 ? 1 : 2;
			r.len += 4 + 4 * l.nplanes;
		} else if (r.code == WC_TT_LAYOUT_INT8) { /* lossy: its fields, one plane of codes */
			planes = 1;
			r.len += WC_TT_INT8_BYTES;
		} else {
			ck_assert_int_eq(wc_tt_layout_of(r.code, &l), 0);
			planes = l.nplanes;
		}
		r.len += planes * WC_TT_PLANE_BYTES;
		out[i] = r;
		pos += r.len;
	}
	ck_assert_uint_eq(pos, n);
}
