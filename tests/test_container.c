/* test_container.c - .wcodec pack/open/pread round trips for every dtype, and
 * a reader that rejects truncated and corrupted files with the right error. */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>
#include <zstd.h>

#include "check_run.h"
#include "codec/tile_codec.h"
#include "container/container.h"
#include "container/format.h"
#include "engine/backend.h"
#include "st_builder.h"
#include "wcodec_resign.h"

static char dir[256];
static char st_path[300], wc_path[300];
static uint8_t *st_bytes;
static size_t st_len;

static uint8_t *read_file(const char *path, size_t *len)
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
static void setup(void)
{
	snprintf(dir, sizeof dir, "%s/wc_test_container.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(st_path, sizeof st_path, "%s/in.safetensors", dir);
	snprintf(wc_path, sizeof wc_path, "%s/out.wcodec", dir);
	st_file f;
	st_all_dtypes(&f, 42);
	st_bytes = st_serialize(&f, &st_len);
	st_free(&f);
	ck_assert_int_eq(st_write_bytes(st_path, st_bytes, st_len), 0);
	wc_pack_opts o = {.tile_size = 4096, .chunk_symbols = 256, .threads = 3, .verify = 1};
	wc_pack_stats s;
	wc_err e = wc_pack_safetensors(st_path, wc_path, &o, &s);
	ck_assert_msg(e == WC_OK, "pack: %s", wc_last_detail());
	ck_assert_uint_eq(s.input_bytes, st_len);
}

static void teardown(void)
{
	char cmd[400];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
	free(st_bytes);
}

static int dir_entries(void)
{
	DIR *d = opendir(dir);
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
	ck_assert_int_eq(wc_container_open(wc_path, &c), WC_OK);
	ck_assert_uint_eq(wc_container_virtual_size(c), st_len);
	ck_assert_uint_eq(wc_container_tile_size(c), 4096);
	ck_assert_uint_eq(wc_container_chunk_symbols(c), 256);
	uint8_t *all = malloc(st_len);
	ck_assert_int_eq(wc_container_pread(c, all, st_len, 0), WC_OK);
	ck_assert_int_eq(memcmp(all, st_bytes, st_len), 0);

	/* Reads at offsets and lengths that cross prefix, tile and tensor edges. */
	uint64_t rng = 7;
	for (int i = 0; i < 300; i++) {
		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		uint64_t off = (rng >> 20) % st_len;
		size_t len = (size_t)((rng >> 3) % 10000);
		if (len > st_len - off)
			len = st_len - off;
		memset(all, 0, len);
		ck_assert_int_eq(wc_container_pread(c, all, len, off), WC_OK);
		ck_assert_int_eq(memcmp(all, st_bytes + off, len), 0);
	}
	ck_assert_int_eq(wc_container_pread(c, all, 2, st_len - 1), WC_E_RANGE);
	free(all);

	/* The prefix is the input's header verbatim. */
	size_t plen;
	const uint8_t *prefix = wc_container_prefix(c, &plen);
	ck_assert_int_eq(memcmp(prefix, st_bytes, plen), 0);

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
	ck_assert_uint_eq(v, st_len);
	uint32_t k;
	ck_assert_int_eq(wc_container_find_tile(c, 0, &k), WC_E_RANGE);
	ck_assert_int_eq(wc_container_find_tile(c, st_len, &k), WC_E_RANGE);
	ck_assert_ptr_null(wc_container_tile(c, n));
	wc_container_release(c);
}
END_TEST

/* The tile source: a decode from describe_job's fields alone (as a backend
 * does) gives the input bytes. */
START_TEST(tile_source_describes_jobs)
{
	wc_container *c;
	ck_assert_int_eq(wc_container_open(wc_path, &c), WC_OK);
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
		ck_assert_int_eq(memcmp(out, st_bytes + x->voff, ds), 0);
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
	ck_assert_int_eq(wc_container_open(wc_path, &c), WC_OK);
	size_t plen;
	wc_container_prefix(c, &plen);
	ck_assert_uint_ge(wc_container_memory(c), plen + (uint64_t)wc_container_ntiles(c) * sizeof(wc_tile_info) +
							  (uint64_t)wc_container_ntensors(c) * sizeof(wc_tensor_info));
	ck_assert_uint_lt(wc_container_memory(c), 4 * (st_len + 65536));
	wc_container_release(c);
}
END_TEST

START_TEST(ids_are_unique)
{
	wc_container *a, *b;
	ck_assert_int_eq(wc_container_open(wc_path, &a), WC_OK);
	ck_assert_int_eq(wc_container_open(wc_path, &b), WC_OK);
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
	ck_assert_int_eq(wc_container_open(wc_path, &c), WC_OK);
	int fd = open(wc_path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	wc_container_summary s;
	ck_assert_int_eq(wc_container_peek(fd, wc_path, &s), WC_OK);
	ck_assert_uint_eq(s.virtual_size, wc_container_virtual_size(c));
	ck_assert_uint_eq(s.virtual_size, st_len);
	ck_assert_uint_eq(s.file_size, wc_container_file_size(c));
	ck_assert_uint_eq(s.tile_size, wc_container_tile_size(c));
	ck_assert_uint_eq(s.ntensors, wc_container_ntensors(c));
	ck_assert_uint_eq(s.ntiles, wc_container_ntiles(c));
	close(fd);
	wc_container_release(c);

	size_t len;
	uint8_t *b = read_file(wc_path, &len);
	char p[320];
	snprintf(p, sizeof p, "%s/peek.wcodec", dir);
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
	fd = open(dir, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(wc_container_peek(fd, dir, &s), WC_E_FORMAT);
	close(fd);
}
END_TEST

/* Every cut point: open fails with WC_E_FORMAT and never crashes. */
START_TEST(truncated_files_rejected)
{
	size_t len;
	uint8_t *b = read_file(wc_path, &len);
	char cut_path[320];
	snprintf(cut_path, sizeof cut_path, "%s/cut.wcodec", dir);
	for (size_t cut = 0; cut < len; cut += (cut < 400 ? 1 : (cut < len - 400 ? 97 : 1))) {
		ck_assert_int_eq(st_write_bytes(cut_path, b, cut), 0);
		wc_container *c = NULL;
		wc_err e = wc_container_open(cut_path, &c);
		ck_assert_msg(e == WC_E_FORMAT, "cut at %zu: %s (%s)", cut, wc_strerror(e), wc_last_detail());
		ck_assert_ptr_null(c);
	}
	free(b);
}
END_TEST

/* Rewrite the header's XXH3 check (of the unmodified file's section
 * offsets h) so structural validation is what must catch a modified field. */
static void fix_check(uint8_t *b, const wc_file_header *h)
{
	tu_wcodec_fix_check(b, h);
}

static wc_err open_bytes(const uint8_t *b, size_t len)
{
	char p[320];
	snprintf(p, sizeof p, "%s/mod.wcodec", dir);
	ck_assert_int_eq(st_write_bytes(p, b, len), 0);
	wc_container *c = NULL;
	wc_clear_detail();
	wc_err e = wc_container_open(p, &c);
	if (e == WC_OK)
		wc_container_release(c);
	else
		ck_assert_str_ne(wc_last_detail(), "");
	return e;
}

START_TEST(corrupted_header_fields_rejected)
{
	size_t len;
	uint8_t *b = read_file(wc_path, &len);
	wc_file_header h;
	ck_assert_int_eq(wc_header_decode(b, len, &h), WC_OK);
	/* Any flipped byte of the header: rejected, with the right kind of code. */
	for (unsigned i = 0; i < WC_HEADER_BYTES; i++) {
		b[i] ^= 0x41;
		wc_err e = open_bytes(b, len);
		b[i] ^= 0x41;
		ck_assert_msg(e != WC_OK, "flipped header byte %u accepted", i);
		if (i < 8)
			ck_assert_int_eq(e, WC_E_FORMAT); /* magic */
		else if (i == 8)
			ck_assert_int_eq(e, WC_E_UNSUPPORTED); /* newer version */
		else if (i >= WC_HEADER_HASH_OFF)
			ck_assert_int_eq(e, WC_E_CORRUPT); /* the check itself */
		else
			ck_assert_msg(e == WC_E_FORMAT || e == WC_E_RANGE || e == WC_E_UNSUPPORTED ||
					      e == WC_E_CORRUPT,
				      "byte %u: %s", i, wc_strerror(e));
	}
	/* Flipped bytes in the prefix, tables, index and metadata: the check catches them. */
	size_t spots[] = {h.prefix_off + 20, h.tables_off + 3, h.index_off + 5, h.index_off + h.index_len - 1,
			  h.meta_off + 10, h.meta_off + h.meta_len - 1};
	for (size_t k = 0; k < sizeof spots / sizeof spots[0]; k++) {
		b[spots[k]] ^= 0x10;
		ck_assert_int_eq(open_bytes(b, len), WC_E_CORRUPT);
		b[spots[k]] ^= 0x10;
	}
	ck_assert_int_eq(open_bytes(b, len), WC_OK);
	free(b);
}
END_TEST

/* With the check recomputed, each field's own validation rejects it. */
START_TEST(inconsistent_fields_rejected)
{
	size_t len;
	uint8_t *b = read_file(wc_path, &len);
	wc_file_header h;
	ck_assert_int_eq(wc_header_decode(b, len, &h), WC_OK);
	uint8_t *m = malloc(len);
	struct {
		size_t off;
		int delta;
		wc_err want;
		const char *needle;
	} cases[] = {
		{20, 8, WC_E_FORMAT, "tile"},                /* tile size: tiles now too small for it */
		{24, 1, WC_E_RANGE, "chunk"},                /* chunk not a multiple of 32 */
		{28, 1, WC_E_FORMAT, "tensors"},             /* tensor count */
		{h.index_off + 0, 1, WC_E_FORMAT, "virtual offset"},
		{h.index_off + 48 + 8, 1, WC_E_FORMAT, "payload offset"},
		{h.index_off + 16, 1, WC_E_FORMAT, "payload offset"}, /* csize: the next tile no longer follows */
		{h.index_off + 20, 1, WC_E_FORMAT, "tile 0"},   /* dsize */
		{h.index_off + 24, 1, WC_E_FORMAT, "tile 0"},   /* tensor */
		{h.index_off + 28, 1, WC_E_FORMAT, "flags"},
		{h.tables_off + 40, 1, WC_E_FORMAT, "frequency table"},
		{h.prefix_off + 8 + 3, 1, WC_E_FORMAT, "prefix"},
	};
	for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
		memcpy(m, b, len);
		m[cases[k].off] = (uint8_t)(m[cases[k].off] + cases[k].delta);
		fix_check(m, &h);
		wc_err e = open_bytes(m, len);
		ck_assert_msg(e == cases[k].want && strstr(wc_last_detail(), cases[k].needle),
			      "case %zu (offset %zu): %s: %s", k, cases[k].off, wc_strerror(e), wc_last_detail());
	}
	free(m);
	free(b);
}
END_TEST

/* The file b (header h) with its metadata replaced by the JSON `json`
 * (zstd-compressed as the format stores it) and the check recomputed. */
static uint8_t *with_metadata(const uint8_t *b, const wc_file_header *h, const char *json, size_t *out_len)
{
	size_t n = strlen(json), cap = ZSTD_compressBound(n);
	uint8_t *z = malloc(cap);
	size_t zl = ZSTD_compress(z, cap, json, n, 3);
	ck_assert(!ZSTD_isError(zl));
	*out_len = h->meta_off + zl;
	uint8_t *m = malloc(*out_len);
	memcpy(m, b, h->meta_off);
	memcpy(m + h->meta_off, z, zl);
	wc_put_u64(m + 120, zl);          /* meta_len */
	wc_put_u64(m + 128, *out_len);    /* file_size */
	wc_file_header h2 = *h;
	h2.meta_len = zl;
	fix_check(m, &h2);
	free(z);
	return m;
}

static char *metadata_of(const uint8_t *b, const wc_file_header *h)
{
	unsigned long long n = ZSTD_getFrameContentSize(b + h->meta_off, h->meta_len);
	char *js = malloc(n + 1);
	ck_assert_uint_eq(ZSTD_decompress(js, n, b + h->meta_off, h->meta_len), n);
	js[n] = 0;
	return js;
}

/* Replace the first occurrence of `from` in js by `to`; NULL if absent. */
static char *edit(const char *js, const char *from, const char *to)
{
	const char *p = strstr(js, from);
	ck_assert_msg(p != NULL, "metadata has no \"%s\"", from);
	size_t a = (size_t)(p - js), n = strlen(js) - strlen(from) + strlen(to);
	char *r = malloc(n + 1);
	memcpy(r, js, a);
	strcpy(r + a, to);
	strcat(r, p + strlen(from));
	return r;
}

START_TEST(inconsistent_metadata_rejected)
{
	size_t len;
	uint8_t *b = read_file(wc_path, &len);
	wc_file_header h;
	ck_assert_int_eq(wc_header_decode(b, len, &h), WC_OK);
	char *js = metadata_of(b, &h);
	/* The unmodified JSON, recompressed, still opens. */
	size_t ml;
	uint8_t *m = with_metadata(b, &h, js, &ml);
	ck_assert_int_eq(open_bytes(m, ml), WC_OK);
	free(m);
	struct {
		const char *from, *to, *needle;
	} cases[] = {
		{"{\"format\"", "[{\"format\"", "metadata"},               /* not an object */
		{"\"layout\":\"bf16\"", "\"layout\":\"bf17\"", "layout"},
		{"\"layout\":\"bf16\"", "\"layout\":\"bytes\"", "planes"}, /* plane count no longer matches */
		{"\"tiles\":1,", "\"tiles\":2,", "tiles"},
		{"\"first_tile\":0", "\"first_tile\":1", "tiles"},
		{"\"table\":0,", "\"table\":99999,", "table"},
		{"\"entropy\":", "\"entropy\":9,\"x\":", "entropy"},
		{"\"name\":\"BF16.one\"", "\"name\":\"BF16.two\"", "prefix"},
		{"\"name\":\"BF16.one\"", "\"name\":\"BF16.scalar\"", "twice"},
		{"\"dtype\":\"BF16\"", "\"dtype\":\"F16\"", "prefix"},
		{"\"shape\":[37,129]", "\"shape\":[129,37]", "prefix"},
		{"\"shape\":[37,129]", "\"shape\":[37,-129]", "shape"},
		{"\"begin\":", "\"begin\":1,\"x\":", "byte range"},
	};
	for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
		char *e2 = edit(js, cases[k].from, cases[k].to);
		m = with_metadata(b, &h, e2, &ml);
		wc_err e = open_bytes(m, ml);
		ck_assert_msg(e == WC_E_FORMAT && strstr(wc_last_detail(), cases[k].needle),
			      "metadata case %zu (%s): %s: %s", k, cases[k].to, wc_strerror(e), wc_last_detail());
		free(m);
		free(e2);
	}
	/* Shared tiles (docs/FORMAT.md 1.6): the fixture's 4 KiB tiles are shared
	 * by its tensors under 32 bytes of one dtype. */
	ck_assert_msg(strstr(js, "\"shared\":true") != NULL, "the fixture has no shared tile");
	struct {
		const char *from, *to, *needle;
	} shared_cases[] = {
		{"\"shared\":true", "\"shared\":1", "boolean"},
		{"\"shared\":true", "\"shared\":false", "tiles"},   /* then it needs tiles of its own */
	};
	for (size_t k = 0; k < sizeof shared_cases / sizeof shared_cases[0]; k++) {
		char *e2 = edit(js, shared_cases[k].from, shared_cases[k].to);
		m = with_metadata(b, &h, e2, &ml);
		wc_err e = open_bytes(m, ml);
		ck_assert_msg(e == WC_E_FORMAT && strstr(wc_last_detail(), shared_cases[k].needle),
			      "shared case %zu (%s): %s: %s", k, shared_cases[k].to, wc_strerror(e), wc_last_detail());
		free(m);
		free(e2);
	}
	/* a version-1 header cannot have shared tiles */
	ck_assert_uint_eq(h.version, 2);
	m = with_metadata(b, &h, js, &ml);
	wc_put_u32(m + 8, 1);
	wc_file_header h1;
	ck_assert_int_eq(wc_header_decode(m, ml, &h1), WC_OK);
	fix_check(m, &h1);
	ck_assert_int_eq(open_bytes(m, ml), WC_E_FORMAT);
	ck_assert_msg(strstr(wc_last_detail(), "shared") != NULL, "%s", wc_last_detail());
	free(m);
	/* Metadata that is not a zstd frame. */
	memcpy(b + h.meta_off, "{}", 2);
	fix_check(b, &h);
	ck_assert_int_eq(open_bytes(b, len), WC_E_FORMAT);
	ck_assert_ptr_nonnull(strstr(wc_last_detail(), "zstd"));
	free(js);
	free(b);
}
END_TEST


/* Random bytes anywhere before the payloads: never a crash, never accepted
 * unless the byte did not change. */
START_TEST(random_damage_never_crashes)
{
	size_t len;
	uint8_t *b = read_file(wc_path, &len);
	uint64_t rng = 99;
	for (int i = 0; i < 300; i++) {
		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		size_t pos = (size_t)((rng >> 17) % len);
		uint8_t old = b[pos], nv = (uint8_t)(rng >> 5);
		if (nv == old)
			continue;
		b[pos] = nv;
		wc_err e = open_bytes(b, len);
		b[pos] = old;
		wc_file_header h;
		wc_header_decode(b, len, &h);
		int in_payload = pos >= h.payload_off && pos < h.payload_off + h.payload_len;
		if (!in_payload)
			ck_assert_msg(e != WC_OK, "damage at %zu accepted", pos);
	}
	free(b);
}
END_TEST

/* Damage behind a recomputed check (as a malicious writer could make): the
 * structural validation must hold. Open fails, or every read either
 * succeeds or reports an error; nothing crashes or reads out of bounds. */
START_TEST(forged_damage_never_crashes)
{
	size_t len;
	uint8_t *b = read_file(wc_path, &len);
	wc_file_header h;
	ck_assert_int_eq(wc_header_decode(b, len, &h), WC_OK);
	uint8_t *m = malloc(len), *buf = malloc(len);
	uint64_t rng = 4242;
	int opened = 0;
	for (int i = 0; i < 400; i++) {
		memcpy(m, b, len);
		for (int k = 0; k < 1 + i % 3; k++) {
			rng = rng * 6364136223846793005ull + 1442695040888963407ull;
			/* In the index, tables or prefix (the metadata is compressed). */
			size_t span = h.index_len + h.tables_len + h.prefix_len, at = (size_t)((rng >> 17) % span);
			size_t pos = at < h.index_len ? h.index_off + at
				     : at < h.index_len + h.tables_len ? h.tables_off + (at - h.index_len)
				     : h.prefix_off + (at - h.index_len - h.tables_len);
			m[pos] ^= (uint8_t)(1u << ((rng >> 7) % 8));
		}
		fix_check(m, &h);
		char p[320];
		snprintf(p, sizeof p, "%s/forged.wcodec", dir);
		ck_assert_int_eq(st_write_bytes(p, m, len), 0);
		wc_container *c;
		if (wc_container_open(p, &c) != WC_OK)
			continue;
		opened++;
		uint64_t vs = wc_container_virtual_size(c);
		wc_err e = wc_container_pread(c, buf, vs < len ? vs : len, 0);
		ck_assert(e == WC_OK || e == WC_E_CORRUPT);
		wc_container_release(c);
	}
	ck_assert_int_lt(opened, 400); /* most forgeries are caught at open */
	free(buf);
	free(m);
	free(b);
}
END_TEST

START_TEST(damaged_payload_is_corrupt)
{
	size_t len;
	uint8_t *b = read_file(wc_path, &len);
	wc_file_header h;
	ck_assert_int_eq(wc_header_decode(b, len, &h), WC_OK);
	wc_container *c;
	ck_assert_int_eq(wc_container_open(wc_path, &c), WC_OK);
	const wc_tile_info *x = wc_container_tile(c, 3);
	size_t pos = x->coff + x->csize / 2;
	b[pos] ^= 0x04;
	wc_container_release(c);
	char p[320];
	snprintf(p, sizeof p, "%s/dmg.wcodec", dir);
	ck_assert_int_eq(st_write_bytes(p, b, len), 0);
	ck_assert_int_eq(wc_container_open(p, &c), WC_OK); /* payloads are checked on read */
	x = wc_container_tile(c, 3);
	uint8_t *payload = malloc(x->csize), *out = malloc(x->dsize);
	ck_assert_int_eq(wc_container_read_payload(c, 3, payload), WC_E_CORRUPT);
	ck_assert_ptr_nonnull(strstr(wc_last_detail(), "tile 3"));
	/* Decoding the damaged bytes anyway: corrupt stream or dhash mismatch, never OK. */
	ck_assert_int_eq(wc_container_decode_tile(c, 3, payload, out), WC_E_CORRUPT);
	uint8_t *buf = malloc(x->dsize);
	ck_assert_int_eq(wc_container_pread(c, buf, x->dsize, x->voff), WC_E_CORRUPT);
	/* Other tiles still read fine. */
	const wc_tile_info *y = wc_container_tile(c, 4);
	uint8_t *buf2 = malloc(y->dsize);
	ck_assert_int_eq(wc_container_pread(c, buf2, y->dsize, y->voff), WC_OK);
	ck_assert_int_eq(memcmp(buf2, st_bytes + y->voff, y->dsize), 0);
	free(buf2);
	free(buf);
	free(payload);
	free(out);
	wc_container_release(c);
	free(b);
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
	snprintf(in, sizeof in, "%s/bad.safetensors", dir);
	snprintf(out, sizeof out, "%s/bad.wcodec", dir);
	ck_assert_int_eq(st_write_bytes(in, b, len), 0);
	int before = dir_entries();
	wc_pack_opts o = {.verify = 1};
	ck_assert_int_eq(wc_pack_safetensors(in, out, &o, NULL), WC_E_FORMAT);
	ck_assert_ptr_nonnull(strstr(wc_last_detail(), "overlap"));
	ck_assert_int_eq(dir_entries(), before);
	ck_assert_int_ne(access(out, F_OK), 0);
	/* Bad options are rejected before anything is written. */
	o.tile_size = 1000;
	ck_assert_int_eq(wc_pack_safetensors(st_path, out, &o, NULL), WC_E_INVAL);
	o.tile_size = 0;
	o.chunk_symbols = 33;
	ck_assert_int_eq(wc_pack_safetensors(st_path, out, &o, NULL), WC_E_INVAL);
	ck_assert_int_eq(dir_entries(), before);
	/* A missing input. */
	o.chunk_symbols = 0;
	snprintf(in, sizeof in, "%s/missing.safetensors", dir);
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
	snprintf(in, sizeof in, "%s/empty.safetensors", dir);
	snprintf(out, sizeof out, "%s/empty.wcodec", dir);
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

/* ---- dictionary tensors (docs/FORMAT.md 2.1) ------------------------------ */

/* A tensor of n elements of w bytes drawn from k distinct values (the
 * quantized models of TF.js: few values stored as wide floats). */
static void add_quantized(st_file *f, const char *name, const char *dtype, unsigned w, uint64_t n, uint32_t k,
			  uint64_t *rng)
{
	st_tensor *t = &f->t[f->n++];
	snprintf(t->name, sizeof t->name, "%s", name);
	t->dtype = dtype;
	t->ndim = 1;
	t->shape[0] = n;
	t->nbytes = n * w;
	t->data = malloc(t->nbytes);
	for (uint64_t i = 0; i < n; i++) {
		*rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
		uint64_t r = i < k ? i : (*rng >> 33) % k;
		if (i >= k && (*rng >> 20 & 3)) /* skewed: low levels 3/4 of the time */
			r %= (k + 7) / 8;
		uint64_t v = 0x3f000000u + r * 2654435761u; /* distinct for distinct r (odd multiplier) */
		if (w == 2)
			v = 0x3c00 + r * 40503u;
		for (unsigned b = 0; b < w; b++)
			t->data[i * w + b] = (uint8_t)(v >> (8 * b));
	}
}

static char dwc_path[320];

/* Pack the dictionary test file: which tensors must become "dict" and with
 * how many entries (0: must keep its byte planes). */
static const struct {
	const char *name, *dtype;
	unsigned w;
	uint64_t n;
	uint32_t k, want;
} qt[] = {
	{"f32.q256", "F32", 4, 20000, 256, 256},     /* u8-quantized F32: 1 index plane */
	{"f32.q1", "F32", 4, 30000, 1, 1},           /* constant over 30 tiles: one CONST plane per tile */
	{"bf16.q2", "BF16", 2, 9000, 2, 2},
	{"f16.q300", "F16", 2, 20000, 300, 300},     /* 2 index planes */
	{"f64.q257", "F64", 8, 6000, 257, 257},
	{"i32.q65536", "I32", 4, 300000, 65536, 65536},
	{"i32.q65537", "I32", 4, 300000, 65537, 0}, /* too many: byte planes */
	{"f32.q200", "F32", 4, 150, 200, 0},         /* 150 elements: a dictionary does not pay */
};

static void pack_dict_file(void)
{
	st_file f = {0};
	uint64_t rng = 77;
	for (size_t i = 0; i < sizeof qt / sizeof qt[0]; i++)
		add_quantized(&f, qt[i].name, qt[i].dtype, qt[i].w, qt[i].n, qt[i].k, &rng);
	size_t len;
	uint8_t *b = st_serialize(&f, &len);
	st_free(&f);
	char in[320];
	snprintf(in, sizeof in, "%s/q.safetensors", dir);
	snprintf(dwc_path, sizeof dwc_path, "%s/q.wcodec", dir);
	ck_assert_int_eq(st_write_bytes(in, b, len), 0);
	free(b);
	wc_pack_opts o = {.tile_size = 4096, .chunk_symbols = 1024, .threads = 2, .verify = 1};
	wc_pack_stats s;
	wc_err e = wc_pack_safetensors(in, dwc_path, &o, &s);
	ck_assert_msg(e == WC_OK, "pack: %s", wc_last_detail());
	ck_assert_uint_eq(s.dict_tensors, 6);
	ck_assert_uint_eq(s.dict_bytes, 256 * 4 + 4 + 2 * 2 + 300 * 2 + 257 * 8 + 65536 * 4);
	ck_assert(s.entropy_bound_bytes < s.plain_entropy_bound_bytes);
	ck_assert(s.coded_data_bytes + s.dict_bytes < 1.02 * s.entropy_bound_bytes + 8192);
}

START_TEST(dict_tensors_round_trip)
{
	pack_dict_file();
	size_t len;
	uint8_t *b = read_file(dwc_path, &len), *in;
	size_t in_len;
	char inp[320];
	snprintf(inp, sizeof inp, "%s/q.safetensors", dir);
	in = read_file(inp, &in_len);
	wc_file_header h;
	ck_assert_int_eq(wc_header_decode(b, len, &h), WC_OK);
	ck_assert_uint_eq(h.flags, 1); /* WC_FLAG_DICTS: refused by readers without dictionaries */
	ck_assert_uint_eq(h.dicts_off, h.tables_off + h.tables_len);
	wc_container *c;
	ck_assert_int_eq(wc_container_open(dwc_path, &c), WC_OK);
	for (size_t i = 0; i < sizeof qt / sizeof qt[0]; i++) {
		uint32_t idx;
		ck_assert_int_eq(wc_container_find_tensor(c, qt[i].name, &idx), WC_OK);
		const wc_tensor_info *t = wc_container_tensor(c, idx);
		ck_assert_msg(t->dict_entries == qt[i].want, "%s: %u entries", qt[i].name, t->dict_entries);
		ck_assert_str_eq(wc_layout_name(t->layout), qt[i].want ? "dict" : wc_layout_name(t->plain_layout));
		ck_assert_uint_eq(t->plain_layout.elem_size, qt[i].w);
		if (qt[i].want) {
			ck_assert_uint_eq(t->layout.nplanes, qt[i].want <= 256 ? 1 : 2);
			ck_assert_ptr_nonnull(t->dict);
			ck_assert(wc_dict_sorted(t->dict, t->dict_entries, qt[i].w));
			double pe = 0;
			for (unsigned p = 0; p < t->plain_layout.nplanes; p++)
				pe += t->plain_entropy[p];
			ck_assert_msg(pe > 0 || qt[i].k == 1, "%s: no byte-plane entropy recorded", qt[i].name);
		} else {
			ck_assert_ptr_null(t->dict);
		}
	}
	uint8_t *all = malloc(in_len);
	ck_assert_int_eq(wc_container_pread(c, all, in_len, 0), WC_OK);
	ck_assert_int_eq(memcmp(all, in, in_len), 0);
	/* The tile source hands the dictionary to backends; the CPU reference decodes it. */
	wc_tile_source *src = wc_container_source(c);
	for (uint32_t i = 0; i < wc_container_ntiles(c); i += 7) {
		const wc_tile_info *x = wc_container_tile(c, i);
		uint8_t *payload = malloc(x->csize), *out = malloc(x->dsize);
		ck_assert_int_eq(src->ops->read_payload(src, i, payload), WC_OK);
		wc_tile_job job;
		memset(&job, 0, sizeof job);
		src->ops->describe_job(src, i, &job);
		job.payload = payload;
		job.payload_size = x->csize;
		job.out = out;
		job.out_size = x->dsize;
		ck_assert_int_eq(wc_decode_job_cpu(&job), WC_OK);
		ck_assert_int_eq(memcmp(out, in + x->voff, x->dsize), 0);
		free(payload);
		free(out);
	}
	wc_container_release(c);
	free(all);
	free(in);
	free(b);
}
END_TEST

START_TEST(damaged_dictionaries_rejected)
{
	pack_dict_file();
	size_t len;
	uint8_t *b = read_file(dwc_path, &len);
	wc_file_header h;
	ck_assert_int_eq(wc_header_decode(b, len, &h), WC_OK);
	uint8_t *m = malloc(len);
	/* A flipped dictionary byte: the header check catches it. */
	memcpy(m, b, len);
	m[h.dicts_off + 5] ^= 0x20;
	ck_assert_int_eq(open_bytes(m, len), WC_E_CORRUPT);
	/* With the check recomputed: entries out of order are a format error. */
	memcpy(m, b, len);
	uint8_t tmp[4];
	memcpy(tmp, m + h.dicts_off, 4); /* f32.q256 is the first dictionary: swap entries 0 and 1 */
	memcpy(m + h.dicts_off, m + h.dicts_off + 4, 4);
	memcpy(m + h.dicts_off + 4, tmp, 4);
	fix_check(m, &h);
	ck_assert_int_eq(open_bytes(m, len), WC_E_FORMAT);
	ck_assert_ptr_nonnull(strstr(wc_last_detail(), "ascending"));
	/* A duplicate entry too. */
	memcpy(m, b, len);
	memcpy(m + h.dicts_off + 4, m + h.dicts_off, 4);
	fix_check(m, &h);
	ck_assert_int_eq(open_bytes(m, len), WC_E_FORMAT);
	/* Header: an unknown flag is a newer format; no flag with a dictionary
	 * section is a broken one; a wrong section length breaks the layout. */
	memcpy(m, b, len);
	m[12] = 3;
	fix_check(m, &h);
	ck_assert_int_eq(open_bytes(m, len), WC_E_UNSUPPORTED);
	ck_assert_ptr_nonnull(strstr(wc_last_detail(), "flags"));
	m[12] = 0;
	fix_check(m, &h);
	ck_assert_int_eq(open_bytes(m, len), WC_E_FORMAT);
	memcpy(m, b, len);
	wc_put_u64(m + 144, h.dicts_len - 4);
	fix_check(m, &h);
	ck_assert_int_eq(open_bytes(m, len), WC_E_FORMAT);
	free(m);

	/* Metadata that does not match the dictionary section. */
	char *js = metadata_of(b, &h);
	struct {
		const char *from, *to, *needle;
	} cases[] = {
		{"\"entries\":256", "\"entries\":65537", "entries"},
		{"\"entries\":256", "\"entries\":0", "entries"},
		{"\"entries\":256", "\"entries\":255", "dictionar"}, /* the next one no longer follows */
		{"\"offset\":0", "\"offset\":4", "dictionary"},
		{"\"layout\":\"dict\"", "\"layout\":\"f32\"", "planes"},
		{"\"dict\":{", "\"notdict\":{", "dict"},
		{"\"plain_entropy\":[", "\"plain_entropy\":[9,", "plain_entropy"},
	};
	for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
		char *e2 = edit(js, cases[k].from, cases[k].to);
		size_t ml;
		m = with_metadata(b, &h, e2, &ml);
		wc_err e = open_bytes(m, ml);
		ck_assert_msg(e == WC_E_FORMAT && strstr(wc_last_detail(), cases[k].needle),
			      "dict metadata case %zu (%s): %s: %s", k, cases[k].to, wc_strerror(e), wc_last_detail());
		free(m);
		free(e2);
	}
	free(js);
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
	snprintf(in, sizeof in, "%s/w.safetensors", dir);
	snprintf(out, sizeof out, "%s/w.wcodec", dir);
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
	tcase_add_unchecked_fixture(tc, setup, teardown); /* one pack for all tests; they never modify it */
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, round_trip_every_dtype);
	tcase_add_test(tc, tile_source_describes_jobs);
	tcase_add_test(tc, ids_are_unique);
	tcase_add_test(tc, memory_of_an_open_container);
	tcase_add_test(tc, peek_reads_the_header_alone);
	tcase_add_test(tc, truncated_files_rejected);
	tcase_add_test(tc, corrupted_header_fields_rejected);
	tcase_add_test(tc, inconsistent_fields_rejected);
	tcase_add_test(tc, inconsistent_metadata_rejected);
	tcase_add_test(tc, random_damage_never_crashes);
	tcase_add_test(tc, forged_damage_never_crashes);
	tcase_add_test(tc, damaged_payload_is_corrupt);
	tcase_add_test(tc, malformed_input_leaves_nothing);
	tcase_add_test(tc, empty_file_round_trips);
	tcase_add_test(tc, weights_compress_near_entropy);
	tcase_add_test(tc, dict_tensors_round_trip);
	tcase_add_test(tc, damaged_dictionaries_rejected);
	suite_add_tcase(s, tc);
	return check_run(s);
}
