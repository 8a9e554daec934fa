/* codec_scratch.c - per-thread memory of the decoder (plane scratch,
 * decoding tables, zstd context). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <zstd.h>

#include "codec/codec_internal.h"

/* Everything a decoding thread keeps between tiles; freed at thread exit by
 * the key's destructor, so pool threads never leak it. */
typedef struct thread_mem {
	void *buf[WC_SCRATCH_SLOTS];
	size_t cap[WC_SCRATCH_SLOTS];
	struct {
		int valid;
		wc_freqtab ft;
		wc_rans_dtab dt;
	} dtab[WC_DTAB_CACHE_ENTRIES];
	ZSTD_DCtx *dctx;
} thread_mem;

static pthread_key_t mem_key;
static pthread_once_t mem_once = PTHREAD_ONCE_INIT;
static int mem_key_ok;

static void mem_free(void *p)
{
	thread_mem *m = p;
	if (!m)
		return;
	for (int i = 0; i < WC_SCRATCH_SLOTS; i++)
		free(m->buf[i]);
	ZSTD_freeDCtx(m->dctx);
	free(m);
}

static void mem_key_init(void)
{
	mem_key_ok = pthread_key_create(&mem_key, mem_free) == 0;
}

static thread_mem *mem_get(void)
{
	pthread_once(&mem_once, mem_key_init);
	if (!mem_key_ok)
		return NULL;
	thread_mem *m = pthread_getspecific(mem_key);
	if (m)
		return m;
	m = calloc(1, sizeof *m);
	if (m && pthread_setspecific(mem_key, m) != 0) {
		free(m);
		m = NULL;
	}
	return m;
}

void *wc_scratch_get(int slot, size_t bytes)
{
	thread_mem *m = mem_get();
	if (!m || slot < 0 || slot >= WC_SCRATCH_SLOTS)
		return NULL;
	if (m->cap[slot] < bytes || !m->buf[slot]) {
		/* 64-byte aligned, padded, so vector loops may over-read a little. */
		size_t cap = (bytes + 4095) & ~(size_t)4095;
		void *p = NULL;
		if (posix_memalign(&p, 64, cap + 64) != 0)
			return NULL;
		free(m->buf[slot]);
		m->buf[slot] = p;
		m->cap[slot] = cap;
	}
	return m->buf[slot];
}

const wc_rans_dtab *wc_dtab_cached(const wc_freqtab *ft, unsigned which)
{
	thread_mem *m = mem_get();
	if (!m)
		return NULL;
	which %= WC_DTAB_CACHE_ENTRIES;
	/* Comparing 512 bytes is far cheaper than rebuilding 16 KiB. */
	if (!m->dtab[which].valid || memcmp(&m->dtab[which].ft, ft, sizeof *ft) != 0) {
		m->dtab[which].ft = *ft;
		wc_rans_dtab_build(ft, &m->dtab[which].dt);
		m->dtab[which].valid = 1;
	}
	return &m->dtab[which].dt;
}

struct ZSTD_DCtx_s *wc_zstd_dctx(void)
{
	thread_mem *m = mem_get();
	if (!m)
		return NULL;
	if (!m->dctx)
		m->dctx = ZSTD_createDCtx();
	return m->dctx;
}
