/* test_loader.c - wc_tensor_file and wc_load_host (src/loader/loader.h):
 * a .wcodec file and its original safetensors file read the same bytes for
 * every range, tile spans cover and align, bad ranges and damaged tiles are
 * errors with a reason. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "container/container.h"
#include "loader/loader.h"
#include "st_builder.h"

static char dir[256];
static char st_path[300], wc_path[300];
static uint8_t *st_bytes;
static size_t st_len;
static uint64_t data_off; /* 8 + N in the original */

static void setup(void)
{
	ck_assert_ptr_nonnull(st_temp_dir(dir, sizeof dir, "wc_test_loader"));
	snprintf(st_path, sizeof st_path, "%s/in.safetensors", dir);
	snprintf(wc_path, sizeof wc_path, "%s/in.wcodec", dir);
	st_file f;
	st_all_dtypes(&f, 7);
	st_bytes = st_serialize(&f, &st_len);
	st_free(&f);
	ck_assert_int_eq(st_write_bytes(st_path, st_bytes, st_len), 0);
	wc_pack_opts o = { .tile_size = 4096, .chunk_symbols = 256, .threads = 2 };
	wc_pack_stats s;
	ck_assert_msg(wc_pack_safetensors(st_path, wc_path, &o, &s) == WC_OK, "pack: %s", wc_last_detail());
	uint64_t n = 0;
	memcpy(&n, st_bytes, 8); /* little-endian host */
	data_off = 8 + n;
}

static void teardown(void)
{
	ck_assert_int_eq(st_remove_tree(dir), 0);
	free(st_bytes);
}

static wc_tensor_file *open_ok(const char *path)
{
	wc_tensor_file *f;
	wc_err e = wc_tensor_file_open(path, &f);
	ck_assert_msg(e == WC_OK, "open %s: %s", path, wc_last_detail());
	return f;
}

START_TEST(both_kinds_give_the_original_header_and_data)
{
	wc_tensor_file *f[2] = { open_ok(st_path), open_ok(wc_path) };
	const uint64_t size = st_len - data_off;
	for (int k = 0; k < 2; k++) {
		size_t hl;
		const char *h = wc_tensor_file_header(f[k], &hl);
		ck_assert_uint_eq(hl, data_off - 8);
		ck_assert_int_eq(memcmp(h, st_bytes + 8, hl), 0);
		ck_assert_uint_eq(wc_tensor_file_data_size(f[k]), size);
		uint8_t *buf = malloc(size);
		memset(buf, 0xa5, size);
		wc_load_range r = { .file = (uint32_t)k, .offset = 0, .length = size, .dst = buf };
		ck_assert_msg(wc_load_host(f, 2, &r, 1) == WC_OK, "%s", wc_last_detail());
		ck_assert_int_eq(memcmp(buf, st_bytes + data_off, size), 0);
		free(buf);
	}
	ck_assert_ptr_null(wc_tensor_file_container(f[0]));
	ck_assert_ptr_nonnull(wc_tensor_file_container(f[1]));
	uint8_t first[16];
	ck_assert_int_eq(wc_tensor_file_read_data(f[0], first, sizeof first, 0), WC_OK);
	ck_assert_int_eq(memcmp(first, st_bytes + data_off, sizeof first), 0);
	ck_assert_int_eq(wc_tensor_file_read_data(f[1], first, sizeof first, 0), WC_E_INVAL);
	ck_assert_int_eq(wc_tensor_file_read_data(f[0], first, 8, wc_tensor_file_data_size(f[0]) - 4), WC_E_RANGE);
	wc_tensor_file_close(f[0]);
	wc_tensor_file_close(f[1]);
}
END_TEST

/* Many unaligned ranges of both files in one call, across tile and tensor
 * boundaries, each compared with the original's bytes. */
START_TEST(random_ranges_match)
{
	wc_tensor_file *f[2] = { open_ok(st_path), open_ok(wc_path) };
	const uint64_t size = st_len - data_off;
	uint64_t rng = 12345;
	enum { N = 64 };
	wc_load_range r[N];
	uint8_t *bufs[N];
	for (int round = 0; round < 20; round++) {
		for (int i = 0; i < N; i++) {
			rng = rng * 6364136223846793005ull + 1442695040888963407ull;
			uint64_t off = (rng >> 11) % size;
			rng = rng * 6364136223846793005ull + 1442695040888963407ull;
			uint64_t len = (rng >> 11) % (size - off + 1);
			if (i % 4 == 0 && len > 20000)
				len %= 20000;
			bufs[i] = malloc(len ? len : 1);
			r[i] = (wc_load_range){ .file = (uint32_t)(i & 1), .offset = off, .length = len, .dst = bufs[i] };
		}
		ck_assert_msg(wc_load_host(f, 2, r, N) == WC_OK, "%s", wc_last_detail());
		for (int i = 0; i < N; i++) {
			ck_assert_msg(memcmp(bufs[i], st_bytes + data_off + r[i].offset, r[i].length) == 0,
				      "range %d: [%llu, +%llu) of file %u", i, (unsigned long long)r[i].offset,
				      (unsigned long long)r[i].length, r[i].file);
			free(bufs[i]);
		}
	}
	wc_tensor_file_close(f[0]);
	wc_tensor_file_close(f[1]);
}
END_TEST

