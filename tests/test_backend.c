/*
 * test_backend.c - decode backends (src/engine/backend*.c): the CPU backend
 * decodes real tile payloads made by wc_tile_encode() bit-exactly, reports a
 * dhash mismatch or a damaged payload as WC_E_CORRUPT with a reason, is safe
 * to call from several threads; "cuda" without a usable plugin fails cleanly
 * and "auto" falls back to "cpu" with a log line; a backend failing as a
 * whole (WC_E_BACKEND) has its batch decoded on the CPU with correct bytes.
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "codec/tile_codec.h"
#include "codec_testutil.h"
#include "engine/backend.h"
#include "fake_tiles.h"

#define CHUNK 4096u

/* One encoded tile and everything a job needs to decode it. */
typedef struct tile_case {
	wc_layout layout;
	uint8_t *data;   /* the original bytes */
	size_t nbytes;
	uint8_t *payload;
	size_t len;
	wc_freqtab tabs[WC_MAX_PLANES];
	uint8_t *out;
} tile_case;

static void tile_case_make(tile_case *tc, const char *dtype, uint8_t *data, size_t nbytes)
{
	memset(tc, 0, sizeof *tc);
	tc->layout = wc_layout_for_dtype(dtype);
	tc->data = data;
	tc->nbytes = nbytes;
	size_t n = nbytes / tc->layout.elem_size;
	uint64_t (*hist)[256] = calloc(WC_MAX_PLANES, sizeof *hist);
	wc_planes_histogram(tc->layout, data, n, hist);
	wc_plane_plan plan[WC_MAX_PLANES];
	for (unsigned p = 0; p < tc->layout.nplanes; p++) {
		plan[p] = (wc_plane_plan){ NULL, p, 1 };
		if (wc_freq_normalize(hist[p], &tc->tabs[p]) == WC_OK)
			plan[p].table = &tc->tabs[p];
		else
			tc->tabs[p] = (wc_freqtab){ { 2048, 2048 } }; /* unused, but valid */
	}
	free(hist);
	size_t cap = wc_tile_encode_bound(tc->layout, nbytes, CHUNK);
	tc->payload = malloc(cap);
	ck_assert_int_eq(wc_tile_encode(tc->layout, data, nbytes, plan, CHUNK, tc->payload, cap,
					&tc->len, NULL), WC_OK);
	tc->out = malloc(nbytes ? nbytes : 1);
}

static void tile_case_free(tile_case *tc)
{
	free(tc->data);
	free(tc->payload);
	free(tc->out);
}

static wc_tile_job job_for(tile_case *tc)
{
	wc_tile_job j;
	memset(&j, 0, sizeof j);
	j.kind = WC_JOB_PLANES;
	j.layout = tc->layout;
	j.chunk_symbols = CHUNK;
	j.payload = tc->payload;
	j.payload_size = (uint32_t)tc->len;
	j.tables = tc->tabs;
	j.ntables = tc->layout.nplanes;
	j.table_key = 1;
	j.out = tc->out;
	j.out_size = (uint32_t)tc->nbytes;
	j.dhash = XXH3_64bits(tc->data, tc->nbytes);
	j.status = WC_E_INVAL; /* the backend must set it */
	memset(tc->out, 0xEE, tc->nbytes);
	return j;
}

enum { NCASES = 7 };

/* Tiles of every layout: model-like weights (rANS planes), text-like bytes,
 * a constant tile, a tile of one element, random bytes (RAW planes). */
