/* cuda_plugin.h - what the CUDA plugin's tests share: loading the plugin
 * from the build tree and running a suite in one process. */
#ifndef WC_TESTS_CUDA_PLUGIN_H
#define WC_TESTS_CUDA_PLUGIN_H

#include <check.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine/backend.h"

/* dlopen() the plugin: $WCODEC_CUDA_PLUGIN, else
 * $top_builddir/cuda/.libs/WC_CUDA_PLUGIN_NAME. NULL after a message on
 * stderr naming `test`. */
static inline void *cuda_plugin_open(const char *test)
{
	char path[1024];
	const char *env = getenv("WCODEC_CUDA_PLUGIN");
	const char *top = getenv("top_builddir");
	if (env)
		snprintf(path, sizeof path, "%s", env);
	else
		snprintf(path, sizeof path, "%s/cuda/.libs/" WC_CUDA_PLUGIN_NAME, top ? top : ".");
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		fprintf(stderr, "%s: cannot load %s: %s\n", test, path, dlerror());
	return h;
}

/* Run every test of s in this process (a CUDA context does not survive
 * fork()), free the runner; 0 if all passed, else 1. */
static inline int cuda_check_run(Suite *s)
{
	SRunner *sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

/* Run tests[0..n) as suite `name`, one case with a timeout of `timeout`
 * seconds (cuda_check_run); 0 if all passed, else 1. */
static inline int cuda_run_tests(const char *name, const TTest *const *tests, size_t n, double timeout)
{
	Suite *s = suite_create(name);
	TCase *tc = tcase_create(name);
	tcase_set_timeout(tc, timeout);
	for (size_t i = 0; i < n; i++)
		tcase_add_test(tc, tests[i]);
	suite_add_tcase(s, tc);
	return cuda_check_run(s);
}

#endif /* WC_TESTS_CUDA_PLUGIN_H */
