/* wcc_slots.c - staging slots for concurrent GPU decode calls (wcc_slots.h). */
#include "wcc_slots.h"

#include <string.h>

cudaError_t wcc_slots_init(wcc_slots *p, int gpu)
{
	memset(p, 0, sizeof *p);
	p->gpu = gpu;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->freed, NULL);
	cudaError_t e = cudaSetDevice(gpu);
	for (unsigned s = 0; s < WCC_SLOTS && e == cudaSuccess; s++) {
		e = cudaStreamCreateWithFlags(&p->slot[s].stream, cudaStreamNonBlocking);
		if (e == cudaSuccess)
			e = cudaEventCreateWithFlags(&p->slot[s].after, cudaEventDisableTiming);
	}
	return e;
}

void wcc_slots_destroy(wcc_slots *p)
{
	cudaSetDevice(p->gpu);
	for (unsigned s = 0; s < WCC_SLOTS; s++) {
		if (p->slot[s].stream)
			cudaStreamDestroy(p->slot[s].stream);
		if (p->slot[s].after)
			cudaEventDestroy(p->slot[s].after);
		cudaFree(p->slot[s].d_buf);
		cudaFreeHost(p->slot[s].h_buf);
	}
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->freed);
}

wcc_slot *wcc_slots_take(wcc_slots *p)
{
	pthread_mutex_lock(&p->mu);
	wcc_slot *s = NULL;
	while (!s) {
		for (unsigned q = 0; q < WCC_SLOTS && !s; q++)
			if (!p->slot[q].busy)
				s = &p->slot[q];
		if (!s)
			pthread_cond_wait(&p->freed, &p->mu);
	}
	s->busy = 1;
	pthread_mutex_unlock(&p->mu);
	return s;
}

void wcc_slots_give(wcc_slots *p, wcc_slot *s)
{
	pthread_mutex_lock(&p->mu);
	s->busy = 0;
	pthread_cond_signal(&p->freed);
	pthread_mutex_unlock(&p->mu);
}

cudaError_t wcc_slot_grow(wcc_slot *s, size_t dbytes, size_t hbytes)
{
	if (s->d_cap < dbytes) {
		cudaFree(s->d_buf);
		s->d_buf = NULL;
		s->d_cap = 0;
		if (cudaMalloc((void **)&s->d_buf, dbytes + dbytes / 4) != cudaSuccess)
			return cudaErrorMemoryAllocation;
		s->d_cap = dbytes + dbytes / 4;
	}
	if (s->h_cap < hbytes) {
		cudaFreeHost(s->h_buf);
		s->h_buf = NULL;
		s->h_cap = 0;
		if (cudaMallocHost((void **)&s->h_buf, hbytes + hbytes / 4) != cudaSuccess)
			return cudaErrorMemoryAllocation;
		s->h_cap = hbytes + hbytes / 4;
	}
	return cudaSuccess;
}
