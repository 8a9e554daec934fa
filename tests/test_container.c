/* test_container.c - .wcodec pack/open/pread round trips for every dtype,
 * the tile source, peek, memory; an input the packer refuses leaves
 * nothing behind. Damaged and forged files: test_container_damage.c;
 * dictionary tensors: test_container_dict.c; the metadata: test_metadata.c. */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

#include "check_run.h"
#include "codec/tile_codec.h"
#include "container/container.h"
#include "container/format.h"
#include "container_fixture.h"
#include "engine/backend.h"
#include "st_builder.h"

static int dir_entries(void)
{
	DIR *d = opendir(fx_dir);
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

START_TEST(round_trip_every_dtype)
{
	wc_container *c;
	ck_assert_int_eq(wc_container_open(fx_wc_path, &c), WC_OK);
	ck_assert_uint_eq(wc_container_virtual_size(c), fx_st_len);
	ck_assert_uint_eq(wc_container_tile_size(c), 4096);
	ck_assert_uint_eq(wc_container_chunk_symbols(c), 256);
	uint8_t *all = malloc(fx_st_len);
	ck_assert_int_eq(wc_container_pread(c, all, fx_st_len, 0), WC_OK);
	ck_assert_int_eq(memcmp(all, fx_st_bytes, fx_st_len), 0);

	/* Reads at offsets and lengths that cross prefix, tile and tensor edges. */
	uint64_t rng = 7;
	for (int i = 0; i < 300; i++) {
		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		uint64_t off = (rng >> 20) % fx_st_len;
		size_t len = (size_t)((rng >> 3) % 10000);
		if (len > fx_st_len - off)
			len = fx_st_len - off;
		memset(all, 0, len);
		ck_assert_int_eq(wc_container_pread(c, all, len, off), WC_OK);
		ck_assert_int_eq(memcmp(all, fx_st_bytes + off, len), 0);
	}
	ck_assert_int_eq(wc_container_pread(c, all, 2, fx_st_len - 1), WC_E_RANGE);
	free(all);

	/* The prefix is the input's header verbatim. */
	size_t plen;
	const uint8_t *prefix = wc_container_prefix(c, &plen);
	ck_assert_int_eq(memcmp(prefix, fx_st_bytes, plen), 0);

	/* Every tensor is listed with its dtype, shape, range, and tiles. */
	uint32_t idx;
	ck_assert_int_eq(wc_container_find_tensor(c, "BF16.small", &idx), WC_OK);
	const wc_tensor_info *t = wc_container_tensor(c, idx);
	ck_assert_str_eq(t->name, "BF16.small");
	ck_assert_str_eq(t->dtype, "BF16");
	ck_assert_uint_eq(t->ndim, 2);
	ck_assert_uint_eq(t->shape[0], 37);
	ck_assert_uint_eq(t->shape[1], 129);
	ck_assert_uint_eq(t->end - t->begin, 37 * 129 * 2);
	ck_assert_str_eq(wc_layout_name(t->layout), "bf16");
	ck_assert_uint_eq(t->ntiles, (37 * 129 * 2 + 4095) / 4096);
	ck_assert_int_eq(wc_container_find_tensor(c, "nope", &idx), WC_E_NOTFOUND);
	ck_assert_int_eq(wc_container_find_tensor(c, "F64.empty", &idx), WC_OK);
	ck_assert_uint_eq(wc_container_tensor(c, idx)->ntiles, 0);
	ck_assert_int_eq(wc_container_find_tensor(c, "model.bf16.weight", &idx), WC_OK);
	t = wc_container_tensor(c, idx);
	ck_assert_uint_ne(t->planes[0].table, WC_NO_TABLE); /* the exponent plane has a table */
	ck_assert(t->planes[0].entropy_bits > 1.0 && t->planes[0].entropy_bits < 4.0);

	/* The "small" tensors (a few hundred distinct values) use dictionaries,
	 * so the damage tests below also hit the dictionary section. */
	uint32_t ndict = 0;
	for (uint32_t i = 0; i < wc_container_ntensors(c); i++)
		ndict += wc_container_tensor(c, i)->dict != NULL;
	ck_assert_uint_gt(ndict, 0);

	/* Tiles cover the data section in order; find_tile agrees. */
	uint32_t n = wc_container_ntiles(c);
	ck_assert_uint_gt(n, 10);
	uint64_t v = plen;
	for (uint32_t i = 0; i < n; i++) {
		const wc_tile_info *x = wc_container_tile(c, i);
		ck_assert_uint_eq(x->voff, v);
		uint32_t k;
		ck_assert_int_eq(wc_container_find_tile(c, x->voff, &k), WC_OK);
		ck_assert_uint_eq(k, i);
		ck_assert_int_eq(wc_container_find_tile(c, x->voff + x->dsize - 1, &k), WC_OK);
		ck_assert_uint_eq(k, i);
		v += x->dsize;
	}
	ck_assert_uint_eq(v, fx_st_len);
	uint32_t k;
	ck_assert_int_eq(wc_container_find_tile(c, 0, &k), WC_E_RANGE);
	ck_assert_int_eq(wc_container_find_tile(c, fx_st_len, &k), WC_E_RANGE);
	ck_assert_ptr_null(wc_container_tile(c, n));
	wc_container_release(c);
}
END_TEST

/* The tile source: a decode from describe_job's fields alone (as a backend
 * does) gives the input bytes. */
START_TEST(tile_source_describes_jobs)
{
	wc_container *c;
	ck_assert_int_eq(wc_container_open(fx_wc_path, &c), WC_OK);
	wc_tile_source *src = wc_container_source(c);
	ck_assert_uint_eq(src->id, wc_container_id(c));
	ck_assert_uint_eq(src->ops->ntiles(src), wc_container_ntiles(c));
	src->ops->retain(src); /* the source keeps the container alive */
	wc_container_release(c);
	size_t plen;
	wc_container_prefix(c, &plen);
	for (uint32_t i = 0; i < src->ops->ntiles(src); i++) {
		uint32_t cs = src->ops->tile_csize(src, i), ds = src->ops->tile_dsize(src, i);
		uint8_t *payload = malloc(cs), *out = malloc(ds);
		ck_assert_int_eq(src->ops->read_payload(src, i, payload), WC_OK);
		wc_tile_job job;
		memset(&job, 0xee, sizeof job);
		src->ops->describe_job(src, i, &job);
		ck_assert_uint_eq(job.kind, WC_JOB_PLANES);
		ck_assert_uint_eq(job.table_key, src->id);
		const wc_tensor_info *ti = wc_container_tensor(c, wc_container_tile(c, i)->tensor);
		ck_assert_ptr_eq(job.dict, ti->dict);
		ck_assert_uint_eq(job.dict_entries, ti->dict_entries);
		ck_assert_int_eq(wc_tile_decode_dict(job.layout, payload, cs, job.tables, job.ntables, job.chunk_symbols,
						     job.dict, job.dict_entries, out, ds),
				 WC_OK);
		ck_assert_uint_eq(XXH3_64bits(out, ds), job.dhash);
		const wc_tile_info *x = wc_container_tile(c, i);
		ck_assert_int_eq(memcmp(out, fx_st_bytes + x->voff, ds), 0);
		free(payload);
		free(out);
	}
	ck_assert_uint_eq(src->ops->tile_dsize(src, 1u << 30), 0);
	src->ops->release(src);
}
END_TEST

/* What an open container holds is at least its header bytes and tile index. */
START_TEST(memory_of_an_open_container)
{
	wc_container *c;
	ck_assert_int_eq(wc_container_open(fx_wc_path, &c), WC_OK);
	size_t plen;
	wc_container_prefix(c, &plen);
	ck_assert_uint_ge(wc_container_memory(c), plen + (uint64_t)wc_container_ntiles(c) * sizeof(wc_tile_info) +
							  (uint64_t)wc_container_ntensors(c) * sizeof(wc_tensor_info));
	ck_assert_uint_lt(wc_container_memory(c), 4 * (fx_st_len + 65536));
	wc_container_release(c);
}
END_TEST

START_TEST(ids_are_unique)
{
	wc_container *a, *b;
	ck_assert_int_eq(wc_container_open(fx_wc_path, &a), WC_OK);
	ck_assert_int_eq(wc_container_open(fx_wc_path, &b), WC_OK);
	ck_assert_uint_ne(wc_container_id(a), wc_container_id(b));
	wc_container_release(a);
	wc_container_release(b);
}
END_TEST

/* wc_container_peek: what the header says, as wc_container_open sees it;
 * a truncated file or bad magic is refused; damage past the header (the
 * metadata) passes the peek and fails the full open's checksum. */
START_TEST(peek_reads_the_header_alone)
{
	wc_container *c;
	ck_assert_int_eq(wc_container_open(fx_wc_path, &c), WC_OK);
	int fd = open(fx_wc_path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	wc_container_summary s;
	ck_assert_int_eq(wc_container_peek(fd, fx_wc_path, &s), WC_OK);
	ck_assert_uint_eq(s.virtual_size, wc_container_virtual_size(c));
	ck_assert_uint_eq(s.virtual_size, fx_st_len);
	ck_assert_uint_eq(s.file_size, wc_container_file_size(c));
	ck_assert_uint_eq(s.tile_size, wc_container_tile_size(c));
	ck_assert_uint_eq(s.ntensors, wc_container_ntensors(c));
	ck_assert_uint_eq(s.ntiles, wc_container_ntiles(c));
	close(fd);
	wc_container_release(c);

	size_t len;
	uint8_t *b = fx_read_file(fx_wc_path, &len);
	char p[320];
	snprintf(p, sizeof p, "%s/peek.wcodec", fx_dir);
	struct { size_t len; size_t at; uint8_t to; wc_err peek, open; } cases[] = {
		{159, SIZE_MAX, 0, WC_E_FORMAT, WC_E_FORMAT},  /* shorter than the header */
		{len - 1, SIZE_MAX, 0, WC_E_FORMAT, WC_E_FORMAT}, /* size != the header's */
		{len, 0, 'X', WC_E_FORMAT, WC_E_FORMAT},       /* magic */
		{len, len - 3, 0, WC_OK, WC_E_CORRUPT},        /* metadata: only open sees it */
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		uint8_t keep = 0;
		if (cases[i].at != SIZE_MAX) {
			keep = b[cases[i].at];
			b[cases[i].at] = cases[i].to == keep ? (uint8_t)(keep ^ 1) : cases[i].to;
		}
		ck_assert_int_eq(st_write_bytes(p, b, cases[i].len), 0);
		if (cases[i].at != SIZE_MAX)
			b[cases[i].at] = keep;
		fd = open(p, O_RDONLY);
		ck_assert_int_ge(fd, 0);
		wc_clear_detail();
		wc_err e = wc_container_peek(fd, p, &s);
		ck_assert_msg(e == cases[i].peek, "case %zu: peek %s (%s)", i, wc_strerror(e), wc_last_detail());
		if (e)
			ck_assert_ptr_nonnull(strstr(wc_last_detail(), p));
		close(fd);
		c = NULL;
		e = wc_container_open(p, &c);
		ck_assert_msg(e == cases[i].open, "case %zu: open %s (%s)", i, wc_strerror(e), wc_last_detail());
		ck_assert_ptr_null(c);
	}
	free(b);
	/* Not a regular file. */
	fd = open(fx_dir, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(wc_container_peek(fd, fx_dir, &s), WC_E_FORMAT);
	close(fd);
}
END_TEST

START_TEST(malformed_input_leaves_nothing)
{
	/* Overlapping tensors: pack must fail naming the problem, with no output or temp file. */
	const char *js = "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
			 "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[2,6]}}";
	size_t n = strlen(js), len = 8 + n + 6;
	uint8_t *b = calloc(1, len);
	b[0] = (uint8_t)n;
	memcpy(b + 8, js, n);
	char in[320], out[320];
	snprintf(in, sizeof in, "%s/bad.safetensors", fx_dir);
	snprintf(out, sizeof out, "%s/bad.wcodec", fx_dir);
	ck_assert_int_eq(st_write_bytes(in, b, len), 0);
	int before = dir_entries();
	wc_pack_opts o = {.verify = 1};
	ck_assert_int_eq(wc_pack_safetensors(in, out, &o, NULL), WC_E_FORMAT);
	ck_assert_ptr_nonnull(strstr(wc_last_detail(), "overlap"));
	ck_assert_int_eq(dir_entries(), before);
	ck_assert_int_ne(access(out, F_OK), 0);
	/* Bad options are rejected before anything is written. */
	o.tile_size = 1000;
	ck_assert_int_eq(wc_pack_safetensors(fx_st_path, out, &o, NULL), WC_E_INVAL);
	o.tile_size = 0;
	o.chunk_symbols = 33;
	ck_assert_int_eq(wc_pack_safetensors(fx_st_path, out, &o, NULL), WC_E_INVAL);
	ck_assert_int_eq(dir_entries(), before);
	/* A missing input. */
	o.chunk_symbols = 0;
	snprintf(in, sizeof in, "%s/missing.safetensors", fx_dir);
	ck_assert_int_eq(wc_pack_safetensors(in, out, &o, NULL), WC_E_IO);
	ck_assert_int_eq(dir_entries(), before);
	free(b);
}
END_TEST

START_TEST(empty_file_round_trips)
{
	const char *js = "{\"__metadata__\":{\"a\":\"b\"}}";
	size_t n = strlen(js), len = 8 + n;
	uint8_t *b = calloc(1, len);
	b[0] = (uint8_t)n;
	memcpy(b + 8, js, n);
	char in[320], out[320];
	snprintf(in, sizeof in, "%s/empty.safetensors", fx_dir);
	snprintf(out, sizeof out, "%s/empty.wcodec", fx_dir);
	ck_assert_int_eq(st_write_bytes(in, b, len), 0);
	wc_pack_opts o = {.verify = 1};
	ck_assert_int_eq(wc_pack_safetensors(in, out, &o, NULL), WC_OK);
	wc_container *c;
	ck_assert_int_eq(wc_container_open(out, &c), WC_OK);
	ck_assert_uint_eq(wc_container_ntiles(c), 0);
	ck_assert_uint_eq(wc_container_ntensors(c), 0);
	uint8_t *r = malloc(len);
	ck_assert_int_eq(wc_container_pread(c, r, len, 0), WC_OK);
	ck_assert_int_eq(memcmp(r, b, len), 0);
	wc_container_release(c);
	free(r);
	free(b);
}
END_TEST

START_TEST(weights_compress_near_entropy)
{
	/* 256x256 BF16 Gaussian weights: coded data within 1% of the planes' entropy. */
	st_file f = {0};
	uint64_t rng = 5, shape[2] = {512, 512};
	st_add(&f, "w", "BF16", 2, shape, "weights", &rng);
	size_t len;
	uint8_t *b = st_serialize(&f, &len);
	st_free(&f);
	char in[320], out[320];
	snprintf(in, sizeof in, "%s/w.safetensors", fx_dir);
	snprintf(out, sizeof out, "%s/w.wcodec", fx_dir);
	ck_assert_int_eq(st_write_bytes(in, b, len), 0);
	wc_pack_stats s;
	wc_pack_opts o = {.verify = 1};
	ck_assert_int_eq(wc_pack_safetensors(in, out, &o, &s), WC_OK);
	ck_assert_uint_eq(s.data_bytes, 512 * 512 * 2);
	ck_assert_msg(s.coded_data_bytes < 1.01 * s.entropy_bound_bytes, "coded %llu bytes, bound %.0f",
		      (unsigned long long)s.coded_data_bytes, s.entropy_bound_bytes);
	ck_assert(s.coded_data_bytes < 0.75 * s.data_bytes);
	free(b);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("container");
	TCase *tc = tcase_create("container");
	tcase_add_unchecked_fixture(tc, fx_setup, fx_teardown); /* one pack for all tests; they never modify it */
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, round_trip_every_dtype);
	tcase_add_test(tc, tile_source_describes_jobs);
	tcase_add_test(tc, ids_are_unique);
	tcase_add_test(tc, memory_of_an_open_container);
	tcase_add_test(tc, peek_reads_the_header_alone);
	tcase_add_test(tc, malformed_input_leaves_nothing);
	tcase_add_test(tc, empty_file_round_trips);
	tcase_add_test(tc, weights_compress_near_entropy);
	suite_add_tcase(s, tc);
	return check_run(s);
}