static void make_cases(tile_case tc[NCASES])
{
	size_t n;
	uint8_t *d;
	n = 128 * 1024; d = malloc(2 * n); tu_weights_bf16(d, n, 0.02, 1);
	tile_case_make(&tc[0], "BF16", d, 2 * n);
	n = 16 * 1024; d = malloc(4 * n); tu_weights_f32(d, n, 0.5, 2);
	tile_case_make(&tc[1], "F32", d, 4 * n);
	n = 20000; d = malloc(2 * n); tu_weights_f16(d, n, 1.0, 3);
	tile_case_make(&tc[2], "F16", d, 2 * n);
	n = 50000; d = malloc(n);
	uint64_t s = 4;
	for (size_t i = 0; i < n; i++)
		d[i] = (uint8_t)("etaoin shrdlu"[tu_next(&s) % 13]);
	tile_case_make(&tc[3], "U8", d, n);
	n = 8192; d = calloc(n, 8);
	tile_case_make(&tc[4], "I64", d, 8 * n);
	d = malloc(2); d[0] = 0x3f; d[1] = 0x80;
	tile_case_make(&tc[5], "BF16", d, 2);
	n = 30000; d = malloc(4 * n);
	for (size_t i = 0; i < 4 * n; i++)
		d[i] = (uint8_t)tu_next(&s);
	tile_case_make(&tc[6], "I32", d, 4 * n);
}

/* ---- log capture --------------------------------------------------------- */

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_text[4096];
static int log_lines[8];

static void capture(int level, const char *msg, void *ctx)
{
	(void)ctx;
	pthread_mutex_lock(&log_lock);
	if (level >= 0 && level < 8)
		log_lines[level]++;
	size_t used = strlen(log_text);
	snprintf(log_text + used, sizeof log_text - used, "%s\n", msg);
	pthread_mutex_unlock(&log_lock);
}

static void capture_start(void)
{
	log_text[0] = 0;
	memset(log_lines, 0, sizeof log_lines);
	wc_log_set_sink(capture, NULL);
}

/* ---- tests --------------------------------------------------------------- */

START_TEST(cpu_decodes_real_payloads_bit_exactly)
{
	tile_case tc[NCASES];
	make_cases(tc);
	wc_backend *be = NULL;
	ck_assert_int_eq(wc_backend_create("cpu", &(wc_backend_opts){ .threads = 3 }, &be), WC_OK);
	ck_assert_str_eq(be->ops->name, "cpu");
	ck_assert_uint_eq(be->max_batch, 6);
	ck_assert_uint_eq(be->concurrency, 2);
	wc_tile_job jobs[NCASES];
	for (int i = 0; i < NCASES; i++)
		jobs[i] = job_for(&tc[i]);
	ck_assert_int_eq(wc_backend_decode(be, jobs, NCASES), WC_OK);
	for (int i = 0; i < NCASES; i++) {
		ck_assert_msg(jobs[i].status == WC_OK, "case %d: %s", i, jobs[i].detail);
		ck_assert_str_eq(jobs[i].detail, "");
		ck_assert_msg(memcmp(tc[i].out, tc[i].data, tc[i].nbytes) == 0, "case %d bytes", i);
	}
	/* The payloads really are compressed: the weight tiles shrank. */
	ck_assert_uint_lt(tc[0].len, tc[0].nbytes * 85 / 100);
	ck_assert_uint_lt(tc[4].len, 200);
	/* One job alone, on the calling thread. */
	wc_tile_job one = job_for(&tc[1]);
	ck_assert_int_eq(wc_decode_job_cpu(&one), WC_OK);
	ck_assert(memcmp(tc[1].out, tc[1].data, tc[1].nbytes) == 0);
	wc_backend_destroy(be);
	for (int i = 0; i < NCASES; i++)
		tile_case_free(&tc[i]);
}
END_TEST

