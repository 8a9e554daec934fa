/* test_error.c - the error type (descriptions, errno mapping, per-thread
 * reasons) and the XXH3 checksum (core/hash.h). */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "core/hash.h"
#include "core/wc_error.h"

START_TEST(descriptions_cover_every_code)
{
	for (int e = 0; e < WC_E__COUNT; e++) {
		ck_assert_ptr_nonnull(wc_strerror((wc_err)e));
		ck_assert_str_ne(wc_strerror((wc_err)e), "unknown error");
	}
	ck_assert_str_eq(wc_strerror((wc_err)999), "unknown error");
}
END_TEST

START_TEST(errno_mapping)
{
	ck_assert_int_eq(wc_err_to_errno(WC_OK), 0);
	ck_assert_int_eq(wc_err_to_errno(WC_E_CORRUPT), EIO);
	ck_assert_int_eq(wc_err_to_errno(WC_E_FORMAT), EIO);
	ck_assert_int_eq(wc_err_to_errno(WC_E_BACKEND), EIO);
	ck_assert_int_eq(wc_err_to_errno(WC_E_NOMEM), ENOMEM);
	ck_assert_int_eq(wc_err_to_errno(WC_E_NOTFOUND), ENOENT);
}
END_TEST

static void *fail_in_thread(void *arg)
{
	(void)arg;
	wc_fail(WC_E_IO, "other thread");
	return NULL;
}

START_TEST(detail_is_per_thread)
{
	wc_clear_detail();
	ck_assert_int_eq(wc_fail(WC_E_FORMAT, "tile %u bad", 7u), WC_E_FORMAT);
	pthread_t t;
	pthread_create(&t, NULL, fail_in_thread, NULL);
	pthread_join(t, NULL);
	ck_assert_str_eq(wc_last_detail(), "tile 7 bad");
	wc_clear_detail();
	ck_assert_str_eq(wc_last_detail(), "");
}
END_TEST

static char captured[256];
static int captured_level;
static void capture(int level, const char *msg, void *ctx)
{
	(void)ctx;
	captured_level = level;
	strncpy(captured, msg, sizeof captured - 1);
}

START_TEST(fail_context_prefixes_the_reason)
{
	wc_fail(WC_E_CORRUPT, "checksum mismatch");
	ck_assert_int_eq(wc_fail_context(WC_E_CORRUPT, "tile %u", 7u), WC_E_CORRUPT);
	ck_assert_str_eq(wc_last_detail(), "tile 7: checksum mismatch");
	wc_fail_context(WC_E_FORMAT, "file %s", "a.wcodec");
	ck_assert_str_eq(wc_last_detail(), "file a.wcodec: tile 7: checksum mismatch");
}
END_TEST

START_TEST(log_sink_and_level)
{
	wc_log_set_sink(capture, NULL);
	wc_log_set_level(WC_LOG_WARN);
	captured[0] = 0;
	wc_log(WC_LOG_INFO, "hidden");
	ck_assert_str_eq(captured, "");
	wc_log(WC_LOG_ERR, "shown %d", 3);
	ck_assert_str_eq(captured, "shown 3");
	ck_assert_int_eq(captured_level, WC_LOG_ERR);
	wc_log_set_sink(NULL, NULL);
	wc_log_set_level(WC_LOG_INFO);
}
END_TEST

/* The dispatched XXH3-64 (AVX2 where the CPU has it) equals the linked
 * libxxhash's on every length class of the algorithm (0, 1-3, 4-8, 9-16,
 * 17-128, 129-240, long inputs over one and several stripes and blocks)
 * and at unaligned starts; and the known value of empty input. */
START_TEST(xxh3_matches_library)
{
	size_t cap = (1u << 20) + 64;
	uint8_t *buf = malloc(cap);
	ck_assert_ptr_nonnull(buf);
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < cap; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		buf[i] = (uint8_t)x;
	}
	ck_assert_uint_eq(wc_xxh3_64(NULL, 0), 0x2d06800538d394c2ull); /* XXH3_64bits of "" */
	for (size_t n = 0; n <= 1100; n++)
		for (size_t a = 0; a < 3; a++)
			ck_assert_msg(wc_xxh3_64(buf + a, n) == wc_xxh3_64_lib(buf + a, n), "n %zu offset %zu", n, a);
	const size_t big[] = {4095, 4096, 65536 + 7, 1u << 20};
	for (size_t k = 0; k < sizeof big / sizeof big[0]; k++)
		ck_assert_msg(wc_xxh3_64(buf + 1, big[k]) == wc_xxh3_64_lib(buf + 1, big[k]), "n %zu", big[k]);
	/* a change in the last byte changes the hash */
	uint64_t h = wc_xxh3_64(buf, 1u << 20);
	buf[(1u << 20) - 1] ^= 1;
	ck_assert_uint_ne(wc_xxh3_64(buf, 1u << 20), h);
	free(buf);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("error");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, descriptions_cover_every_code);
	tcase_add_test(tc, errno_mapping);
	tcase_add_test(tc, detail_is_per_thread);
	tcase_add_test(tc, xxh3_matches_library);
	tcase_add_test(tc, log_sink_and_level);
	tcase_add_test(tc, fail_context_prefixes_the_reason);
	suite_add_tcase(s, tc);
	return check_run(s);
}