START_TEST(tile_spans_cover_and_align)
{
	wc_tensor_file *f = open_ok(wc_path), *p = open_ok(st_path);
	wc_container *c = wc_tensor_file_container(f);
	size_t plen;
	wc_container_prefix(c, &plen);
	const uint64_t size = wc_tensor_file_data_size(f);
	for (uint64_t off = 0; off < size; off += 997) {
		uint64_t len = (off * 31) % 9000 + 1, so, sl;
		if (len > size - off)
			len = size - off;
		ck_assert_int_eq(wc_tensor_file_tile_span(f, off, len, &so, &sl), WC_OK);
		ck_assert_uint_le(so, off);
		ck_assert_uint_ge(so + sl, off + len);
		uint32_t a, b;
		ck_assert_int_eq(wc_container_find_tile(c, plen + so, &a), WC_OK);
		ck_assert_uint_eq(wc_container_tile(c, a)->voff, plen + so);
		ck_assert_int_eq(wc_container_find_tile(c, plen + so + sl - 1, &b), WC_OK);
		ck_assert_uint_eq(wc_container_tile(c, b)->voff + wc_container_tile(c, b)->dsize, plen + so + sl);
		/* the plain file's span is the range itself */
		ck_assert_int_eq(wc_tensor_file_tile_span(p, off, len, &so, &sl), WC_OK);
		ck_assert_uint_eq(so, off);
		ck_assert_uint_eq(sl, len);
	}
	uint64_t so, sl;
	ck_assert_int_eq(wc_tensor_file_tile_span(f, size, 1, &so, &sl), WC_E_RANGE);
	wc_tensor_file_close(f);
	wc_tensor_file_close(p);
}
END_TEST

START_TEST(bad_ranges_are_refused)
{
	wc_tensor_file *f[1] = { open_ok(wc_path) };
	const uint64_t size = wc_tensor_file_data_size(f[0]);
	uint8_t buf[16];
	wc_load_range r = { .file = 0, .offset = size - 8, .length = 16, .dst = buf };
	ck_assert_int_eq(wc_load_host(f, 1, &r, 1), WC_E_RANGE);
	ck_assert_ptr_nonnull(strstr(wc_last_detail(), "past the data section"));
	r = (wc_load_range){ .file = 1, .offset = 0, .length = 8, .dst = buf };
	ck_assert_int_eq(wc_load_host(f, 1, &r, 1), WC_E_INVAL);
	r = (wc_load_range){ .file = 0, .offset = 0, .length = 8, .dst = NULL };
	ck_assert_int_eq(wc_load_host(f, 1, &r, 1), WC_E_INVAL);
	r = (wc_load_range){ .file = 0, .offset = size, .length = 0, .dst = NULL };
	ck_assert_int_eq(wc_load_host(f, 1, &r, 1), WC_OK);
	wc_tensor_file_close(f[0]);
}
END_TEST

/* A damaged payload byte: the load and the payload reads fail with
 * WC_E_CORRUPT, naming the file, the tensor and the tile; ranges elsewhere
 * still load. */
