/*
 * test_backend.c - decode backends (src/engine/backend*.c): the CPU backend
 * decodes real tile payloads made by wc_tile_encode() bit-exactly, reports a
 * dhash mismatch or a damaged payload as WC_E_CORRUPT with a reason, is safe
 * to call from several threads; "cuda" without a usable plugin fails cleanly
 * and "auto" falls back to "cpu" with a log line; a backend failing as a
 * whole (WC_E_BACKEND) has its batch decoded on the CPU with correct bytes;
 * and the tile cache over the CPU backend serves real tiles and reports a
 * damaged one.
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "check_run.h"
#include "codec/tile_codec.h"
#include "codec_testutil.h"
#include "engine/backend.h"
#include "engine/cache.h"
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
	j.reader_waits = true; /* the CPU backend may cut it into parts */
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
	for (unsigned threads = 1; threads <= 3; threads += 2) { /* caller alone; with workers */
		ck_assert_int_eq(wc_backend_create("cpu", &(wc_backend_opts){ .threads = threads },
						   &be), WC_OK);
		ck_assert_str_eq(be->ops->name, "cpu");
		ck_assert_uint_eq(be->max_batch, 2 * threads);
		ck_assert_uint_eq(be->concurrency, 2);
		/* no reader-side preferences: wcodecfs keeps its own defaults */
		ck_assert_uint_eq(be->readahead_tiles, 0);
		ck_assert(!be->reader_decodes_misses);
		wc_tile_job jobs[NCASES];
		for (int i = 0; i < NCASES; i++)
			jobs[i] = job_for(&tc[i]);
		ck_assert_int_eq(wc_backend_decode(be, jobs, NCASES), WC_OK);
		for (int i = 0; i < NCASES; i++) {
			ck_assert_msg(jobs[i].status == WC_OK, "case %d: %s", i, jobs[i].detail);
			ck_assert_str_eq(jobs[i].detail, "");
			ck_assert_msg(memcmp(tc[i].out, tc[i].data, tc[i].nbytes) == 0,
				      "case %d bytes", i);
		}
		if (threads == 1)
			wc_backend_destroy(be);
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

/* A batch of fewer tiles than threads is decoded in parts on every thread:
 * the bytes are the same, a damaged chunk in any part or a wrong hash is
 * still WC_E_CORRUPT with a reason, and a tile too small to cut, an image
 * tile's kind or a zero-size tile still decode whole. */
START_TEST(cpu_splits_lone_tiles)
{
	tile_case big, tc[NCASES];
	make_cases(tc);
	size_t n = 512 * 1024; /* 1 MiB of BF16: 4 parts on 4 threads */
	uint8_t *d = malloc(2 * n);
	tu_weights_bf16(d, n, 0.02, 9);
	tile_case_make(&big, "BF16", d, 2 * n);
	wc_backend *be = NULL;
	ck_assert_int_eq(wc_backend_cpu_create(4, &be), WC_OK);
	for (int round = 0; round < 3; round++) { /* the same workers' tables again */
		wc_tile_job one = job_for(&big);
		ck_assert_int_eq(wc_backend_decode(be, &one, 1), WC_OK);
		ck_assert_msg(one.status == WC_OK, "%s", one.detail);
		ck_assert(memcmp(big.out, big.data, big.nbytes) == 0);
	}
	wc_tile_job two[2] = { job_for(&big), job_for(&tc[0]) }; /* 2 threads each */
	ck_assert_int_eq(wc_backend_decode(be, two, 2), WC_OK);
	ck_assert_int_eq(two[0].status, WC_OK);
	ck_assert_int_eq(two[1].status, WC_OK);
	ck_assert(memcmp(big.out, big.data, big.nbytes) == 0);
	ck_assert(memcmp(tc[0].out, tc[0].data, tc[0].nbytes) == 0);
	wc_tile_job small[3] = { job_for(&tc[1]), job_for(&tc[5]), job_for(&tc[4]) };
	ck_assert_int_eq(wc_backend_decode(be, small, 3), WC_OK);
	for (int i = 0; i < 3; i++)
		ck_assert_msg(small[i].status == WC_OK, "%d: %s", i, small[i].detail);
	ck_assert(memcmp(tc[1].out, tc[1].data, tc[1].nbytes) == 0);
	ck_assert(memcmp(tc[4].out, tc[4].data, tc[4].nbytes) == 0);
	/* A prefetch (no reader waits) decodes whole, alone in its batch too. */
	wc_tile_job pre = job_for(&big);
	pre.reader_waits = false;
	ck_assert_int_eq(wc_backend_decode(be, &pre, 1), WC_OK);
	ck_assert_int_eq(pre.status, WC_OK);
	ck_assert(memcmp(big.out, big.data, big.nbytes) == 0);
	/* Wrong hash, right bytes. */
	wc_tile_job h = job_for(&big);
	h.dhash ^= 1;
	ck_assert_int_eq(wc_backend_decode(be, &h, 1), WC_OK);
	ck_assert_int_eq(h.status, WC_E_CORRUPT);
	ck_assert_msg(strstr(h.detail, "hash"), "detail: %s", h.detail);
	/* A flipped bit in the first, a middle and the last part's bytes. */
	const size_t at[] = { big.len / 8, big.len / 2, big.len - 40 };
	for (size_t k = 0; k < sizeof at / sizeof at[0]; k++) {
		big.payload[at[k]] ^= 0x21;
		wc_tile_job j = job_for(&big);
		ck_assert_int_eq(wc_backend_decode(be, &j, 1), WC_OK);
		ck_assert_msg(j.status == WC_E_CORRUPT, "flip at %zu of %zu: status %d", at[k], big.len, j.status);
		ck_assert_str_ne(j.detail, "");
		big.payload[at[k]] ^= 0x21;
	}
	/* A reader's miss on the shared CPU backend, parts and all. */
	wc_tile_job r = job_for(&big);
	ck_assert_int_eq(wc_decode_jobs_cpu(&r, 1), WC_OK);
	ck_assert_int_eq(r.status, WC_OK);
	ck_assert(memcmp(big.out, big.data, big.nbytes) == 0);
	wc_backend_destroy(be);
	tile_case_free(&big);
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

#ifdef FAKE_PLUGIN_DIR
/* The real dlopen path with tests/fake_cuda_plugin.c as the plugin. */
START_TEST(cuda_plugin_is_loaded_and_used)
{
	setenv("WCODEC_PLUGIN_DIR", FAKE_PLUGIN_DIR, 1);
	unsetenv("WCODEC_FAKE_PLUGIN_MODE");
	tile_case tc[NCASES];
	make_cases(tc);
	wc_backend *be = NULL;
	ck_assert_msg(wc_backend_create("cuda", NULL, &be) == WC_OK, "%s", wc_last_detail());
	ck_assert_str_eq(be->ops->name, "cuda");
	ck_assert_uint_eq(be->max_batch, 7);
	ck_assert_uint_eq(be->concurrency, 3);
	/* the plugin's reader-side preferences pass through the wrapper */
	ck_assert_uint_eq(be->readahead_tiles, 11);
	ck_assert(be->reader_decodes_misses);
	wc_tile_job jobs[NCASES];
	for (int i = 0; i < NCASES; i++)
		jobs[i] = job_for(&tc[i]);
	ck_assert_int_eq(wc_backend_decode(be, jobs, NCASES), WC_OK);
	for (int i = 0; i < NCASES; i++) {
		ck_assert_int_eq(jobs[i].status, WC_OK);
		ck_assert(memcmp(tc[i].out, tc[i].data, tc[i].nbytes) == 0);
	}
	/* The device fails mid-run: the batch is redone on the CPU, logged. */
	setenv("WCODEC_FAKE_PLUGIN_MODE", "fail", 1);
	for (int i = 0; i < NCASES; i++)
		jobs[i] = job_for(&tc[i]);
	capture_start();
	ck_assert_int_eq(wc_backend_decode(be, jobs, NCASES), WC_OK);
	wc_log_set_sink(NULL, NULL);
	ck_assert_msg(strstr(log_text, "device lost"), "log: %s", log_text);
	for (int i = 0; i < NCASES; i++) {
		ck_assert_int_eq(jobs[i].status, WC_OK);
		ck_assert(memcmp(tc[i].out, tc[i].data, tc[i].nbytes) == 0);
	}
	wc_backend_destroy(be);

	/* "auto" picks it and says so. */
	unsetenv("WCODEC_FAKE_PLUGIN_MODE");
	capture_start();
	ck_assert_int_eq(wc_backend_create("auto", NULL, &be), WC_OK);
	wc_log_set_sink(NULL, NULL);
	ck_assert_str_eq(be->ops->name, "cuda");
	ck_assert_msg(strstr(log_text, "cuda"), "log: %s", log_text);
	wc_backend_destroy(be);

	/* No GPU: "cuda" fails with the plugin's reason, "auto" falls back. */
	setenv("WCODEC_FAKE_PLUGIN_MODE", "nogpu", 1);
	be = (wc_backend *)1;
	ck_assert_int_eq(wc_backend_create("cuda", NULL, &be), WC_E_BACKEND);
	ck_assert_ptr_null(be);
	ck_assert_msg(strstr(wc_last_detail(), "no CUDA-capable device"), "%s", wc_last_detail());
	capture_start();
	ck_assert_int_eq(wc_backend_create("auto", NULL, &be), WC_OK);
	wc_log_set_sink(NULL, NULL);
	ck_assert_str_eq(be->ops->name, "cpu");
	ck_assert_msg(strstr(log_text, "cpu") && strstr(log_text, "no CUDA-capable device"),
		      "log: %s", log_text);
	wc_backend_destroy(be);
	unsetenv("WCODEC_FAKE_PLUGIN_MODE");
	unsetenv("WCODEC_PLUGIN_DIR");
	for (int i = 0; i < NCASES; i++)
		tile_case_free(&tc[i]);
}
END_TEST
#endif

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

/* The warm-up decodes its synthetic tile through `calls` calls at once and
 * reports a backend that cannot decode it. */
START_TEST(warm_up_runs_every_call_and_reports_failures)
{
	wc_backend *be = NULL;
	ck_assert_int_eq(wc_backend_cpu_create(2, &be), WC_OK);
	ck_assert_msg(wc_backend_warm_up(be, 4) == WC_OK, "%s", wc_last_detail());
	wc_backend_destroy(be);

	/* The fake backend rejects real payloads as corrupt: the warm-up
	 * says so, after running its three calls side by side. */
	fake_backend fb;
	fake_backend_init(&fb, 8, 3);
	atomic_store(&fb.delay_us, 20000);
	ck_assert_int_eq(wc_backend_warm_up(&fb.base, 3), WC_E_CORRUPT);
	ck_assert_msg(strstr(wc_last_detail(), "warm-up") && strstr(wc_last_detail(), "payload of"),
		      "%s", wc_last_detail());
	ck_assert_uint_eq(atomic_load(&fb.calls), 3);
	ck_assert_uint_eq(atomic_load(&fb.max_in_flight), 3);

	/* A device that fails as a whole. */
	fake_backend_init(&fb, 8, 1);
	fb.whole_fails = 1;
	ck_assert_int_eq(wc_backend_warm_up(&fb.base, 1), WC_E_BACKEND);
	ck_assert_uint_eq(atomic_load(&fb.calls), 1);
}
END_TEST

/* ---- the cache over the CPU backend, on real payloads --------------------- */

typedef struct real_source {
	wc_tile_source base;
	tile_case *tc;
	atomic_int refs;
	uint32_t repeat; /* 0: tile t is tc[t], NCASES tiles; else `repeat` tiles, each tc[0] */
} real_source;

static const tile_case *case_of(const wc_tile_source *s, uint32_t t)
{
	const real_source *r = (const real_source *)s;
	return &r->tc[r->repeat ? 0 : t];
}
static uint32_t real_ntiles(const wc_tile_source *s)
{
	const real_source *r = (const real_source *)s;
	return r->repeat ? r->repeat : NCASES;
}
static uint32_t real_dsize(const wc_tile_source *s, uint32_t t) { return (uint32_t)case_of(s, t)->nbytes; }
static uint32_t real_csize(const wc_tile_source *s, uint32_t t) { return (uint32_t)case_of(s, t)->len; }
static wc_err real_read(const wc_tile_source *s, uint32_t t, uint8_t *buf)
{
	const tile_case *tc = case_of(s, t);
	memcpy(buf, tc->payload, tc->len);
	return WC_OK;
}
static void real_describe(const wc_tile_source *s, uint32_t t, wc_tile_job *j)
{
	const tile_case *tc = case_of(s, t);
	j->kind = WC_JOB_PLANES;
	j->layout = tc->layout;
	j->chunk_symbols = CHUNK;
	j->tables = tc->tabs;
	j->ntables = tc->layout.nplanes;
	j->table_key = s->id;
	j->dhash = XXH3_64bits(tc->data, tc->nbytes);
}
static void real_retain(wc_tile_source *s) { atomic_fetch_add(&((real_source *)s)->refs, 1); }
static void real_release(wc_tile_source *s) { atomic_fetch_sub(&((real_source *)s)->refs, 1); }

static const wc_tile_source_ops real_ops = {
	real_ntiles, real_dsize, real_csize, real_read, real_describe, real_retain, real_release, NULL,
};

/* Drop src's tiles, flip a bit of tile t's payload, check that a get of it
 * fails as corrupt with a reason naming the tile and logs one error, then
 * mend the payload. */
static void get_damaged_tile(wc_cache *c, real_source *src, uint32_t t)
{
	tile_case *tc = &src->tc[t];
	wc_cache_drop_source(c, src->base.id);
	tc->payload[tc->len - 5] ^= 0x01;
	wc_tile_ref *r = NULL;
	capture_start();
	ck_assert_int_eq(wc_cache_get(c, &src->base, t, &r), WC_E_CORRUPT);
	wc_log_set_sink(NULL, NULL);
	ck_assert_ptr_null(r);
	char want[64];
	snprintf(want, sizeof want, "tile %u of source %llu", t, (unsigned long long)src->base.id);
	ck_assert_msg(strstr(wc_last_detail(), want), "%s", wc_last_detail());
	ck_assert_int_eq(log_lines[WC_LOG_ERR], 1);
	tc->payload[tc->len - 5] ^= 0x01;
}

START_TEST(cache_over_cpu_backend_decodes_real_tiles)
{
	tile_case tc[NCASES];
	make_cases(tc);
	real_source src = { .base = { &real_ops, 5 }, .tc = tc };
	atomic_init(&src.refs, 1);
	wc_backend *be = NULL;
	ck_assert_int_eq(wc_backend_cpu_create(2, &be), WC_OK);
	wc_cache *c = NULL;
	ck_assert_int_eq(wc_cache_create(&(wc_cache_opts){ .budget_bytes = 1u << 20, .backend = be },
					 &c), WC_OK);
	wc_cache_prefetch(c, &src.base, 0, NCASES);
	for (int round = 0; round < 2; round++) {
		for (uint32_t t = 0; t < NCASES; t++) {
			wc_tile_ref *r = NULL;
			ck_assert_msg(wc_cache_get(c, &src.base, t, &r) == WC_OK, "%s", wc_last_detail());
			ck_assert_uint_eq(r->size, tc[t].nbytes);
			ck_assert(memcmp(r->data, tc[t].data, tc[t].nbytes) == 0);
			wc_cache_release(c, r);
		}
	}
	/* A damaged payload is an error with a reason, and is not cached. */
	get_damaged_tile(c, &src, 1);
	wc_tile_ref *r = NULL;
	ck_assert_int_eq(wc_cache_get(c, &src.base, 1, &r), WC_OK);
	ck_assert(memcmp(r->data, tc[1].data, tc[1].nbytes) == 0);
	wc_cache_release(c, r);
	wc_cache_destroy(c);
	wc_backend_destroy(be);
	ck_assert_int_eq(atomic_load(&src.refs), 1);
	for (int i = 0; i < NCASES; i++)
		tile_case_free(&tc[i]);
}
END_TEST

/* decode_misses_on_caller: a reader's miss that no dispatcher has taken is
 * decoded on the CPU (the reader's thread and the shared CPU backend's idle
 * threads), while the backend is stuck; prefetches
 * still go to the backend, and a damaged tile is still an error. */
START_TEST(cache_decodes_untaken_misses_on_the_caller)
{
	tile_case tc[NCASES];
	make_cases(tc);
	real_source src = { .base = { &real_ops, 6 }, .tc = tc };
	atomic_init(&src.refs, 1);
	fake_backend fb; /* real payloads would be "corrupt" to it: it must not see these */
	fake_backend_init(&fb, 4, 1);
	atomic_store(&fb.gate, 1); /* the backend's one dispatcher never comes back */
	wc_cache *c = NULL;
	ck_assert_int_eq(wc_cache_create(&(wc_cache_opts){ .budget_bytes = 1u << 20, .backend = &fb.base,
							   .decode_misses_on_caller = true },
					 &c), WC_OK);
	/* tile 0 goes to the dispatcher, which blocks; tile 1 waits in the
	 * prefetch queue behind it */
	wc_cache_prefetch(c, &src.base, 0, 1);
	ck_assert_uint_eq(fake_wait_in_flight(&fb, 1), 1);
	wc_cache_prefetch(c, &src.base, 1, 1);
	for (uint32_t t = 1; t < NCASES; t++) { /* queued (1) and new (2..) misses */
		wc_tile_ref *r = NULL;
		ck_assert_msg(wc_cache_get(c, &src.base, t, &r) == WC_OK, "%s", wc_last_detail());
		ck_assert_uint_eq(r->size, tc[t].nbytes);
		ck_assert(memcmp(r->data, tc[t].data, tc[t].nbytes) == 0);
		wc_cache_release(c, r);
	}
	wc_cache_stats st;
	wc_cache_get_stats(c, &st);
	ck_assert_uint_eq(st.caller_decodes, NCASES - 1);
	ck_assert_uint_eq(st.decodes, NCASES - 1);
	ck_assert_uint_eq(atomic_load(&fb.calls), 1);
	/* A damaged payload: the error and its reason reach the caller. */
	get_damaged_tile(c, &src, 1);
	atomic_store(&fb.gate, 0); /* tile 0 fails in the fake backend: not our concern */
	wc_cache_destroy(c);
	ck_assert_int_eq(atomic_load(&src.refs), 1);
	for (int i = 0; i < NCASES; i++)
		tile_case_free(&tc[i]);
}
END_TEST

/* With the cache full, a miss decoded on its reader's thread takes the
 * buffer of the tile evicted for it, as a dispatcher's batch does: 48
 * misses of 256 KiB tiles under a 1 MiB budget map a handful of buffers,
 * not one each (each map costs an mmap, page faults and, when freed, an
 * munmap with its TLB shootdown). */
START_TEST(caller_decodes_reuse_evicted_buffers)
{
	tile_case tc[NCASES];
	make_cases(tc);
	real_source src = { .base = { &real_ops, 7 }, .tc = tc, .repeat = 48 };
	atomic_init(&src.refs, 1);
	fake_backend fb; /* never called: every miss is the caller's */
	fake_backend_init(&fb, 4, 1);
	wc_cache *c = NULL;
	ck_assert_int_eq(wc_cache_create(&(wc_cache_opts){ .budget_bytes = 1u << 20, .backend = &fb.base,
							   .decode_misses_on_caller = true },
					 &c), WC_OK);
	for (uint32_t t = 0; t < src.repeat; t++) {
		wc_tile_ref *r = NULL;
		ck_assert_msg(wc_cache_get(c, &src.base, t, &r) == WC_OK, "%s", wc_last_detail());
		ck_assert_uint_eq(r->size, tc[0].nbytes);
		ck_assert(memcmp(r->data, tc[0].data, tc[0].nbytes) == 0);
		wc_cache_release(c, r);
	}
	wc_cache_stats st;
	wc_cache_get_stats(c, &st);
	ck_assert_uint_eq(st.caller_decodes, src.repeat);
	ck_assert_uint_ge(st.evictions, src.repeat - 4);
	ck_assert_msg(st.buf_allocs <= 6, "%llu buffers mapped for %u misses",
		      (unsigned long long)st.buf_allocs, src.repeat);
	ck_assert_uint_eq(atomic_load(&fb.calls), 0);
	wc_cache_destroy(c);
	ck_assert_int_eq(atomic_load(&src.refs), 1);
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
	tcase_add_test(tc, cpu_splits_lone_tiles);
	tcase_add_test(tc, cuda_without_plugin_fails_cleanly_and_auto_uses_cpu);
	tcase_add_test(tc, failed_backend_falls_back_to_cpu);
	tcase_add_test(tc, warm_up_runs_every_call_and_reports_failures);
	tcase_add_test(tc, cache_over_cpu_backend_decodes_real_tiles);
	tcase_add_test(tc, cache_decodes_untaken_misses_on_the_caller);
	tcase_add_test(tc, caller_decodes_reuse_evicted_buffers);
#ifdef FAKE_PLUGIN_DIR
	tcase_add_test(tc, cuda_plugin_is_loaded_and_used);
#endif
	suite_add_tcase(su, tc);
	return check_run(su);
}
