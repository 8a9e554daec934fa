/* test_qvq.c - .qvq archives: names, encoder round trip (decode equals the
 * encoder's reconstruction bit-exactly), determinism, the shown files,
 * and rejection of malformed archives and escaping names. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "check_run.h"
#include "images/image_io.h"
#include "qvq/kmeans.h"
#include "qvq/qvq.h"
#include "qvq/qvq_files.h"
#include "qvq/qvq_format.h"
#include "qvq/qvq_gather.h"
#include "qvq/qvq_names.h"
#include "qvq/qvq_pack.h"
#include "qvq/qvq_parallel.h"
#include "qvq/qvq_writer.h"

static char tmpdir[] = "/tmp/test_qvq.XXXXXX";

static uint64_t rng_state = 42;
static uint32_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return (uint32_t)((z ^ (z >> 31)) >> 32);
}

/* A smooth image with noise, as a PPM file under tmpdir/rel. */
static void make_image(const char *rel, uint32_t w, uint32_t h, uint32_t seed)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s", tmpdir, rel);
	for (char *p = path + strlen(tmpdir) + 1; (p = strchr(p, '/')); p++) {
		*p = 0;
		mkdir(path, 0777);
		*p = '/';
	}
	wc_image im = {w, h, malloc((size_t)w * h * 3)};
	for (uint32_t y = 0; y < h; y++)
		for (uint32_t x = 0; x < w; x++) {
			uint8_t *p = im.rgb + ((size_t)y * w + x) * 3;
			p[0] = (uint8_t)(x * 255 / w + rnd() % 9);
			p[1] = (uint8_t)(y * 255 / h + rnd() % 9);
			p[2] = (uint8_t)((x + y) * seed + rnd() % 5);
		}
	ck_assert_int_eq(wc_image_write_ppm(path, &im), WC_OK);
	wc_image_free(&im);
}

static char *tpath(const char *rel)
{
	static char buf[4][512];
	static int k;
	k = (k + 1) % 4;
	snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, rel);
	return buf[k];
}

static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	ck_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	*len = (size_t)ftell(f);
	rewind(f);
	uint8_t *b = malloc(*len + 1);
	ck_assert_uint_eq(fread(b, 1, *len, f), *len);
	fclose(f);
	return b;
}

static void spit(const char *path, const uint8_t *b, size_t len)
{
	FILE *f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(b, 1, len, f), len);
	fclose(f);
}

/* Recompute every section hash and the header hash after a test edited
 * the bytes (offsets from docs/FORMAT.md 6.1). */
static size_t rehash_len;
static void hash_at(uint8_t *b, unsigned field, uint64_t off, uint64_t len)
{
	if (off <= rehash_len && len <= rehash_len - off)
		wc_put_u64(b + field, XXH3_64bits(b + off, len));
}

static void rehash(uint8_t *b)
{
	struct { unsigned off, len_field, len_bytes, hash; } s[] = {
		{48, 56, 4, 104}, {96, 60, 4, 144},
	};
	for (size_t i = 0; i < 2; i++) {
		uint64_t off = wc_get_u64(b + s[i].off);
		uint32_t len = wc_get_u32(b + s[i].len_field);
		hash_at(b, s[i].hash, off, len);
	}
	uint32_t K = wc_get_u32(b + 20), n = wc_get_u32(b + 24), nt = wc_get_u32(b + 28);
	uint32_t ntab = wc_get_u32(b + 36);
	uint64_t cb = (uint64_t)K * b[16] * b[17] * b[18];
	hash_at(b, 112, wc_get_u64(b + 64), cb);
	hash_at(b, 120, wc_get_u64(b + 72), (uint64_t)ntab * 512);
	hash_at(b, 128, wc_get_u64(b + 80), (uint64_t)n * 24);
	hash_at(b, 136, wc_get_u64(b + 88), (uint64_t)nt * 48);
	wc_put_u64(b + 184, XXH3_64bits(b, 184));
}

static void setup(void)
{
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
	char cmd[600];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
	strcpy(tmpdir, "/tmp/test_qvq.XXXXXX");
}

START_TEST(names_rules)
{
	const char *ok[] = {"a.png", "dir/b.jpg", "x/y/z", ".hidden", "a..b", "labels.txt.png",
			    "img/images.npy"};
	const char *bad[] = {"", "/etc/passwd", "../x", "a/../../x", "a/..", "a//b", "a/",
			     "./a", "a/./b", "images.npy/x", "labels.txt/y", "a\nb", ".."};
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
		ck_assert_msg(wc_qvq_name_check(ok[i], strlen(ok[i])) == WC_OK, "%s", ok[i]);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		ck_assert_msg(wc_qvq_name_check(bad[i], strlen(bad[i])) == WC_E_FORMAT, "%s", bad[i]);
	/* Components of at most 255 bytes (NAME_MAX), the last one as shown. */
	char longname[600];
	memset(longname, 'n', 300);
	strcpy(longname + 300, "/x.png");
	ck_assert_int_eq(wc_qvq_name_check(longname, strlen(longname)), WC_E_FORMAT);
	ck_assert_ptr_nonnull(strstr(wc_last_detail(), "300 bytes"));
	memset(longname, 'n', 255);
	strcpy(longname + 255, "/x.png"); /* 255 bytes: fine */
	ck_assert_int_eq(wc_qvq_name_check(longname, strlen(longname)), WC_OK);
	memset(longname, 'n', 252);
	longname[252] = 0; /* 252 + ".ppm" shown: 256 bytes */
	ck_assert_int_eq(wc_qvq_name_check(longname, strlen(longname)), WC_E_FORMAT);
	ck_assert_ptr_nonnull(strstr(wc_last_detail(), "shown with .ppm"));
	memcpy(longname + 247, ".jpeg", 6); /* 247 + ".ppm": 251 bytes */
	ck_assert_int_eq(wc_qvq_name_check(longname, strlen(longname)), WC_OK);
	char *p = wc_qvq_ppm_name("a/b.c/d.png");
	ck_assert_str_eq(p, "a/b.c/d.ppm");
	free(p);
	p = wc_qvq_ppm_name("a.d/.hidden");
	ck_assert_str_eq(p, "a.d/.hidden.ppm");
	free(p);
	p = wc_qvq_ppm_name("noext");
	ck_assert_str_eq(p, "noext.ppm");
	free(p);
	const char *dup[] = {"a.ppm", "b.ppm", "a.ppm"};
	ck_assert_int_eq(wc_qvq_names_unique(dup, 3), WC_E_FORMAT);
	const char *dirclash[] = {"a.ppm", "a.ppm-x.ppm", "a.ppm/b.ppm"};
	ck_assert_int_eq(wc_qvq_names_unique(dirclash, 3), WC_E_FORMAT);
	const char *fine[] = {"a.ppm", "a/b.ppm", "a/c/d.ppm"};
	ck_assert_int_eq(wc_qvq_names_unique(fine, 3), WC_OK);
}
END_TEST