START_TEST(dhash_mismatch_and_damage_are_corrupt)
{
	tile_case tc[NCASES];
	make_cases(tc);
	wc_backend *be = NULL;
	ck_assert_int_eq(wc_backend_cpu_create(2, &be), WC_OK);
	wc_tile_job jobs[3] = { job_for(&tc[0]), job_for(&tc[1]), job_for(&tc[2]) };
	jobs[1].dhash ^= 1; /* right bytes, wrong expected hash */
	/* A flipped bit deep in the payload body of the BF16 tile. */
	tc[2].payload[tc[2].len / 2] ^= 0x10;
	ck_assert_int_eq(wc_backend_decode(be, jobs, 3), WC_OK);
	ck_assert_int_eq(jobs[0].status, WC_OK);
	ck_assert(memcmp(tc[0].out, tc[0].data, tc[0].nbytes) == 0);
	ck_assert_int_eq(jobs[1].status, WC_E_CORRUPT);
	ck_assert_msg(strstr(jobs[1].detail, "hash"), "detail: %s", jobs[1].detail);
	ck_assert_int_eq(jobs[2].status, WC_E_CORRUPT);
	ck_assert_str_ne(jobs[2].detail, "");
	/* Truncated payload. */
	wc_tile_job t = job_for(&tc[3]);
	t.payload_size -= 3;
	ck_assert_int_eq(wc_decode_job_cpu(&t), WC_E_CORRUPT);
	ck_assert_str_ne(t.detail, "");
	ck_assert_str_eq(wc_last_detail(), t.detail);
	/* A kind no decoder knows. */
	wc_tile_job k = job_for(&tc[3]);
	k.kind = 99;
	ck_assert_int_eq(wc_decode_job_cpu(&k), WC_E_UNSUPPORTED);
	ck_assert_msg(strstr(k.detail, "kind 99"), "detail: %s", k.detail);
	wc_backend_destroy(be);
	for (int i = 0; i < NCASES; i++)
		tile_case_free(&tc[i]);
}
END_TEST

typedef struct decoder_thread {
	wc_backend *be;
	tile_case *tc;
	int bad;
} decoder_thread;

static void *decoder_main(void *arg)
{
	decoder_thread *d = arg;
	uint8_t *out2 = malloc(d->tc->nbytes);
	for (int round = 0; round < 5; round++) {
		wc_tile_job j = job_for(d->tc);
		wc_tile_job jobs[2] = { j, j };
		jobs[1].out = out2;
		if (wc_backend_decode(d->be, jobs, 2) != WC_OK || jobs[0].status || jobs[1].status ||
		    memcmp(d->tc->out, d->tc->data, d->tc->nbytes) != 0 ||
		    memcmp(out2, d->tc->data, d->tc->nbytes) != 0)
			d->bad++;
	}
	free(out2);
	return NULL;
}

START_TEST(cpu_decode_from_several_threads)
{
	tile_case tc[NCASES];
	make_cases(tc);
	wc_backend *be = NULL;
	ck_assert_int_eq(wc_backend_cpu_create(2, &be), WC_OK);
	decoder_thread d[4];
	pthread_t th[4];
	for (int i = 0; i < 4; i++) {
		d[i] = (decoder_thread){ be, &tc[i], 0 };
		pthread_create(&th[i], NULL, decoder_main, &d[i]);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(d[i].bad, 0);
	}
	wc_backend_destroy(be);
	for (int i = 0; i < NCASES; i++)
		tile_case_free(&tc[i]);
}
END_TEST

static char plugin_dir[64];

