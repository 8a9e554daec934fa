/*
 * wcc_pinned.c - which host memory is page-locked (wcc_impl.h): the ranges
 * the plugin allocated itself (wcodec_cuda_host_alloc), known without
 * asking the driver, and the driver's answer for any other address.
 *
 * Why a registry: the batch pipeline asks for every job whether its payload
 * and output can be DMAed directly; two cudaPointerGetAttributes calls per
 * job took about as long as the GPU's decode of a batch of 512 small image
 * tiles.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "wcc_impl.h"

typedef struct range {
	uintptr_t lo, hi; /* [lo, hi) */
} range;

static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;
static range *ranges; /* sorted by lo, disjoint */
static size_t nranges, cap;

/* Index of the first range with lo > p. Called with lock held. */
static size_t upper(uintptr_t p)
{
	size_t a = 0, b = nranges;
	while (a < b) {
		size_t m = a + (b - a) / 2;
		if (ranges[m].lo <= p)
			a = m + 1;
		else
			b = m;
	}
	return a;
}

void wcc_pinned_add(const void *p, size_t n)
{
	if (!p || !n)
		return;
	pthread_rwlock_wrlock(&lock);
	if (nranges == cap) {
		size_t c = cap ? 2 * cap : 64;
		range *r = realloc(ranges, c * sizeof *r);
		if (!r) { /* not known: the driver is asked instead */
			pthread_rwlock_unlock(&lock);
			return;
		}
		ranges = r;
		cap = c;
	}
	size_t i = upper((uintptr_t)p);
	memmove(ranges + i + 1, ranges + i, (nranges - i) * sizeof *ranges);
	ranges[i] = (range){(uintptr_t)p, (uintptr_t)p + n};
	nranges++;
	pthread_rwlock_unlock(&lock);
}

void wcc_pinned_remove(const void *p)
{
	pthread_rwlock_wrlock(&lock);
	size_t i = upper((uintptr_t)p);
	if (i > 0 && ranges[i - 1].lo == (uintptr_t)p) {
		memmove(ranges + i - 1, ranges + i, (nranges - i) * sizeof *ranges);
		nranges--;
	}
	pthread_rwlock_unlock(&lock);
}

static int known(const void *p, size_t n)
{
	int yes = 0;
	pthread_rwlock_rdlock(&lock);
	size_t i = upper((uintptr_t)p);
	if (i > 0 && (uintptr_t)p + n <= ranges[i - 1].hi)
		yes = 1;
	pthread_rwlock_unlock(&lock);
	return yes;
}

int wcc_is_pinned(const void *p, size_t n)
{
	struct cudaPointerAttributes a;
	if (!p || n == 0)
		return 0;
	if (known(p, n))
		return 1;
	for (int end = 0; end < 2; end++) {
		const void *q = end ? (const uint8_t *)p + n - 1 : p;
		if (cudaPointerGetAttributes(&a, q) != cudaSuccess) {
			cudaGetLastError();
			return 0;
		}
		if (a.type != cudaMemoryTypeHost)
			return 0;
	}
	return 1;
}