/* Pack tmpdir/in with K entries; check that every decoded image equals the
 * encoder's reconstruction, through tiles and through the shown files. */
static void round_trip(uint32_t K, uint32_t tile_bytes, uint32_t w, uint32_t h)
{
	wc_qvq_pack_opts o = {.entries = K, .seed = 7, .threads = 2, .tile_bytes = tile_bytes,
			      .width = w, .height = h, .keep_recon = 1};
	wc_qvq_pack_stats st;
	wc_err e = wc_qvq_pack_dir(tpath("in"), tpath("a.qvq"), &o, &st);
	ck_assert_msg(e == WC_OK, "pack: %s", wc_last_detail());
	ck_assert_uint_eq(st.nimages, 5);
	ck_assert(st.psnr_db > 20);
	wc_qvq *q;
	e = wc_qvq_open(tpath("a.qvq"), &q);
	ck_assert_msg(e == WC_OK, "open: %s", wc_last_detail());
	ck_assert_uint_le(st.entries, K);
	ck_assert_uint_eq(wc_qvq_header_of(q)->entries, st.entries);
	ck_assert_uint_eq(wc_qvq_header_of(q)->index_bytes, st.entries <= 256 ? 1 : 2);
	if (K > 256 && !w)
		ck_assert_uint_gt(st.entries, 256); /* exercises 2-byte indices */
	ck_assert_uint_eq(wc_qvq_nimages(q), 5);
	/* Tiles: decode each and compare its images. */
	for (uint32_t t = 0; t < wc_qvq_ntiles(q); t++) {
		const wc_qvq_tile *tl = wc_qvq_tile_at(q, t);
		uint8_t *buf = malloc(tl->dsize);
		ck_assert_int_eq(wc_qvq_decode_tile(q, t, buf), WC_OK);
		for (uint32_t i = tl->first_image; i < tl->first_image + tl->nimages; i++) {
			const wc_qvq_image *im = wc_qvq_image_at(q, i);
			ck_assert_str_eq(im->name, st.names[i]);
			ck_assert_uint_eq(im->width, st.dims[2 * i]);
			ck_assert_uint_eq(im->height, st.dims[2 * i + 1]);
			ck_assert_msg(memcmp(buf + im->tile_off, st.recon[i],
					     (size_t)im->width * im->height * 3) == 0,
				      "image %u differs from the encoder's reconstruction", i);
		}
		free(buf);
	}
	/* Shown files: PPM header + pixels, read in odd-sized pieces. */
	wc_qvq_memo memo;
	wc_qvq_tile_getter g;
	wc_qvq_memo_init(&memo, q, &g);
	for (uint32_t i = 0; i < 5; i++) {
		const wc_qvq_image *im = wc_qvq_image_at(q, i);
		uint64_t size = wc_qvq_file_size(q, i);
		char hdr[64];
		int hl = snprintf(hdr, sizeof hdr, "P6\n%u %u\n255\n", im->width, im->height);
		ck_assert_uint_eq(size, (uint64_t)hl + (uint64_t)im->width * im->height * 3);
		uint8_t *buf = malloc(size + 10);
		for (uint64_t off = 0; off < size;) {
			size_t got;
			ck_assert_int_eq(wc_qvq_file_read(q, i, buf + off, 77, off, &g, &got), WC_OK);
			ck_assert_uint_gt(got, 0);
			off += got;
		}
		size_t got;
		ck_assert_int_eq(wc_qvq_file_read(q, i, buf, 10, size, &g, &got), WC_OK);
		ck_assert_uint_eq(got, 0);
		ck_assert_int_eq(memcmp(buf, hdr, (size_t)hl), 0);
		ck_assert_int_eq(memcmp(buf + hl, st.recon[i], size - (size_t)hl), 0);
		free(buf);
	}
	uint32_t nf = wc_qvq_nfiles(q);
	if (w) { /* same size: images.npy follows the images */
		ck_assert_str_eq(wc_qvq_file_name(q, 5), "images.npy");
		uint64_t size = wc_qvq_file_size(q, 5);
		uint8_t *buf = malloc(size);
		size_t got;
		ck_assert_int_eq(wc_qvq_file_read(q, 5, buf, size, 0, &g, &got), WC_OK);
		ck_assert_uint_eq(got, size);
		ck_assert_int_eq(memcmp(buf, "\x93NUMPY\x01\x00", 8), 0);
		uint32_t hl = 10u + (uint32_t)(buf[8] | buf[9] << 8);
		ck_assert_uint_eq(hl % 64, 0);
		char shape[64];
		snprintf(shape, sizeof shape, "'shape': (5, %u, %u, 3)", h, w);
		ck_assert_ptr_nonnull(memmem(buf, hl, shape, strlen(shape)));
		for (uint32_t i = 0; i < 5; i++)
			ck_assert_int_eq(memcmp(buf + hl + (size_t)i * w * h * 3, st.recon[i],
						(size_t)w * h * 3), 0);
		free(buf);
	} else {
		for (uint32_t f = 0; f < nf; f++)
			ck_assert_str_ne(wc_qvq_file_name(q, f), "images.npy");
	}
	/* Labels from the first directory: "cats" then "dogs". */
	const char *last = wc_qvq_file_name(q, nf - 1);
	ck_assert_str_eq(last, "labels.txt");
	uint8_t lab[64];
	size_t got;
	ck_assert_int_eq(wc_qvq_file_read(q, nf - 1, lab, sizeof lab, 0, &g, &got), WC_OK);
	ck_assert_uint_eq(got, wc_qvq_file_size(q, nf - 1));
	ck_assert_int_eq(memcmp(lab, "cats\ncats\ncats\ndogs\ndogs\n", got), 0);
	wc_qvq_memo_free(&memo);
	wc_qvq_release(q);
	wc_qvq_pack_stats_free(&st);
}