static void plugin_dir_make(void)
{
	snprintf(plugin_dir, sizeof plugin_dir, "/tmp/wcodec-test-plugins-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(plugin_dir));
	setenv("WCODEC_PLUGIN_DIR", plugin_dir, 1);
}

static void plugin_dir_remove(void)
{
	char p[128];
	snprintf(p, sizeof p, "%s/%s", plugin_dir, WC_CUDA_PLUGIN_NAME);
	unlink(p);
	rmdir(plugin_dir);
	unsetenv("WCODEC_PLUGIN_DIR");
}

START_TEST(cuda_without_plugin_fails_cleanly_and_auto_uses_cpu)
{
	plugin_dir_make();
	wc_backend *be = (wc_backend *)1;
	ck_assert_int_eq(wc_backend_create("cuda", NULL, &be), WC_E_NOTFOUND);
	ck_assert_ptr_null(be);
	ck_assert_msg(strstr(wc_last_detail(), plugin_dir) &&
		      strstr(wc_last_detail(), WC_CUDA_PLUGIN_NAME), "detail: %s", wc_last_detail());

	capture_start();
	ck_assert_int_eq(wc_backend_create("auto", &(wc_backend_opts){ .threads = 1 }, &be), WC_OK);
	wc_log_set_sink(NULL, NULL);
	ck_assert_str_eq(be->ops->name, "cpu");
	ck_assert_int_eq(log_lines[WC_LOG_INFO], 1);
	ck_assert_msg(strstr(log_text, "cpu") && strstr(log_text, WC_CUDA_PLUGIN_NAME),
		      "log: %s", log_text);
	wc_backend_destroy(be);

	/* A file that is not a shared object: WC_E_BACKEND with dlopen's reason. */
	char p[128];
	snprintf(p, sizeof p, "%s/%s", plugin_dir, WC_CUDA_PLUGIN_NAME);
	FILE *f = fopen(p, "w");
	ck_assert_ptr_nonnull(f);
	fputs("not an ELF file\n", f);
	fclose(f);
	ck_assert_int_eq(wc_backend_create("cuda", NULL, &be), WC_E_BACKEND);
	ck_assert_ptr_null(be);
	ck_assert_msg(strstr(wc_last_detail(), "cannot load"), "detail: %s", wc_last_detail());
	capture_start();
	ck_assert_int_eq(wc_backend_create("auto", NULL, &be), WC_OK);
	wc_log_set_sink(NULL, NULL);
	ck_assert_str_eq(be->ops->name, "cpu");
	ck_assert_msg(strstr(log_text, "cannot load"), "log: %s", log_text);
	wc_backend_destroy(be);
	plugin_dir_remove();

	ck_assert_int_eq(wc_backend_create("tpu", NULL, &be), WC_E_INVAL);
	ck_assert_ptr_null(be);
	ck_assert_msg(strstr(wc_last_detail(), "tpu"), "detail: %s", wc_last_detail());
}
END_TEST

START_TEST(failed_backend_falls_back_to_cpu)
{
	tile_case tc[NCASES];
	make_cases(tc);
	fake_backend fb;
	fake_backend_init(&fb, 8, 1);
	fb.whole_fails = 1; /* scribbles 0xA5 over every output, then WC_E_BACKEND */
	wc_tile_job jobs[NCASES];
	for (int i = 0; i < NCASES; i++)
		jobs[i] = job_for(&tc[i]);
	capture_start();
	ck_assert_int_eq(wc_backend_decode(&fb.base, jobs, NCASES), WC_OK);
	wc_log_set_sink(NULL, NULL);
	ck_assert_uint_eq(atomic_load(&fb.calls), 1);
	for (int i = 0; i < NCASES; i++) {
		ck_assert_msg(jobs[i].status == WC_OK, "case %d: %s", i, jobs[i].detail);
		ck_assert_msg(memcmp(tc[i].out, tc[i].data, tc[i].nbytes) == 0, "case %d bytes", i);
	}
	ck_assert_int_eq(log_lines[WC_LOG_WARN], 1);
	ck_assert_msg(strstr(log_text, "fake backend failed") &&
		      strstr(log_text, "injected device failure") && strstr(log_text, "CPU"),
		      "log: %s", log_text);
	/* The fallback still catches corruption. */
	wc_tile_job bad = job_for(&tc[0]);
	bad.dhash ^= 2;
	capture_start();
	ck_assert_int_eq(wc_backend_decode(&fb.base, &bad, 1), WC_OK);
	wc_log_set_sink(NULL, NULL);
	ck_assert_int_eq(bad.status, WC_E_CORRUPT);
	for (int i = 0; i < NCASES; i++)
		tile_case_free(&tc[i]);
}
END_TEST

int main(void)
{
	Suite *su = suite_create("backend");
	TCase *tc = tcase_create("backend");
	tcase_add_test(tc, cpu_decodes_real_payloads_bit_exactly);
	tcase_add_test(tc, dhash_mismatch_and_damage_are_corrupt);
	tcase_add_test(tc, cpu_decode_from_several_threads);
	tcase_add_test(tc, cuda_without_plugin_fails_cleanly_and_auto_uses_cpu);
	tcase_add_test(tc, failed_backend_falls_back_to_cpu);
	suite_add_tcase(su, tc);
	SRunner *sr = srunner_create(su);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
