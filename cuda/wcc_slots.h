/*
 * wcc_slots.h - staging slots for GPU decode calls made from several host
 * threads at once (the image loaders' decoding threads): each slot a
 * stream, an event, a device buffer and a page-locked host buffer grown as
 * calls need them. A call takes a free slot, waiting for one, and gives it
 * back. The bottom both .qvq paths build on (vq_decode.cu, tx_place.c).
 */
#ifndef WCC_SLOTS_H
#define WCC_SLOTS_H

#include <cuda_runtime.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define WCC_SLOTS 8u /* calls in flight at once (one per loader thread) */

typedef struct wcc_slot {
	cudaStream_t stream;
	cudaEvent_t after; /* the caller's stream's point the slot's work waits for */
	uint8_t *d_buf, *h_buf; /* device buffer; page-locked host buffer */
	size_t d_cap, h_cap;
	int busy;
} wcc_slot;

typedef struct wcc_slots {
	int gpu;
	pthread_mutex_t mu;
	pthread_cond_t freed;
	wcc_slot slot[WCC_SLOTS];
} wcc_slots;

/* Streams and events of every slot on GPU gpu (the current device is set
 * to it). Returns cudaSuccess or the error; wcc_slots_destroy either way. */
cudaError_t wcc_slots_init(wcc_slots *p, int gpu);
void wcc_slots_destroy(wcc_slots *p);

/* A free slot, waiting for one; wcc_slots_give returns it. */
wcc_slot *wcc_slots_take(wcc_slots *p);
void wcc_slots_give(wcc_slots *p, wcc_slot *s);

/* At least dbytes of device and hbytes of page-locked host buffer in s (a
 * quarter more when grown). Returns cudaSuccess or
 * cudaErrorMemoryAllocation. */
cudaError_t wcc_slot_grow(wcc_slot *s, size_t dbytes, size_t hbytes);

#ifdef __cplusplus
}
#endif

#endif /* WCC_SLOTS_H */
