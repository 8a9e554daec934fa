/* test_qvq_tx.c - transform-mode archives (docs/FORMAT.md 6.8): rANS
 * streams whose table changes by segment come back and refuse bad segment
 * lists; a tile payload of several images decodes to the pixels of their
 * coefficients, and every single-byte change of it is refused or (with
 * the tile's hash) gives the same bytes; `pack-images` at a quality and at
 * a PSNR writes an archive whose tiles and shown files equal the encoder's
 * images, whose PSNR is the one reported and at least the one asked; a
 * damaged payload is an error; transform headers that break the rules are
 * refused. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check_run.h"
#include "codec/rans.h"
#include "core/hash.h"
#include "core/le.h"
#include "images/image_io.h"
#include "qvq/qvq.h"
#include "qvq/qvq_dct.h"
#include "qvq/qvq_dct_rate.h"
#include "qvq/qvq_files.h"
#include "qvq/qvq_pack.h"
#include "qvq/qvq_tx_tile.h"

static char tmpdir[] = "/tmp/test_qvq_tx.XXXXXX";

static uint64_t rng_state = 11;
static uint32_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return (uint32_t)((z ^ (z >> 31)) >> 32);
}

/* A photograph-like image: gradients, an edge, a little noise. */
static uint8_t *picture(uint32_t w, uint32_t h, int seed)
{
	uint8_t *p = malloc((size_t)w * h * 3);
	for (uint32_t y = 0; y < h; y++)
		for (uint32_t x = 0; x < w; x++)
			for (int c = 0; c < 3; c++) {
				double v = 90 + 60 * sin(x * 0.07 * seed + c) + 40 * cos(y * 0.05 * (c + 1)) +
					   (x > w / 2 ? 25 : 0) + (int)(rnd() % 7) - 3;
				p[((size_t)y * w + x) * 3 + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
			}
	return p;
}

static char *tpath(const char *rel)
{
	static char buf[4][512];
	static int k;
	k = (k + 1) % 4;
	snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, rel);
	return buf[k];
}

static void setup(void) { ck_assert_ptr_nonnull(mkdtemp(tmpdir)); }

static void teardown(void)
{
	char cmd[600];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
	strcpy(tmpdir, "/tmp/test_qvq_tx.XXXXXX");
}

START_TEST(rans_segments_round_trip)
{
	/* three tables, skewed differently; segments of 64, 0, 96 and 37 symbols */
	wc_freqtab ft[3];
	for (int t = 0; t < 3; t++) {
		uint64_t hist[256] = {0};
		for (int s = 0; s < 256; s++)
			hist[s] = s < 8 * (t + 1) ? (uint64_t)(1000 >> (s % 8)) + 1 : 0;
		ck_assert_int_eq(wc_freq_normalize(hist, &ft[t]), WC_OK);
	}
	const size_t end[4] = {64, 64, 160, 197};
	const wc_freqtab *tabs[4] = {&ft[0], &ft[1], &ft[2], &ft[0]};
	uint8_t sym[197], back[197];
	for (size_t i = 0; i < 197; i++) {
		const int seg = i < 64 ? 0 : i < 160 ? 2 : 0;
		sym[i] = (uint8_t)(rnd() % (8u * (seg + 1)));
	}
	wc_rans_dtab dt[3];
	for (int t = 0; t < 3; t++)
		wc_rans_dtab_build(&ft[t], &dt[t]);
	const wc_rans_dtab *dts[4] = {&dt[0], &dt[1], &dt[2], &dt[0]};
	for (uint32_t chunk = 32; chunk <= 256; chunk *= 2) { /* segments across chunks */
		uint8_t out[4096];
		size_t len;
		wc_rans_segs sg = {4, end, tabs, dts};
		ck_assert_int_eq(wc_rans_encode_segs(sym, 197, &sg, chunk, out, sizeof out, &len), WC_OK);
		ck_assert_int_eq(wc_rans_decode_segs(out, len, &sg, chunk, back, 197), WC_OK);
		ck_assert_mem_eq(back, sym, 197);
		/* decoded with one table throughout, the stream is refused */
		const wc_rans_dtab *one[4] = {&dt[0], &dt[0], &dt[0], &dt[0]};
		wc_rans_segs wrong = {4, end, tabs, one};
		ck_assert_int_eq(wc_rans_decode_segs(out, len, &wrong, chunk, back, 197), WC_E_CORRUPT);
	}
	/* a segment not ending on a round, and ends past the symbols, are refused */
	const size_t bad_end[4] = {60, 64, 160, 197}, long_end[4] = {64, 64, 160, 200};
	wc_rans_segs bad = {4, bad_end, tabs, dts}, lng = {4, long_end, tabs, dts};
	uint8_t out[4096];
	size_t len;
	ck_assert_int_eq(wc_rans_encode_segs(sym, 197, &bad, 64, out, sizeof out, &len), WC_E_INVAL);
	ck_assert_int_eq(wc_rans_decode_segs(out, sizeof out, &lng, 64, back, 197), WC_E_INVAL);
	/* a symbol its segment's table lacks cannot be encoded */
	sym[70] = 200;
	wc_rans_segs sg = {4, end, tabs, dts};
	ck_assert_int_eq(wc_rans_encode_segs(sym, 197, &sg, 64, out, sizeof out, &len), WC_E_INVAL);
}
END_TEST