static void make_set(void)
{
	make_image("in/cats/a.ppm", 20, 16, 3);
	make_image("in/cats/b.ppm", 21, 15, 5); /* odd sides: edge padding */
	make_image("in/cats/c.ppm", 1, 1, 1);
	make_image("in/dogs/d.ppm", 17, 30, 2);
	make_image("in/dogs/e.ppm", 64, 40, 9);
}

START_TEST(round_trip_k64)
{
	make_set();
	round_trip(64, 0, 0, 0);
}
END_TEST

START_TEST(round_trip_k1000_many_tiles)
{
	make_set();
	round_trip(1000, 4096, 0, 0); /* 2-byte indices, one image per tile */
}
END_TEST

START_TEST(round_trip_resized_npy)
{
	make_set();
	round_trip(300, 4096, 12, 9);
}
END_TEST

START_TEST(deterministic)
{
	make_set();
	wc_qvq_pack_opts o = {.entries = 32, .seed = 99, .threads = 1};
	wc_qvq_pack_stats st;
	ck_assert_int_eq(wc_qvq_pack_dir(tpath("in"), tpath("1.qvq"), &o, &st), WC_OK);
	o.threads = 3;
	ck_assert_int_eq(wc_qvq_pack_dir(tpath("in"), tpath("2.qvq"), &o, &st), WC_OK);
	o.seed = 100;
	ck_assert_int_eq(wc_qvq_pack_dir(tpath("in"), tpath("3.qvq"), &o, &st), WC_OK);
	size_t l1, l2, l3;
	uint8_t *a = slurp(tpath("1.qvq"), &l1), *b = slurp(tpath("2.qvq"), &l2),
		*c = slurp(tpath("3.qvq"), &l3);
	ck_assert_uint_eq(l1, l2);
	ck_assert_int_eq(memcmp(a, b, l1), 0);
	ck_assert(l1 != l3 || memcmp(a, c, l1) != 0);
	free(a);
	free(b);
	free(c);
}
END_TEST

START_TEST(kmeans_exact_nearest)
{
	/* The pruned search must find the brute-force nearest entry (lowest
	 * index on ties) for every point. */
	enum { K = 500, N = 4000, D = 12 };
	uint8_t *cb = malloc(K * D), *pts = malloc(N * D);
	for (int i = 0; i < K * D; i++)
		cb[i] = (uint8_t)(rnd() % 64 * 4);
	memcpy(cb + 7 * D, cb + 3 * D, D); /* a duplicate: ties go to 3 */
	for (int i = 0; i < N * D; i++)
		pts[i] = (uint8_t)rnd();
	memcpy(pts, cb + 3 * D, D);
	uint16_t *idx = malloc(N * sizeof *idx);
	uint64_t sse;
	ck_assert_int_eq(wc_kmeans_assign(cb, K, D, pts, N, 2, idx, &sse), WC_OK);
	uint64_t sse2 = 0;
	for (int i = 0; i < N; i++) {
		uint32_t best = UINT32_MAX, bi = 0;
		for (uint32_t k = 0; k < K; k++) {
			uint32_t d = 0;
			for (int j = 0; j < D; j++) {
				int t = pts[i * D + j] - cb[k * D + j];
				d += (uint32_t)(t * t);
			}
			if (d < best) { best = d; bi = k; }
		}
		ck_assert_uint_eq(idx[i], bi);
		sse2 += best;
	}
	ck_assert_uint_eq(idx[0], 3);
	ck_assert_uint_eq(sse, sse2);
	/* Fewer distinct points than K: training returns fewer entries. */
	uint32_t got;
	wc_kmeans_opts ko = {.k = 64, .dim = D, .seed = 1, .threads = 2};
	for (int i = 0; i < N; i++)
		memset(pts + i * D, i % 2 ? 200 : 0, D);
	ck_assert_int_eq(wc_kmeans_train(pts, N, &ko, cb, &got), WC_OK);
	ck_assert_uint_eq(got, 2);
	free(cb);
	free(pts);
	free(idx);
}
END_TEST

/* A nearest-entry search "elsewhere" for the k-means tests: brute force
 * (the GPU kernel's method), counting its calls; fail_at > 0 makes call
 * number fail_at fail with WC_E_BACKEND after scribbling over out. */
typedef struct ext_search {
	int calls, fail_at;
} ext_search;

static wc_err ext_nearest(void *ctx, const uint8_t *cb, uint32_t k, uint32_t dim, const uint8_t *pts,
			  uint64_t n, uint16_t *out)
{
	ext_search *x = ctx;
	if (++x->calls == x->fail_at) {
		memset(out, 0xEE, n * sizeof *out);
		return wc_fail(WC_E_BACKEND, "test: device lost");
	}
	for (uint64_t i = 0; i < n; i++) {
		uint32_t best = UINT32_MAX, bi = 0;
		for (uint32_t c = 0; c < k; c++) {
			uint32_t d = 0;
			for (uint32_t j = 0; j < dim; j++) {
				int t = pts[i * dim + j] - cb[(size_t)c * dim + j];
				d += (uint32_t)(t * t);
			}
			if (d < best) { best = d; bi = c; }
		}
		out[i] = (uint16_t)bi;
	}
	return WC_OK;
}

/* Training and assignment with the search done elsewhere give the CPU's
 * codebook and indices exactly (so an archive does not depend on where it
 * was packed), also when that search fails midway and the CPU takes over. */
