/* test_error.c - the error type: descriptions, errno mapping, per-thread reasons. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>

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

int main(void)
{
	Suite *s = suite_create("error");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, descriptions_cover_every_code);
	tcase_add_test(tc, errno_mapping);
	tcase_add_test(tc, detail_is_per_thread);
	tcase_add_test(tc, log_sink_and_level);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