/* Three images of odd sizes quantised into one tile with tables of their
 * own histograms. */
typedef struct tile_fixture {
	uint32_t dims[6];
	uint8_t *img[3];
	qvq_tx_image im[3];
	wc_freqtab tabs[QVQ_TX_PLANES];
	wc_rans_dtab dt[QVQ_TX_PLANES];
	const wc_rans_dtab *dts[QVQ_TX_PLANES];
	uint8_t *payload;
	size_t len, dsize;
} tile_fixture;

static const uint32_t SL = 40, SC = 60;

static void tile_make(tile_fixture *f)
{
	const uint32_t dims[6] = {37, 21, 64, 48, 1, 1};
	memcpy(f->dims, dims, sizeof dims);
	uint64_t hist[QVQ_TX_PLANES][256] = {{0}};
	f->dsize = 0;
	for (int i = 0; i < 3; i++) {
		f->img[i] = picture(dims[2 * i], dims[2 * i + 1], i + 1);
		ck_assert_int_eq(qvq_tx_image_make(f->img[i], dims[2 * i], dims[2 * i + 1], SL, SC, &f->im[i]), WC_OK);
		qvq_tx_image_count(&f->im[i], dims[2 * i], dims[2 * i + 1], hist);
		f->dsize += (size_t)dims[2 * i] * dims[2 * i + 1] * 3;
	}
	for (unsigned p = 0; p < QVQ_TX_PLANES; p++) {
		if (!hist[p][1])
			hist[p][1] = 1; /* two symbols at least, as the writer makes sure */
		ck_assert_int_eq(wc_freq_normalize(hist[p], &f->tabs[p]), WC_OK);
		wc_rans_dtab_build(&f->tabs[p], &f->dt[p]);
		f->dts[p] = &f->dt[p];
	}
	f->payload = malloc(qvq_tx_tile_bound(dims, 3, 64));
	ck_assert_int_eq(qvq_tx_tile_encode(f->im, dims, 3, f->tabs, 64, f->payload, &f->len), WC_OK);
	ck_assert_uint_le(f->len, qvq_tx_tile_bound(dims, 3, 64));
}

static void tile_free(tile_fixture *f)
{
	for (int i = 0; i < 3; i++) {
		qvq_tx_image_free(&f->im[i]);
		free(f->img[i]);
	}
	free(f->payload);
}