START_TEST(kmeans_search_elsewhere_same_result)
{
	enum { N = 6000, D = 12, K = 40 };
	uint8_t *pts = malloc(N * D);
	for (int i = 0; i < N; i++) /* clustered, so Lloyd moves entries */
		for (int j = 0; j < D; j++)
			pts[i * D + j] = (uint8_t)((i % 9) * 25 + rnd() % 20);
	uint8_t cb_cpu[K * D], cb_ext[K * D];
	uint16_t *idx_cpu = malloc(N * 2), *idx_ext = malloc(N * 2);
	for (int fail_at = 0; fail_at <= 3; fail_at++) {
		wc_kmeans_opts ko = {.k = K, .dim = D, .seed = 5, .threads = 2, .train_points = 3000};
		uint32_t got_cpu, got_ext;
		uint64_t sse_cpu, sse_ext;
		ck_assert_int_eq(wc_kmeans_train(pts, N, &ko, cb_cpu, &got_cpu), WC_OK);
		ck_assert_int_eq(wc_kmeans_assign_opts(cb_cpu, got_cpu, pts, N, &ko, idx_cpu, &sse_cpu), WC_OK);
		ext_search x = {0, fail_at};
		ko.nearest = ext_nearest;
		ko.nearest_ctx = &x;
		ck_assert_int_eq(wc_kmeans_train(pts, N, &ko, cb_ext, &got_ext), WC_OK);
		ck_assert_int_ge(x.calls, 1);
		ck_assert_uint_eq(got_ext, got_cpu);
		ck_assert_int_eq(memcmp(cb_ext, cb_cpu, (size_t)got_cpu * D), 0);
		x = (ext_search){0, fail_at == 1 ? 1 : 0};
		ck_assert_int_eq(wc_kmeans_assign_opts(cb_ext, got_ext, pts, N, &ko, idx_ext, &sse_ext), WC_OK);
		ck_assert_int_eq(x.calls, 1);
		ck_assert_int_eq(memcmp(idx_ext, idx_cpu, N * 2), 0);
		ck_assert_uint_eq(sse_ext, sse_cpu);
	}
	free(pts);
	free(idx_cpu);
	free(idx_ext);
}
END_TEST

/* The k-means++ seeding spreads wide updates over threads: the codebook
 * must not depend on their number (a sample of 16384 points is 64 blocks,
 * enough for the pool to take the early, wide updates). */
START_TEST(kmeans_threads_same_codebook)
{
	enum { N = 40000, D = 12, K = 700 };
	uint8_t *pts = malloc(N * D);
	for (int i = 0; i < N * D; i++)
		pts[i] = (uint8_t)(rnd() % 7 == 0 ? rnd() : (i / D) % 200 + rnd() % 30);
	uint8_t *cb1 = malloc(K * D), *cb4 = malloc(K * D);
	uint32_t got1, got4;
	wc_kmeans_opts ko = {.k = K, .dim = D, .seed = 11, .threads = 1, .iterations = 2};
	ck_assert_int_eq(wc_kmeans_train(pts, N, &ko, cb1, &got1), WC_OK);
	ko.threads = 4;
	ck_assert_int_eq(wc_kmeans_train(pts, N, &ko, cb4, &got4), WC_OK);
	ck_assert_uint_eq(got1, got4);
	ck_assert_int_eq(memcmp(cb1, cb4, (size_t)got1 * D), 0);
	free(pts);
	free(cb1);
	free(cb4);
}
END_TEST

/* The encoder's parallel-for: every slice runs once, with the bounds its
 * header promises, and together they cover [0, n) once. Each slice writes
 * only its own counters, so the checks need no atomics. */
typedef struct slice_log {
	unsigned calls[16];
	size_t begin[16], end[16];
	unsigned char seen[200];
} slice_log;

static void log_slice(void *ctx, unsigned slice, size_t begin, size_t end)
{
	slice_log *l = ctx;
	l->calls[slice]++;
	l->begin[slice] = begin;
	l->end[slice] = end;
	for (size_t i = begin; i < end; i++)
		l->seen[i]++;
}

START_TEST(parallel_slices_cover_once)
{
	const unsigned threads[] = {1, 2, 3, 5, 8, 16};
	const size_t sizes[] = {0, 1, 7, 100, 200};
	for (size_t a = 0; a < sizeof threads / sizeof *threads; a++) {
		for (size_t b = 0; b < sizeof sizes / sizeof *sizes; b++) {
			unsigned t = threads[a];
			size_t n = sizes[b];
			slice_log l;
			memset(&l, 0, sizeof l);
			wc_qvq_parallel(t, n, log_slice, &l);
			for (unsigned s = 0; s < t; s++) {
				ck_assert_msg(l.calls[s] == 1, "%u threads, n %zu: slice %u ran %u times",
					      t, n, s, l.calls[s]);
				ck_assert_uint_eq(l.begin[s], n * s / t);
				ck_assert_uint_eq(l.end[s], n * (s + 1) / t);
			}
			for (unsigned s = t; s < 16; s++)
				ck_assert_uint_eq(l.calls[s], 0);
			for (size_t i = 0; i < n; i++)
				ck_assert_msg(l.seen[i] == 1, "%u threads, n %zu: index %zu covered %u times",
					      t, n, i, l.seen[i]);
		}
	}
}
END_TEST

/* Build a small valid archive in memory for the malformed-archive tests. */
static uint8_t *valid_archive(size_t *len, const char *const *names, uint32_t n)
{
	uint8_t cb[4 * 12];
	for (int i = 0; i < 48; i++)
		cb[i] = (uint8_t)(i * 5);
	uint32_t dims[8] = {3, 3, 4, 2, 2, 2, 5, 1};
	uint16_t idx[64];
	for (int i = 0; i < 64; i++)
		idx[i] = (uint16_t)(i % 4);
	uint32_t labels[4] = {0, 1, 0, WC_QVQ_NO_LABEL};
	const char *ln[] = {"x", "y"};
	wc_qvq_write_input in = {.entries = 4, .patch_h = 2, .patch_w = 2, .codebook = cb,
				 .nimages = n, .names = names, .dims = dims, .labels = labels,
				 .label_names = ln, .nlabels = 2, .indices = idx,
				 .tile_bytes = 30, .threads = 1}; /* 3 tiles */
	wc_err e = wc_qvq_write(tpath("v.qvq"), &in, NULL);
	ck_assert_msg(e == WC_OK, "%s", wc_last_detail());
	return slurp(tpath("v.qvq"), len);
}

/* Write b, try to open it, return the error (closing on success). */
static wc_err try_open(const uint8_t *b, size_t len)
{
	spit(tpath("m.qvq"), b, len);
	wc_qvq *q;
	wc_err e = wc_qvq_open(tpath("m.qvq"), &q);
	if (!e)
		wc_qvq_release(q);
	return e;
}

static const char *const four[] = {"aa.png", "ab/c.jpg", "ab/d", "zz/zz.png"};

