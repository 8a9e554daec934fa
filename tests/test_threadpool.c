/* test_threadpool.c - the decode thread pool: every iteration of a loop runs
 * exactly once, loops from several callers at once, and a pool of no workers;
 * the default thread count (wc_cpu_count) follows the affinity mask. */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "check_run.h"
#include "core/limits.h"
#include "engine/threadpool.h"

typedef struct counts {
	atomic_int *hits;
	atomic_int calls;
} counts;

static void count_one(void *ctx, size_t i)
{
	counts *c = ctx;
	atomic_fetch_add(&c->hits[i], 1);
	atomic_fetch_add(&c->calls, 1);
}

static void run_and_check(wc_threadpool *p, size_t n)
{
	counts c = { calloc(n ? n : 1, sizeof(atomic_int)), 0 };
	wc_threadpool_run(p, count_one, &c, n);
	ck_assert_int_eq(atomic_load(&c.calls), (int)n);
	for (size_t i = 0; i < n; i++)
		ck_assert_int_eq(atomic_load(&c.hits[i]), 1);
	free(c.hits);
}

START_TEST(each_iteration_runs_once)
{
	for (unsigned threads = 0; threads <= 3; threads++) {
		wc_threadpool *p = NULL;
		ck_assert_int_eq(wc_threadpool_create(threads, &p), WC_OK);
		ck_assert_uint_eq(wc_threadpool_threads(p), threads);
		run_and_check(p, 0);
		run_and_check(p, 1);
		run_and_check(p, 2);
		run_and_check(p, 1000);
		wc_threadpool_destroy(p);
	}
}
END_TEST

static void *caller_main(void *arg)
{
	wc_threadpool *p = arg;
	for (int r = 0; r < 50; r++)
		run_and_check(p, (size_t)(r % 7) * 13 + 1);
	return NULL;
}

START_TEST(several_callers_at_once)
{
	wc_threadpool *p = NULL;
	ck_assert_int_eq(wc_threadpool_create(2, &p), WC_OK);
	pthread_t th[6];
	for (int i = 0; i < 6; i++)
		pthread_create(&th[i], NULL, caller_main, p);
	for (int i = 0; i < 6; i++)
		pthread_join(th[i], NULL);
	wc_threadpool_destroy(p);
}
END_TEST

/* taskset -c N: default thread counts must not oversubscribe the CPUs a
 * process was given (runs in check's forked child, so the mask is its own). */
START_TEST(cpu_count_follows_affinity)
{
	const unsigned all = wc_cpu_count();
	ck_assert_uint_ge(all, 1);
	cpu_set_t set;
	ck_assert_int_eq(sched_getaffinity(0, sizeof set, &set), 0);
	ck_assert_uint_le(all, (unsigned)CPU_COUNT(&set));
	int first = -1, second = -1;
	for (int c = 0; c < CPU_SETSIZE && second < 0; c++)
		if (CPU_ISSET(c, &set)) {
			if (first < 0)
				first = c;
			else
				second = c;
		}
	ck_assert_int_ge(first, 0);
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(first, &one);
	ck_assert_int_eq(sched_setaffinity(0, sizeof one, &one), 0);
	ck_assert_uint_eq(wc_cpu_count(), 1);
	if (second >= 0) {
		CPU_SET(second, &one);
		ck_assert_int_eq(sched_setaffinity(0, sizeof one, &one), 0);
		ck_assert_uint_eq(wc_cpu_count(), all >= 2 ? 2 : 1);
	}
	ck_assert_int_eq(sched_setaffinity(0, sizeof set, &set), 0);
	ck_assert_uint_eq(wc_cpu_count(), all);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("threadpool");
	TCase *tc = tcase_create("threadpool");
	tcase_add_test(tc, each_iteration_runs_once);
	tcase_add_test(tc, several_callers_at_once);
	tcase_add_test(tc, cpu_count_follows_affinity);
	suite_add_tcase(s, tc);
	return check_run(s);
}