START_TEST(tile_decodes_to_the_coefficients_pixels)
{
	tile_fixture f;
	tile_make(&f);
	uint8_t *out = malloc(f.dsize), *want = malloc(f.dsize), *w = want;
	ck_assert_int_eq(qvq_tx_tile_decode(f.payload, f.len, f.dims, 3, f.dts, 64, SL, SC, out), WC_OK);
	for (int i = 0; i < 3; i++) { /* the pipeline straight: encode, decode */
		const uint32_t iw = f.dims[2 * i], ih = f.dims[2 * i + 1];
		qvq_dct_geom g;
		qvq_dct_geometry(iw, ih, &g);
		int16_t *coef = malloc(g.blocks * 64 * sizeof *coef);
		void *scr = malloc(qvq_dct_scratch_bytes(iw, ih));
		ck_assert_int_eq(qvq_dct_encode(f.img[i], iw, ih, SL, SC, coef, scr), WC_OK);
		ck_assert_int_eq(qvq_dct_decode(coef, iw, ih, SL, SC, w, scr), WC_OK);
		w += (size_t)iw * ih * 3;
		free(coef);
		free(scr);
	}
	ck_assert_mem_eq(out, want, f.dsize);
	/* every single-byte change, decoded as a job (with the tile's hash):
	 * refused, or the same bytes */
	const uint64_t dhash = wc_xxh3_64(want, f.dsize);
	const wc_qvq_job kd = {.nimages = 3, .dims = f.dims, .dtabs = f.dts, .step_luma = SL, .step_chroma = SC};
	uint8_t *bad = malloc(f.len);
	size_t refused = 0;
	for (size_t i = 0; i < f.len; i++) {
		memcpy(bad, f.payload, f.len);
		bad[i] ^= (uint8_t)(1u << (i % 8));
		wc_tile_job job;
		memset(&job, 0, sizeof job);
		job.kind = WC_JOB_TX;
		job.kind_data = &kd;
		job.chunk_symbols = 64;
		job.dhash = dhash;
		job.payload = bad;
		job.payload_size = f.len;
		job.out = out;
		job.out_size = f.dsize;
		if (wc_qvq_tx_decode_job(&job) == WC_OK)
			ck_assert_msg(memcmp(out, want, f.dsize) == 0, "byte %zu: other pixels accepted", i);
		else
			refused++;
	}
	ck_assert_uint_gt(refused, f.len * 9 / 10); /* the rANS end states and the hash catch nearly all */
	/* cut short, and one image too many */
	ck_assert_int_eq(qvq_tx_tile_decode(f.payload, f.len - 4, f.dims, 3, f.dts, 64, SL, SC, out), WC_E_CORRUPT);
	ck_assert_int_eq(qvq_tx_tile_decode(f.payload, 8, f.dims, 3, f.dts, 64, SL, SC, out), WC_E_CORRUPT);
	free(bad);
	free(out);
	free(want);
	tile_free(&f);
}
END_TEST

static void make_ppm(const char *rel, uint32_t w, uint32_t h, int seed)
{
	char *path = tpath(rel);
	for (char *p = path + strlen(tmpdir) + 1; (p = strchr(p, '/')); p++) {
		*p = 0;
		mkdir(path, 0777);
		*p = '/';
	}
	wc_image im = {w, h, picture(w, h, seed)};
	ck_assert_int_eq(wc_image_write_ppm(path, &im), WC_OK);
	wc_image_free(&im);
}

/* Pack tmpdir/in in transform mode; every tile and shown file equals the
 * encoder's images. Returns the PSNR reported. */