START_TEST(malformed_rejected)
{
	size_t len;
	uint8_t *v = valid_archive(&len, four, 4);
	uint8_t *b = malloc(len + 16);
	rehash_len = len;
	ck_assert_int_eq(try_open(v, len), WC_OK);
#define MUT(expr, want)                                                               \
	do {                                                                          \
		memcpy(b, v, len);                                                    \
		expr;                                                                 \
		wc_err got_ = try_open(b, len);                                       \
		ck_assert_msg(got_ == (want), "%s: got %d (%s)", #expr, got_, wc_last_detail()); \
	} while (0)
	/* Truncation and size. */
	for (size_t cut = 0; cut < len; cut += 37) {
		memcpy(b, v, len);
		ck_assert_int_ne(try_open(b, cut), WC_OK);
	}
	MUT(b[0] = 'X', WC_E_FORMAT);                      /* magic */
	MUT(b[50] ^= 1, WC_E_CORRUPT);                     /* header hash */
	MUT((wc_put_u32(b + 8, 3), rehash(b)), WC_E_UNSUPPORTED);   /* version past the reader */
	MUT((b[152] = 1, rehash(b)), WC_E_FORMAT);          /* version 1 has no mode */
	MUT((b[18] = 4, rehash(b)), WC_E_UNSUPPORTED);     /* channels */
	MUT((wc_put_u32(b + 20, 0), rehash(b)), WC_E_RANGE);     /* K = 0 */
	MUT((wc_put_u32(b + 20, 70000), rehash(b)), WC_E_RANGE); /* K > 65536 */
	MUT((wc_put_u32(b + 20, 300), rehash(b)), WC_E_FORMAT);  /* index_bytes mismatch */
	MUT((wc_put_u32(b + 32, 33), rehash(b)), WC_E_FORMAT);   /* chunk */
	MUT((wc_put_u64(b + 40, len + 1), rehash(b)), WC_E_FORMAT); /* file size */
	MUT((wc_put_u64(b + 88, len - 10), rehash(b)), WC_E_FORMAT); /* tile table past end */
	MUT((wc_put_u32(b + 28, 5), rehash(b)), WC_E_FORMAT);    /* more tiles than images */
	MUT(b[160] = 1, WC_E_CORRUPT);                     /* reserved, under the hash */
	MUT((b[160] = 1, rehash(b)), WC_E_FORMAT);         /* reserved byte */
	/* Sections. */
	uint64_t meta = wc_get_u64(v + 48), imgs = wc_get_u64(v + 80);
	uint64_t tiles = wc_get_u64(v + 88), strs = wc_get_u64(v + 96);
	MUT(b[meta] ^= 0x20, WC_E_CORRUPT);                /* metadata hash */
	MUT((b[meta] = '[', rehash(b)), WC_E_FORMAT);      /* not an object / not JSON */
	MUT((wc_put_u32(b + imgs, 0), rehash(b)), WC_E_RANGE);        /* width 0 */
	MUT((wc_put_u32(b + imgs, 20000), rehash(b)), WC_E_RANGE);    /* width > limit */
	MUT((wc_put_u32(b + imgs + 8, 2), rehash(b)), WC_E_FORMAT);   /* label >= 2 */
	MUT((wc_put_u32(b + imgs + 12, 1000), rehash(b)), WC_E_FORMAT); /* name outside pool */
	MUT((wc_put_u32(b + imgs + 20, 1), rehash(b)), WC_E_FORMAT);  /* reserved */
	MUT((wc_put_u32(b + imgs, 4), rehash(b)), WC_E_FORMAT);       /* dsize no longer adds up */
	MUT((wc_put_u32(b + tiles + 12, 1), rehash(b)), WC_E_FORMAT); /* dsize */
	MUT((wc_put_u32(b + tiles + 16, 1), rehash(b)), WC_E_FORMAT); /* first image */
	MUT((wc_put_u32(b + tiles + 8, 2), rehash(b)), WC_E_FORMAT);  /* csize too small */
	MUT((wc_put_u64(b + tiles, len - 2), rehash(b)), WC_E_FORMAT); /* payload past end */
	MUT(b[tiles + 30] = 1, WC_E_CORRUPT);
	/* Escaping or clashing names, with valid hashes. */
	MUT((memcpy(b + strs, "../", 3), rehash(b)), WC_E_FORMAT);      /* "../png" */
	MUT((memcpy(b + strs + 6, "/b", 2), rehash(b)), WC_E_FORMAT);   /* "/b/c.jpg": absolute */
	MUT((memcpy(b + strs + 6, "..", 2), rehash(b)), WC_E_FORMAT);   /* "../c.jpg" */
	MUT((memcpy(b + strs + 6, "a/", 2), rehash(b)), WC_E_FORMAT);   /* "a//c.jpg" */
	MUT((memcpy(b + strs, "zz", 2), rehash(b)), WC_E_FORMAT);       /* not sorted */
	free(b);
	free(v);
	/* Two names shown as the same "a.ppm". */
	static const char *const two[] = {"a.jpg", "b.png", "c", "d"};
	v = valid_archive(&len, two, 4);
	strs = wc_get_u64(v + 96);
	ck_assert_int_eq(try_open(v, len), WC_OK);
	v[strs + 5] = 'a'; /* "b.png" -> "a.png" */
	rehash(v);
	ck_assert_int_eq(try_open(v, len), WC_E_FORMAT);
	free(v);
}
END_TEST

/* An archive whose name has a component of 300 bytes (a name a file system
 * cannot hold): the reader refuses it at open, whatever wrote it. Written
 * as 150 components of "a/", then the slashes overwritten. */
START_TEST(long_component_refused_at_open)
{
	char deep[320];
	for (int i = 0; i < 150; i++)
		memcpy(deep + 2 * i, "a/", 2);
	strcpy(deep + 300, "x.png");
	const char *const names[] = {deep, "aa.png", "ab/c.jpg", "ab/d"}; /* sorted, before and after */
	size_t len;
	uint8_t *v = valid_archive(&len, names, 4);
	rehash_len = len;
	uint8_t *at = memmem(v, len, deep, strlen(deep));
	ck_assert_ptr_nonnull(at);
	for (int i = 0; i < 150; i++)
		at[2 * i + 1] = '-'; /* one component of 300 bytes, "a-a-...": still first */
	rehash(v);
	ck_assert_int_eq(try_open(v, len), WC_E_FORMAT);
	ck_assert_msg(strstr(wc_last_detail(), "305 bytes"), "%s", wc_last_detail()); /* with "x.png" */
	free(v);
}
END_TEST

START_TEST(names_refused_by_writer)
{
	const char *const dotdot[] = {"../evil.png", "b.png"};
	const char *const absolute[] = {"/etc/x.png", "b.png"};
	const char *const clash[] = {"a.jpg", "a.png"};
	const char *const unsorted[] = {"b.png", "a.png"};
	const char *const *sets[] = {dotdot, absolute, clash, unsorted};
	uint8_t cb[12] = {0};
	uint32_t dims[4] = {2, 2, 2, 2};
	uint16_t idx[2] = {0, 0};
	for (size_t s = 0; s < 4; s++) {
		wc_qvq_write_input in = {.entries = 1, .patch_h = 2, .patch_w = 2, .codebook = cb,
					 .nimages = 2, .names = sets[s], .dims = dims,
					 .indices = idx, .threads = 1};
		ck_assert_int_eq(wc_qvq_write(tpath("w.qvq"), &in, NULL), WC_E_INVAL);
		ck_assert_int_ne(access(tpath("w.qvq"), F_OK), 0); /* nothing left behind */
	}
	/* An index >= K is refused too. */
	uint16_t bad[2] = {0, 1};
	const char *const ok[] = {"a.png", "b.png"};
	wc_qvq_write_input in = {.entries = 1, .patch_h = 2, .patch_w = 2, .codebook = cb,
				 .nimages = 2, .names = ok, .dims = dims, .indices = bad,
				 .threads = 1};
	ck_assert_int_eq(wc_qvq_write(tpath("w.qvq"), &in, NULL), WC_E_INVAL);
}
END_TEST

START_TEST(damaged_payload_is_an_error)
{
	size_t len;
	uint8_t *v = valid_archive(&len, four, 4);
	uint64_t coff = wc_get_u64(v + wc_get_u64(v + 88));
	v[coff + 5] ^= 0x40; /* inside tile 0's payload; tables still valid */
	spit(tpath("d.qvq"), v, len);
	wc_qvq *q;
	ck_assert_int_eq(wc_qvq_open(tpath("d.qvq"), &q), WC_OK);
	uint8_t out[4096];
	ck_assert_int_eq(wc_qvq_decode_tile(q, 0, out), WC_E_CORRUPT);
	/* A job whose payload is intact but whose expected hash is wrong. */
	uint8_t payload[4096];
	const wc_qvq_tile *tl = wc_qvq_tile_at(q, 1);
	ck_assert_ptr_nonnull(tl);
	ck_assert_int_eq(wc_qvq_read_payload(q, 1, payload), WC_OK);
	wc_tile_job job;
	memset(&job, 0, sizeof job);
	wc_qvq_describe_job(q, 1, &job);
	job.payload = payload;
	job.payload_size = tl->csize;
	job.out = out;
	job.out_size = tl->dsize;
	ck_assert_int_eq(wc_qvq_decode_job(&job), WC_OK);
	job.dhash ^= 1;
	ck_assert_int_eq(wc_qvq_decode_job(&job), WC_E_CORRUPT);
	ck_assert_int_eq(job.status, WC_E_CORRUPT);
	wc_qvq_release(q);
	free(v);
}
END_TEST

START_TEST(gather_generic_matches_definition)
{
	/* A 3x2 patch shape through the generic path against the formula. */
	uint8_t cb[5 * 3 * 2 * 3];
	for (size_t i = 0; i < sizeof cb; i++)
		cb[i] = (uint8_t)rnd();
	uint32_t w = 7, h = 5, gw = 4, gh = 2;
	uint8_t idx[8];
	for (uint32_t i = 0; i < gw * gh; i++)
		idx[i] = (uint8_t)(rnd() % 5);
	uint8_t out[7 * 5 * 3];
	ck_assert_int_eq(wc_qvq_gather(cb, 5, 3, 2, 3, idx, 1, w, h, out), WC_OK);
	for (uint32_t y = 0; y < h; y++)
		for (uint32_t x = 0; x < w; x++)
			for (uint32_t c = 0; c < 3; c++)
				ck_assert_uint_eq(out[(y * w + x) * 3 + c],
						  cb[idx[(y / 3) * gw + x / 2] * 18 +
						     ((y % 3) * 2 + x % 2) * 3 + c]);
	idx[3] = 5;
	ck_assert_int_eq(wc_qvq_gather(cb, 5, 3, 2, 3, idx, 1, w, h, out), WC_E_CORRUPT);

	/* The 2x2 RGB fast path (8-byte stores) against the formula, every
	 * small width and height, both index widths; out is sized exactly so
	 * a sanitizer build catches any store past the image. */
	enum { K2 = 300 };
	uint8_t *cb2 = malloc(K2 * 12);
	for (int i = 0; i < K2 * 12; i++)
		cb2[i] = (uint8_t)rnd();
	for (uint32_t ib = 1; ib <= 2; ib++)
		for (uint32_t ww = 1; ww <= 11; ww++)
			for (uint32_t hh = 1; hh <= 5; hh++) {
				uint32_t gw2 = (ww + 1) / 2, gh2 = (hh + 1) / 2, kk = ib == 1 ? 256 : K2;
				uint8_t *ix = malloc(gw2 * gh2 * ib);
				for (uint32_t j = 0; j < gw2 * gh2; j++) {
					uint32_t k = rnd() % kk;
					ix[j * ib] = (uint8_t)k;
					if (ib == 2)
						ix[j * ib + 1] = (uint8_t)(k >> 8);
				}
				uint8_t *o = malloc(ww * hh * 3);
				ck_assert_int_eq(wc_qvq_gather(cb2, kk, 2, 2, 3, ix, ib, ww, hh, o), WC_OK);
				for (uint32_t y = 0; y < hh; y++)
					for (uint32_t x = 0; x < ww; x++)
						for (uint32_t c = 0; c < 3; c++) {
							uint32_t j = (y / 2) * gw2 + x / 2;
							uint32_t k = ib == 1 ? ix[j] : (uint32_t)(ix[2 * j] | ix[2 * j + 1] << 8);
							ck_assert_uint_eq(o[(y * ww + x) * 3 + c],
									  cb2[k * 12 + ((y % 2) * 2 + x % 2) * 3 + c]);
						}
				free(ix);
				free(o);
			}
	free(cb2);

	/* Out-of-range indices anywhere in an image (the check runs 16 bytes
	 * a step, then a tail): each is refused, the largest valid one is
	 * not; 16-bit indices above 32767 too (SSE2 compares them signed). */
	enum { K3 = 40000, W3 = 46, H3 = 30, N3 = (W3 / 2) * (H3 / 2) };
	uint8_t *cb3 = calloc(K3, 12), *o3 = malloc(W3 * H3 * 3), ix3[2 * N3];
	const uint32_t at[] = { 0, 7, 8, 100, N3 - 9, N3 - 1 };
	for (uint32_t ib = 1; ib <= 2; ib++) {
		uint32_t entries = ib == 1 ? 200 : K3;
		for (size_t a = 0; a < sizeof at / sizeof at[0]; a++) {
			const uint32_t bad[] = { entries, ib == 1 ? 255 : 65535 };
			for (int b = 0; b < 3; b++) {
				for (uint32_t j = 0; j < N3; j++) {
					uint32_t k = j == at[a] ? (b < 2 ? bad[b] : entries - 1) : j % 97;
					ix3[j * ib] = (uint8_t)k;
					if (ib == 2)
						ix3[j * ib + 1] = (uint8_t)(k >> 8);
				}
				ck_assert_int_eq(wc_qvq_gather(cb3, entries, 2, 2, 3, ix3, ib, W3, H3, o3),
						 b < 2 ? WC_E_CORRUPT : WC_OK);
			}
		}
	}
	free(cb3);
	free(o3);
}
END_TEST

/* The 2x2 RGB gather sixteen patches a step (AVX-512 VBMI, where the CPU
 * has it: qvq_gather.h) and the scalar one, each against the formula, on
 * images wide enough for such steps, with odd sizes and with the
 * codebook's last entry among the indices (its 16-byte load would leave
 * the codebook: that step goes scalar). The codebook and the output are
 * sized exactly, so a sanitizer build catches a read or store past either. */
START_TEST(gather_wide_rows_every_path)
{
	const uint32_t widths[] = { 32, 33, 34, 35, 63, 64, 65, 66, 97, 224 };
	const uint32_t heights[] = { 1, 2, 3, 4, 7 };
	for (int path = 0; path < 2; path++) {
		wc_qvq_gather_scalar_only = path;
		for (uint32_t ib = 1; ib <= 2; ib++) {
			const uint32_t kk = ib == 1 ? 256 : 300;
			uint8_t *cb = malloc(kk * 12);
			for (uint32_t i = 0; i < kk * 12; i++)
				cb[i] = (uint8_t)rnd();
			for (size_t a = 0; a < sizeof widths / sizeof widths[0]; a++)
				for (size_t b = 0; b < sizeof heights / sizeof heights[0]; b++) {
					const uint32_t ww = widths[a], hh = heights[b];
					const uint32_t gw = (ww + 1) / 2, gh = (hh + 1) / 2;
					uint8_t *ix = malloc((size_t)gw * gh * ib);
					for (uint32_t j = 0; j < gw * gh; j++) {
						/* the last entry in about one step of four */
						uint32_t k = rnd() % 64 == 0 ? kk - 1 : rnd() % kk;
						ix[j * ib] = (uint8_t)k;
						if (ib == 2)
							ix[j * ib + 1] = (uint8_t)(k >> 8);
					}
					uint8_t *o = malloc((size_t)ww * hh * 3);
					ck_assert_int_eq(wc_qvq_gather(cb, kk, 2, 2, 3, ix, ib, ww, hh, o), WC_OK);
					for (uint32_t y = 0; y < hh; y++)
						for (uint32_t x = 0; x < ww; x++) {
							uint32_t j = (y / 2) * gw + x / 2;
							uint32_t k = ib == 1 ? ix[j] : (uint32_t)(ix[2 * j] | ix[2 * j + 1] << 8);
							ck_assert_msg(memcmp(o + ((size_t)y * ww + x) * 3,
									     cb + k * 12 + ((y % 2) * 2 + x % 2) * 3, 3) == 0,
								      "%s path, ib %u, %ux%u, pixel (%u, %u)",
								      path ? "scalar" : "best", ib, ww, hh, x, y);
						}
					free(ix);
					free(o);
				}
			free(cb);
		}
	}
	wc_qvq_gather_scalar_only = 0;
}
END_TEST

/* This process's address space (VmSize), bytes. */
static uint64_t vm_size_bytes(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	ck_assert_ptr_nonnull(f);
	char line[256];
	unsigned long long kib = 0;
	while (fgets(line, sizeof line, f) && sscanf(line, "VmSize: %llu", &kib) != 1)
		;
	fclose(f);
	ck_assert_uint_gt(kib, 0);
	return (uint64_t)kib << 10;
}

/* Write n bytes to tmpdir/rel; returns the path (static buffer). */
static const char *write_file(const char *rel, const void *d, size_t n)
{
	static char path[512];
	snprintf(path, sizeof path, "%s/%s", tmpdir, rel);
	FILE *f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(d, 1, n, f), n);
	ck_assert_int_eq(fclose(f), 0);
	return path;
}