START_TEST(damaged_tile_is_an_error_naming_it)
{
	char bad[320];
	snprintf(bad, sizeof bad, "%s/bad.wcodec", dir);
	wc_tensor_file *good = open_ok(wc_path);
	wc_container *c = wc_tensor_file_container(good);
	const uint32_t victim = wc_container_ntiles(c) / 2;
	const wc_tile_info *ti = wc_container_tile(c, victim);
	const char *tname = wc_container_tensor(c, ti->tensor)->name;
	size_t plen;
	wc_container_prefix(c, &plen);
	ck_assert_int_eq(st_copy_flipped(wc_path, bad, ti->coff + ti->csize / 2, 0x40), 0);
	wc_tensor_file *f[1] = { open_ok(bad) };
	const uint64_t size = wc_tensor_file_data_size(f[0]);
	uint8_t *buf = malloc(size);
	wc_load_range r = { .file = 0, .offset = 0, .length = size, .dst = buf };
	ck_assert_int_eq(wc_load_host(f, 1, &r, 1), WC_E_CORRUPT);
	char want[300];
	snprintf(want, sizeof want, "tensor '%s': tile %u", tname, victim);
	ck_assert_msg(strstr(wc_last_detail(), want) && strstr(wc_last_detail(), bad), "reason: %s", wc_last_detail());
	/* so do the payload reads of a distributed load, and the tiles before still read */
	const uint32_t nt = wc_container_ntiles(c);
	uint64_t pl;
	ck_assert_int_eq(wc_tensor_file_tile_extent(f[0], 0, nt - 1, NULL, NULL, NULL, &pl), WC_OK);
	uint8_t *pbuf = malloc(pl);
	ck_assert_int_eq(wc_tensor_file_read_payloads(f[0], 0, nt - 1, pbuf), WC_E_CORRUPT);
	ck_assert_msg(strstr(wc_last_detail(), want) && strstr(wc_last_detail(), bad), "reason: %s", wc_last_detail());
	ck_assert_int_eq(wc_tensor_file_read_payloads(f[0], 0, victim - 1, pbuf), WC_OK);
	free(pbuf);
	/* the tile before it still reads */
	const wc_tile_info *prev = wc_container_tile(c, victim - 1);
	r = (wc_load_range){ .file = 0, .offset = prev->voff - plen, .length = prev->dsize, .dst = buf };
	ck_assert_int_eq(wc_load_host(f, 1, &r, 1), WC_OK);
	ck_assert_int_eq(memcmp(buf, st_bytes + prev->voff, prev->dsize), 0);
	free(buf);
	wc_tensor_file_close(f[0]);
	wc_tensor_file_close(good);
}
END_TEST

/* Payloads read in runs (wc_tensor_file_read_payloads) and handed back
 * (wc_load_host_payloads, as a distributed load does with the bytes of
 * other ranks) load the same bytes as wc_load_host; the extents agree with
 * the tiles; a flipped byte in memory is WC_E_CORRUPT naming the tile, a
 * tile in no run WC_E_INVAL, and the file itself is never read for them. */
START_TEST(payload_runs_load_like_the_file)
{
	wc_tensor_file *f[2] = { open_ok(wc_path), open_ok(st_path) };
	wc_container *c = wc_tensor_file_container(f[0]);
	const uint32_t nt = wc_container_ntiles(c);
	const uint64_t size = wc_tensor_file_data_size(f[0]);
	uint64_t doff, dlen, poff, plen_all;
	ck_assert_int_eq(wc_tensor_file_tile_extent(f[0], 0, nt - 1, &doff, &dlen, &poff, &plen_all), WC_OK);
	ck_assert_uint_eq(doff, 0);
	ck_assert_uint_eq(dlen, size);
	ck_assert_uint_eq(poff, wc_container_tile(c, 0)->coff);
	ck_assert_int_eq(wc_tensor_file_tile_extent(f[1], 0, 0, NULL, NULL, NULL, NULL), WC_E_INVAL);
	ck_assert_int_eq(wc_tensor_file_tile_extent(f[0], 1, 0, NULL, NULL, NULL, NULL), WC_E_RANGE);
	ck_assert_int_eq(wc_tensor_file_tile_extent(f[0], 0, nt, NULL, NULL, NULL, NULL), WC_E_RANGE);
	/* three runs, as three ranks would read them */
	const uint32_t cut1 = nt / 3, cut2 = 2 * nt / 3;
	const uint32_t lo[3] = { 0, cut1 + 1, cut2 + 1 }, hi[3] = { cut1, cut2, nt - 1 };
	wc_payload_run runs[3];
	uint8_t *bytes[3];
	for (int k = 0; k < 3; k++) {
		uint64_t pl;
		ck_assert_int_eq(wc_tensor_file_tile_extent(f[0], lo[k], hi[k], NULL, NULL, NULL, &pl), WC_OK);
		bytes[k] = malloc(pl);
		ck_assert_msg(wc_tensor_file_read_payloads(f[0], lo[k], hi[k], bytes[k]) == WC_OK, "%s", wc_last_detail());
		runs[k] = (wc_payload_run){ .file = 0, .first_tile = lo[k], .last_tile = hi[k], .bytes = bytes[k] };
	}
	uint8_t *buf = malloc(size), *plain = malloc(size);
	wc_load_range r[2] = { { .file = 0, .offset = 0, .length = size, .dst = buf },
			       { .file = 1, .offset = 0, .length = size, .dst = plain } };
	ck_assert_msg(wc_load_host_payloads(f, 2, runs, 3, r, 2) == WC_OK, "%s", wc_last_detail());
	ck_assert_int_eq(memcmp(buf, st_bytes + data_off, size), 0);
	ck_assert_int_eq(memcmp(plain, st_bytes + data_off, size), 0);
	/* unaligned ranges inside one run */
	const wc_tile_info *t = wc_container_tile(c, lo[1]);
	size_t pfx;
	wc_container_prefix(c, &pfx);
	r[0] = (wc_load_range){ .file = 0, .offset = t->voff - pfx + 3, .length = t->dsize - 5, .dst = buf };
	ck_assert_int_eq(wc_load_host_payloads(f, 2, runs + 1, 1, r, 1), WC_OK);
	ck_assert_int_eq(memcmp(buf, st_bytes + t->voff + 3, t->dsize - 5), 0);
	/* a tile in no run */
	r[0] = (wc_load_range){ .file = 0, .offset = 0, .length = size, .dst = buf };
	ck_assert_int_eq(wc_load_host_payloads(f, 2, runs + 1, 2, r, 1), WC_E_INVAL);
	ck_assert_ptr_nonnull(strstr(wc_last_detail(), "in none of the"));
	/* a byte changed in memory: CORRUPT, naming the tile */
	const wc_tile_info *v = wc_container_tile(c, hi[1]);
	bytes[1][v->coff - wc_container_tile(c, lo[1])->coff + v->csize / 2] ^= 0x20;
	ck_assert_int_eq(wc_load_host_payloads(f, 2, runs, 3, r, 1), WC_E_CORRUPT);
	char want[64];
	snprintf(want, sizeof want, "tile %u", hi[1]);
	ck_assert_msg(strstr(wc_last_detail(), want), "reason: %s", wc_last_detail());
	/* bad runs */
	wc_payload_run bad = runs[0];
	bad.file = 1;
	ck_assert_int_eq(wc_load_host_payloads(f, 2, &bad, 1, r, 1), WC_E_INVAL);
	bad = runs[0];
	bad.last_tile = nt;
	ck_assert_int_eq(wc_load_host_payloads(f, 2, &bad, 1, r, 1), WC_E_INVAL);
	for (int k = 0; k < 3; k++)
		free(bytes[k]);
	free(buf);
	free(plain);
	wc_tensor_file_close(f[0]);
	wc_tensor_file_close(f[1]);
}
END_TEST