static double pack_and_check(int quality, double psnr_db, uint32_t tile_bytes)
{
	wc_qvq_pack_opts o = {.mode = WC_QVQ_MODE_DCT, .quality = quality, .psnr_db = psnr_db, .threads = 2,
			      .tile_bytes = tile_bytes, .keep_recon = 1};
	wc_qvq_pack_stats st;
	wc_err e = wc_qvq_pack_dir(tpath("in"), tpath("t.qvq"), &o, &st);
	ck_assert_msg(e == WC_OK, "pack: %s", wc_last_detail());
	ck_assert_uint_eq(st.nimages, 4);
	ck_assert_uint_eq(st.entries, 0);
	wc_qvq *q;
	ck_assert_int_eq(wc_qvq_open(tpath("t.qvq"), &q), WC_OK);
	const wc_qvq_header *h = wc_qvq_header_of(q);
	ck_assert_uint_eq(h->version, 2);
	ck_assert_uint_eq(h->mode, WC_QVQ_MODE_DCT);
	ck_assert_uint_eq(h->step_luma, st.step_luma);
	ck_assert_uint_eq(h->step_chroma, qvq_dct_chroma_step(st.step_luma));
	ck_assert_uint_eq(h->ntables, QVQ_TX_PLANES);
	double se = 0, samples = 0;
	wc_image src;
	for (uint32_t t = 0; t < wc_qvq_ntiles(q); t++) {
		const wc_qvq_tile *tl = wc_qvq_tile_at(q, t);
		uint8_t *buf = malloc(tl->dsize);
		ck_assert_int_eq(wc_qvq_decode_tile(q, t, buf), WC_OK);
		for (uint32_t i = tl->first_image; i < tl->first_image + tl->nimages; i++) {
			const wc_qvq_image *im = wc_qvq_image_at(q, i);
			const size_t n = (size_t)im->width * im->height * 3;
			ck_assert_mem_eq(buf + im->tile_off, st.recon[i], n);
			char rel[300];
			snprintf(rel, sizeof rel, "in/%s", im->name);
			ck_assert_int_eq(wc_image_load_max(tpath(rel), 1u << 24, &src), WC_OK);
			for (size_t j = 0; j < n; j++)
				se += ((double)src.rgb[j] - st.recon[i][j]) * ((double)src.rgb[j] - st.recon[i][j]);
			samples += (double)n;
			wc_image_free(&src);
		}
		free(buf);
	}
	const double db = 10 * log10(255.0 * 255.0 * samples / se);
	ck_assert_msg(fabs(db - st.psnr_db) < 1e-6, "PSNR %.6f reported, %.6f measured", st.psnr_db, db);
	/* the shown files: PPM header then the pixels */
	wc_qvq_memo memo;
	wc_qvq_tile_getter g;
	wc_qvq_memo_init(&memo, q, &g);
	for (uint32_t i = 0; i < 4; i++) {
		const wc_qvq_image *im = wc_qvq_image_at(q, i);
		const uint64_t size = wc_qvq_file_size(q, i);
		uint8_t *buf = malloc(size);
		size_t got;
		ck_assert_int_eq(wc_qvq_file_read(q, i, buf, size, 0, &g, &got), WC_OK);
		ck_assert_uint_eq(got, size);
		const size_t n = (size_t)im->width * im->height * 3;
		ck_assert_mem_eq(buf + size - n, st.recon[i], n);
		free(buf);
	}
	wc_qvq_memo_free(&memo);
	/* a damaged payload: an error, never other pixels */
	const wc_qvq_tile *tl = wc_qvq_tile_at(q, 0);
	FILE *fp = fopen(tpath("t.qvq"), "r+b");
	ck_assert_ptr_nonnull(fp);
	ck_assert_int_eq(fseek(fp, (long)(tl->coff + tl->csize / 2), SEEK_SET), 0);
	const int c = fgetc(fp);
	ck_assert_int_eq(fseek(fp, (long)(tl->coff + tl->csize / 2), SEEK_SET), 0);
	fputc(c ^ 0x10, fp);
	fclose(fp);
	wc_qvq *d;
	ck_assert_int_eq(wc_qvq_open(tpath("t.qvq"), &d), WC_OK);
	uint8_t *buf = malloc(tl->dsize);
	ck_assert_int_eq(wc_qvq_decode_tile(d, 0, buf), WC_E_CORRUPT);
	free(buf);
	wc_qvq_release(d);
	wc_qvq_release(q);
	const double reported = st.psnr_db;
	wc_qvq_pack_stats_free(&st);
	return reported;
}

