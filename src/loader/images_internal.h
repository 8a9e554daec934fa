/* images_internal.h - the image set object, shared by the reader
 * (images.c) and resident archives (images_resident.c); not public. */
#ifndef WC_LOADER_IMAGES_INTERNAL_H
#define WC_LOADER_IMAGES_INTERNAL_H

#include <pthread.h>

#include "engine/backend.h"
#include "engine/threadpool.h"
#include "loader/images.h"
#include "qvq/qvq.h"

/* The CUDA plugin's resident-archive decode (cuda/wcodec_cuda.h). */
typedef wc_err (*wcodec_tx_resident_launch_fn)(void *r, const int64_t *idx, size_t n, int chw, int f32,
					       const float scale[3], const float bias[3], void *out, size_t out_stride,
					       void *stream, uint64_t *ticket);
typedef wc_err (*wcodec_tx_resident_wait_fn)(void *r, uint64_t ticket);

/* A batch's buffer (payloads, then decoded tiles), kept for the next call:
 * mapping and faulting in tens of MiB per batch cost more than decoding
 * them (page clearing and faults were half the time). */
typedef struct batch_buf {
	uint8_t *p;
	size_t cap;
	struct batch_buf *next;
} batch_buf;

struct wc_image_set {
	wc_qvq *q;
	wc_backend *be;
	wc_threadpool *readers; /* payload reads of a batch, in parallel; started by the first decode */
	char *path;
	pthread_mutex_t lock; /* the free buffers, starting the readers */
	batch_buf *free;
	unsigned nfree;
	/* a resident archive (images_resident.c): the plugin's handle and calls */
	void *resident;
	wcodec_tx_resident_launch_fn resident_launch;
	wcodec_tx_resident_wait_fn resident_wait;
	void (*resident_free)(void *r);
};

#endif /* WC_LOADER_IMAGES_INTERNAL_H */
