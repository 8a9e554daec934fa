/* providers.c - the table of compiled-in providers (provider.h). */
#include "fuse/provider.h"

#include <string.h>

const wcfs_provider *const wcfs_providers[] = {
	&wcfs_provider_wcodec,
	&wcfs_provider_qvq,
	NULL,
};

const wcfs_provider *wcfs_provider_for_source(const char *name)
{
	size_t n = strlen(name);
	for (const wcfs_provider *const *p = wcfs_providers; *p; p++) {
		size_t s = strlen((*p)->src_suffix);
		if (n > s && memcmp(name + n - s, (*p)->src_suffix, s) == 0)
			return *p;
	}
	return NULL;
}