static void make_set(void)
{
	make_ppm("in/a/one.ppm", 64, 64, 1);
	make_ppm("in/a/two.ppm", 37, 21, 2); /* odd sides */
	make_ppm("in/b/three.ppm", 1, 1, 3);
	make_ppm("in/b/four.ppm", 100, 30, 4);
}

START_TEST(pack_at_quality)
{
	make_set();
	const double q50 = pack_and_check(50, 0, 0);
	const double q95 = pack_and_check(95, 0, 30000); /* tiles of one or two images */
	ck_assert_msg(q95 > q50 + 3, "q95 %.2f dB, q50 %.2f dB", q95, q50);
}
END_TEST

START_TEST(pack_at_psnr)
{
	make_set();
	const double db = pack_and_check(0, 36.5, 0);
	ck_assert_msg(db >= 36.5, "%.3f dB", db);
	/* a PSNR the transform cannot keep: refused, no archive */
	unlink(tpath("t.qvq"));
	wc_qvq_pack_opts o = {.mode = WC_QVQ_MODE_DCT, .psnr_db = 98, .threads = 2};
	wc_qvq_pack_stats st;
	ck_assert_int_eq(wc_qvq_pack_dir(tpath("in"), tpath("t.qvq"), &o, &st), WC_E_RANGE);
	ck_assert_int_ne(access(tpath("t.qvq"), F_OK), 0);
}
END_TEST

START_TEST(transform_header_rules)
{
	wc_qvq_header h = {.version = 2, .header_size = 192, .mode = WC_QVQ_MODE_DCT, .step_luma = 64,
			   .step_chroma = 96, .patch_h = 8, .patch_w = 8, .channels = 3, .nimages = 1,
			   .ntiles = 1, .chunk_symbols = 4096, .ntables = 8, .file_size = 8192,
			   .meta_off = 192, .codebook_off = 192, .tables_off = 192, .images_off = 192,
			   .tiles_off = 192, .strings_off = 192};
	uint8_t raw[WC_QVQ_HEADER_BYTES];
	wc_qvq_header back;
	wc_qvq_header_write(&h, raw);
	ck_assert_int_eq(wc_qvq_header_parse(raw, 8192, &back), WC_OK);
	ck_assert_uint_eq(back.step_luma, 64);
	struct { const char *what; wc_qvq_header h; wc_err want; } bad[] = {
		{"entries", h, WC_E_FORMAT}, {"step 0", h, WC_E_FORMAT}, {"step", h, WC_E_FORMAT},
		{"mode 2", h, WC_E_UNSUPPORTED}, {"version 1", h, WC_E_FORMAT}, {"tables", h, WC_E_RANGE},
		{"version 3", h, WC_E_UNSUPPORTED},
	};
	bad[0].h.entries = 4;
	bad[1].h.step_luma = 0;
	bad[2].h.step_chroma = 2048;
	bad[3].h.mode = 2;
	bad[4].h.version = 1; /* version 1 has no mode byte: reserved, not 0 */
	bad[5].h.ntables = 9;
	bad[6].h.version = 3;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		wc_qvq_header_write(&bad[i].h, raw);
		ck_assert_msg(wc_qvq_header_parse(raw, 8192, &back) == bad[i].want, "%s: %s", bad[i].what,
			      wc_last_detail());
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("qvq_tx");
	TCase *tc = tcase_create("qvq_tx");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, rans_segments_round_trip);
	tcase_add_test(tc, tile_decodes_to_the_coefficients_pixels);
	tcase_add_test(tc, pack_at_quality);
	tcase_add_test(tc, pack_at_psnr);
	tcase_add_test(tc, transform_header_rules);
	suite_add_tcase(s, tc);
	return check_run(s);
}