/* A container opened elsewhere serves the same bytes, and outlives the
 * caller's reference while the view holds its own. */
START_TEST(view_of_an_open_container)
{
	wc_container *c;
	ck_assert_int_eq(wc_container_open(wc_path, &c), WC_OK);
	wc_tensor_file *f[1];
	ck_assert_int_eq(wc_tensor_file_of_container(c, "mine", &f[0]), WC_OK);
	wc_container_release(c);
	const uint64_t size = wc_tensor_file_data_size(f[0]);
	ck_assert_uint_eq(size, st_len - data_off);
	ck_assert_str_eq(wc_tensor_file_path(f[0]), "mine");
	uint8_t *buf = malloc(size);
	wc_load_range r = { .file = 0, .offset = 0, .length = size, .dst = buf };
	ck_assert_int_eq(wc_load_host(f, 1, &r, 1), WC_OK);
	ck_assert_int_eq(memcmp(buf, st_bytes + data_off, size), 0);
	free(buf);
	wc_tensor_file_close(f[0]);
}
END_TEST

START_TEST(unreadable_files_are_refused)
{
	wc_tensor_file *f;
	ck_assert_int_eq(wc_tensor_file_open(dir, &f), WC_E_FORMAT);
	char p[320];
	snprintf(p, sizeof p, "%s/missing.safetensors", dir);
	ck_assert_int_eq(wc_tensor_file_open(p, &f), WC_E_IO);
	snprintf(p, sizeof p, "%s/short.safetensors", dir);
	ck_assert_int_eq(st_write_bytes(p, st_bytes, 100), 0);
	ck_assert_int_eq(wc_tensor_file_open(p, &f), WC_E_FORMAT);
	ck_assert_ptr_nonnull(strstr(wc_last_detail(), p));
	/* a truncated data section: the header no longer matches the file */
	snprintf(p, sizeof p, "%s/truncated.safetensors", dir);
	ck_assert_int_eq(st_write_bytes(p, st_bytes, st_len - 1), 0);
	ck_assert_int_eq(wc_tensor_file_open(p, &f), WC_E_FORMAT);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("loader");
	TCase *tc = tcase_create("loader");
	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, both_kinds_give_the_original_header_and_data);
	tcase_add_test(tc, random_ranges_match);
	tcase_add_test(tc, tile_spans_cover_and_align);
	tcase_add_test(tc, bad_ranges_are_refused);
	tcase_add_test(tc, damaged_tile_is_an_error_naming_it);
	tcase_add_test(tc, payload_runs_load_like_the_file);
	tcase_add_test(tc, view_of_an_open_container);
	tcase_add_test(tc, unreadable_files_are_refused);
	suite_add_tcase(s, tc);
	return check_run(s);
}