/* The binary PPM/PGM reader (image_io.h): pixels, maxval scaling with
 * rounding, and the refusals, a short file's before any allocation of the
 * size its header claims. */
START_TEST(ppm_reader)
{
	wc_image img;
	/* P6, maxval 255, a comment: bytes as they are. */
	const uint8_t p6[] = "P6\n# c\n2 1\n255\n\x01\x02\x03\xfd\xfe\xff";
	ck_assert_int_eq(wc_image_load(write_file("a.ppm", p6, sizeof p6 - 1), &img), WC_OK);
	ck_assert_uint_eq(img.width, 2);
	ck_assert_uint_eq(img.height, 1);
	ck_assert_mem_eq(img.rgb, p6 + sizeof p6 - 7, 6);
	wc_image_free(&img);
	/* P5, maxval 1000, 16-bit big-endian samples: grey to RGB, v * 255 / 1000
	 * rounded; a sample above maxval counts as maxval. */
	const uint8_t p5[] = "P5 3 1 1000\n\x00\x00\x01\xf4\x0f\xff";
	ck_assert_int_eq(wc_image_load(write_file("b.pgm", p5, sizeof p5 - 1), &img), WC_OK);
	const uint8_t want[] = {0, 0, 0, 128, 128, 128, 255, 255, 255}; /* 500 -> 127.5 -> 128 */
	ck_assert_mem_eq(img.rgb, want, sizeof want);
	wc_image_free(&img);
	/* A header that claims 30000 x 8000 pixels over no data: refused as
	 * truncated before 720 MB are allocated for it, which the address
	 * space limit here would refuse (WC_E_NOMEM). */
	const char big[] = "P6\n30000 8000\n255\n";
	const char *big_path = write_file("c.ppm", big, sizeof big - 1);
	struct rlimit as;
	ck_assert_int_eq(getrlimit(RLIMIT_AS, &as), 0);
	struct rlimit low = as;
	low.rlim_cur = vm_size_bytes() + (128u << 20);
	ck_assert_int_eq(setrlimit(RLIMIT_AS, &low), 0);
	wc_err big_err = wc_image_load(big_path, &img);
	ck_assert_int_eq(setrlimit(RLIMIT_AS, &as), 0);
	ck_assert_int_eq(big_err, WC_E_FORMAT);
	ck_assert_ptr_nonnull(strstr(wc_last_detail(), "truncated"));
	ck_assert_ptr_null(img.rgb);
	/* One byte short. */
	ck_assert_int_eq(wc_image_load(write_file("d.ppm", p6, sizeof p6 - 2), &img), WC_E_FORMAT);
	/* Sides and maxval out of range, not an image at all. */
	const char wide[] = "P6\n40000 1\n255\n";
	ck_assert_int_eq(wc_image_load(write_file("e.ppm", wide, sizeof wide - 1), &img), WC_E_RANGE);
	const char zero[] = "P5\n0 4\n255\n";
	ck_assert_int_eq(wc_image_load(write_file("f.pgm", zero, sizeof zero - 1), &img), WC_E_RANGE);
	const char maxv[] = "P5\n1 1\n70000\n\x00\x00";
	ck_assert_int_eq(wc_image_load(write_file("g.pgm", maxv, sizeof maxv - 1), &img), WC_E_FORMAT);
	const char text[] = "P3\n1 1\n255\n1 2 3\n";
	ck_assert_int_eq(wc_image_load(write_file("h.ppm", text, sizeof text - 1), &img), WC_E_FORMAT);
}
END_TEST

