/* providers.c - the table of compiled-in providers (provider.h). */
#include "fuse/provider.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

wc_err wcfs_sorted_find(const char *name, uint32_t n, const char *(*name_at)(const void *ctx, uint32_t k),
			const void *ctx, uint32_t *k)
{
	uint32_t lo = 0, hi = n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		int c = strcmp(name_at(ctx, mid), name);
		if (c == 0) {
			*k = mid;
			return WC_OK;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return WC_E_NOTFOUND;
}

int wcfs_provider_stable_path(const wcfs_provider_ctx *ctx, const char *path, char *buf, size_t cap,
			      char *real, size_t real_cap)
{
	if (real_cap < 2)
		return -1;
	ssize_t k = readlink(path, real, real_cap - 1);
	if (k <= 0)
		return -1;
	real[k] = '\0';
	if (ctx->root_fd < 0 || !ctx->source)
		return -1;
	size_t s = strlen(ctx->source);
	while (s > 1 && ctx->source[s - 1] == '/')
		s--;
	const char *rel = real + s + (s > 1);
	if ((size_t)k <= s + 1 || strncmp(real, ctx->source, s) != 0 || (s > 1 && real[s] != '/'))
		return -1;
	int w = snprintf(buf, cap, "/proc/self/fd/%d/%s", ctx->root_fd, rel);
	return w > 0 && (size_t)w < cap ? 0 : -1;
}
