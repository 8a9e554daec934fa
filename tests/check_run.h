/* check_run.h - run a check suite and turn its result into an exit status,
 * the end of every unit test's main(). */
#ifndef WC_TESTS_CHECK_RUN_H
#define WC_TESTS_CHECK_RUN_H

#include <check.h>

/* Runs every test of s (each in a forked child, check's default), frees
 * the runner and the suite, and returns 0 if all passed, else 1. */
static inline int check_run(Suite *s)
{
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

#endif /* WC_TESTS_CHECK_RUN_H */