/* wc_image_resize_crop at its limits: a 32768 x 1 sliver cropped to
 * 1 x 131073 would be scaled to 4295000064 x 131073 pixels, past what the
 * scaled size can hold: WC_E_RANGE, not a wrapped size. Just inside, the
 * same sliver cropped to 1 x 131071 works, and a 1 x 1 image stretched to
 * 3 x 2 gives its one pixel everywhere. */
START_TEST(resize_limits)
{
	wc_image sliver = {.width = 32768, .height = 1, .rgb = malloc(32768 * 3)};
	ck_assert_ptr_nonnull(sliver.rgb);
	memset(sliver.rgb, 7, 32768 * 3);
	wc_image out = {0};
	ck_assert_int_eq(wc_image_resize_crop(&sliver, 1, 131073, &out), WC_E_RANGE);
	ck_assert_ptr_null(out.rgb);
	ck_assert_int_eq(wc_image_resize_crop(&sliver, 1, 131071, &out), WC_OK);
	ck_assert_uint_eq(out.width, 1);
	ck_assert_uint_eq(out.height, 131071);
	for (size_t i = 0; i < 131071 * 3; i++)
		ck_assert_uint_eq(out.rgb[i], 7);
	wc_image_free(&out);
	wc_image_free(&sliver);
	uint8_t px[3] = {10, 200, 33};
	wc_image one = {.width = 1, .height = 1, .rgb = px};
	ck_assert_int_eq(wc_image_resize_crop(&one, 3, 2, &out), WC_OK);
	for (size_t i = 0; i < 3 * 2 * 3; i++)
		ck_assert_uint_eq(out.rgb[i], px[i % 3]);
	wc_image_free(&out);
	/* A 1 x 14000 sliver cropped to 14000 x 1 (its other aspect) keeps one
	 * row of a 14000-times enlargement: only the source rows it draws on
	 * are resampled (all of them would be 2.35 GB; a fuzzer found it). */
	wc_image tall = {.width = 1, .height = 14000, .rgb = malloc(14000 * 3)};
	ck_assert_ptr_nonnull(tall.rgb);
	for (size_t i = 0; i < 14000 * 3; i++)
		tall.rgb[i] = (uint8_t)(i / 3 % 2 ? 200 : 40);
	ck_assert_int_eq(wc_image_resize_crop(&tall, 14000, 1, &out), WC_OK);
	ck_assert_uint_eq(out.width, 14000);
	ck_assert_uint_eq(out.height, 1);
	for (size_t i = 0; i < 14000 * 3; i++)
		ck_assert(out.rgb[i] >= 40 && out.rgb[i] <= 200);
	wc_image_free(&out);
	wc_image_free(&tall);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("qvq");
	TCase *tc = tcase_create("qvq");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, names_rules);
	tcase_add_test(tc, round_trip_k64);
	tcase_add_test(tc, round_trip_k1000_many_tiles);
	tcase_add_test(tc, round_trip_resized_npy);
	tcase_add_test(tc, deterministic);
	tcase_add_test(tc, kmeans_exact_nearest);
	tcase_add_test(tc, kmeans_search_elsewhere_same_result);
	tcase_add_test(tc, kmeans_threads_same_codebook);
	tcase_add_test(tc, parallel_slices_cover_once);
	tcase_add_test(tc, malformed_rejected);
	tcase_add_test(tc, names_refused_by_writer);
	tcase_add_test(tc, long_component_refused_at_open);
	tcase_add_test(tc, damaged_payload_is_an_error);
	tcase_add_test(tc, gather_generic_matches_definition);
	tcase_add_test(tc, gather_wide_rows_every_path);
	tcase_add_test(tc, ppm_reader);
	tcase_add_test(tc, resize_limits);
	suite_add_tcase(s, tc);
	return check_run(s);
}
