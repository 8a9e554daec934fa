/* version.c - libraries and CPU features for --version (version.h). */
#include "core/version.h"

#include <pthread.h>
#include <stdio.h>

#include <jansson.h>
#include <xxhash.h>
#include <zstd.h>

#include "core/cpu.h"

static char versions[128];
static pthread_once_t versions_once = PTHREAD_ONCE_INIT;

static void versions_fill(void)
{
	unsigned x = XXH_versionNumber();
	snprintf(versions, sizeof versions, "zstd %s, jansson %s, libxxhash %u.%u.%u", ZSTD_versionString(),
		 jansson_version_str(), x / 10000, x / 100 % 100, x % 100);
}

const char *wc_library_versions(void)
{
	pthread_once(&versions_once, versions_fill);
	return versions;
}

const char *wc_cpu_level(void)
{
	unsigned f = wc_cpu_features();
	if (f & WC_CPU_AVX512VBMI)
		return "AVX-512 VBMI";
	if (f & WC_CPU_AVX512F)
		return "AVX-512";
	if (f & WC_CPU_AVX2)
		return "AVX2";
	return "none (scalar code)";
}
