/*
 * units.c - resident sets grouped into units that are decoded ahead of their
 * use into two scratch buffers (wcodec_cuda.h, wcodec_cuda_units_*): the
 * schedule of a model whose packed weights are decoded block by block
 * (python/wcodec/packed_cuda.py). It lives here, not in Python, because it
 * runs twice per unit of every token step, on the host's critical path
 * at small batches: a unit's two hooks take about 30 us of host time with
 * the schedule here, 60 us with it in Python over torch's stream and event
 * objects (docs/BENCHMARKS.md, "Designs tried and dropped").
 *
 * Buffer states: owner (the unit decoded or being decoded into it, or
 * none) and `done`, the event after which its last reader or writer is
 * finished (a unit's end on its stream, or a decode ahead that was not
 * wanted). A unit's begin waits for the decode ahead when it was this
 * unit, else decodes it now on the caller's stream into a free buffer
 * that fits, then decodes the unit that followed it last time into the
 * other buffer on the schedule's stream, after that buffer's `done`.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "resident_impl.h"

#define EXPORT __attribute__((visibility("default")))
#define NONE UINT32_MAX

typedef struct unit {
	wcodec_cuda_resident **sets;
	uint64_t *offsets; /* of each set in the buffer */
	size_t nsets;
	uint64_t bytes;
	uint32_t next;     /* expected after this unit, or NONE */
	int running;       /* buffer while it runs (-1: the caller's own), or -2 */
	cudaStream_t stream; /* it runs on */
} unit;

struct wcodec_cuda_units {
	int gpu;
	uint8_t *buf[2];
	uint64_t bytes[2];
	uint32_t owner[2];
	cudaEvent_t ended[2], ready[2];
	cudaEvent_t done[2]; /* ended[k], ready[k] or NULL */
	cudaStream_t ahead;  /* decodes ahead run here */
	uint32_t pending, pending_buf; /* the decode ahead, or NONE */
	uint32_t last;
	unit *units;
	size_t nunits, cap;
	uint8_t *work[2];    /* shared by the sets decoding into buffer k: */
	size_t work_bytes;   /* their decodes are ordered by done[k] */
	uint64_t decoded, decoded_ahead;
	pthread_mutex_t mu;
};

static wc_err cuda_err(const char *what, cudaError_t e)
{
	return wc_fail(WC_E_BACKEND, "cuda units: %s: %s", what, cudaGetErrorString(e));
}

EXPORT wc_err wcodec_cuda_units_create(int gpu, void *buf0, size_t bytes0, void *buf1, size_t bytes1,
				       wcodec_cuda_units **out)
{
	*out = NULL;
	if (!buf0 || !buf1 || ((uintptr_t)buf0 | (uintptr_t)buf1) & (OUT_ALIGN - 1u))
		return wc_fail(WC_E_INVAL, "cuda units: scratch buffers must be %u-byte aligned", OUT_ALIGN);
	wcodec_cuda_units *s = calloc(1, sizeof *s);
	if (!s)
		return wc_fail(WC_E_NOMEM, "cuda units");
	s->gpu = gpu;
	s->buf[0] = buf0, s->buf[1] = buf1;
	s->bytes[0] = bytes0, s->bytes[1] = bytes1;
	s->owner[0] = s->owner[1] = s->pending = s->last = NONE;
	pthread_mutex_init(&s->mu, NULL);
	int prev = gpu;
	cudaGetDevice(&prev);
	cudaError_t ce = cudaSetDevice(gpu);
	for (unsigned k = 0; k < 2 && ce == cudaSuccess; k++) {
		ce = cudaEventCreateWithFlags(&s->ended[k], cudaEventDisableTiming);
		if (ce == cudaSuccess)
			ce = cudaEventCreateWithFlags(&s->ready[k], cudaEventDisableTiming);
	}
	if (ce == cudaSuccess)
		ce = cudaStreamCreateWithFlags(&s->ahead, cudaStreamNonBlocking);
	cudaSetDevice(prev);
	if (ce != cudaSuccess) {
		wcodec_cuda_units_free(s);
		return cuda_err("events and stream", ce);
	}
	*out = s;
	return WC_OK;
}

EXPORT wc_err wcodec_cuda_units_add(wcodec_cuda_units *s, wcodec_cuda_resident *const *sets,
				    const uint64_t *offsets, size_t n, uint32_t *id)
{
	if (s->nunits >= NONE - 1u)
		return wc_fail(WC_E_INVAL, "cuda units: too many units");
	uint64_t bytes = 0;
	for (size_t k = 0; k < n; k++) {
		if (!sets[k] || sets[k]->gpu != s->gpu || (offsets[k] & (OUT_ALIGN - 1u)))
			return wc_fail(WC_E_INVAL, "cuda units: set %zu of a unit (its GPU, or offset %llu)", k,
				       (unsigned long long)offsets[k]);
		const uint64_t end = offsets[k] + sets[k]->out_bytes;
		bytes = end > bytes ? end : bytes;
	}
	if (s->work[0]) /* work buffers are sized once, at the first begin */
		return wc_fail(WC_E_INVAL, "cuda units: a unit added after the first begin");
	for (size_t k = 0; k < n; k++)
		if (ALIGN16(sets[k]->work_bytes) > s->work_bytes)
			s->work_bytes = ALIGN16(sets[k]->work_bytes);
	if (s->nunits == s->cap) {
		size_t c = s->cap ? 2 * s->cap : 64;
		unit *nu = realloc(s->units, c * sizeof *nu);
		if (!nu)
			return wc_fail(WC_E_NOMEM, "cuda units");
		s->units = nu;
		s->cap = c;
	}
	unit *u = &s->units[s->nunits];
	memset(u, 0, sizeof *u);
	u->sets = malloc((n ? n : 1) * sizeof *u->sets);
	u->offsets = malloc((n ? n : 1) * sizeof *u->offsets);
	if (!u->sets || !u->offsets) {
		free(u->sets);
		free(u->offsets);
		return wc_fail(WC_E_NOMEM, "cuda units");
	}
	if (n) {
		memcpy(u->sets, sets, n * sizeof *sets);
		memcpy(u->offsets, offsets, n * sizeof *offsets);
	}
	u->nsets = n;
	u->bytes = bytes;
	u->next = NONE;
	u->running = -2;
	*id = (uint32_t)s->nunits++;
	return WC_OK;
}

EXPORT wc_err wcodec_cuda_units_set_next(wcodec_cuda_units *s, uint32_t id, uint32_t next)
{
	if (id >= s->nunits || (next >= s->nunits && next != NONE))
		return wc_fail(WC_E_RANGE, "cuda units: unit %u or %u", id, next);
	s->units[id].next = next;
	return WC_OK;
}

/* Enqueue unit u's decode into buffer k on stream. */
static wc_err decode(wcodec_cuda_units *s, const unit *u, unsigned k, cudaStream_t stream)
{
	if (!s->work[0] && s->work_bytes) {
		for (unsigned b = 0; b < 2; b++) {
			cudaError_t ce = cudaMalloc((void **)&s->work[b], s->work_bytes);
			if (ce != cudaSuccess)
				return cuda_err("work buffers", ce);
		}
	}
	for (size_t j = 0; j < u->nsets; j++) {
		wc_err e = wcodec_cuda_resident_decode_work(u->sets[j], s->buf[k] + u->offsets[j],
							    s->bytes[k] - u->offsets[j], s->work[k], s->work_bytes,
							    stream);
		if (e != WC_OK)
			return e;
	}
	s->decoded++;
	return WC_OK;
}

/* A buffer holding `bytes` that no unit owns, other than `avoid`; -1 if none. */
static int free_buffer(const wcodec_cuda_units *s, uint64_t bytes, int avoid)
{
	for (int k = 0; k < 2; k++)
		if (s->owner[k] == NONE && k != avoid && s->bytes[k] >= bytes)
			return k;
	return -1;
}

/* Decode the unit expected after `id` ahead, into a free buffer other than
 * the one `id` runs in. */
static wc_err decode_ahead(wcodec_cuda_units *s, uint32_t id, int busy)
{
	const uint32_t nx = s->units[id].next;
	if (nx == NONE || nx == id || s->units[nx].running != -2)
		return WC_OK;
	const int k = free_buffer(s, s->units[nx].bytes, busy);
	if (k < 0)
		return WC_OK;
	cudaError_t ce = s->done[k] ? cudaStreamWaitEvent(s->ahead, s->done[k], 0) : cudaSuccess;
	if (ce != cudaSuccess)
		return cuda_err("wait", ce);
	wc_err e = decode(s, &s->units[nx], (unsigned)k, s->ahead);
	if (e != WC_OK)
		return e;
	if ((ce = cudaEventRecord(s->ready[k], s->ahead)) != cudaSuccess)
		return cuda_err("event", ce);
	s->owner[k] = nx;
	s->pending = nx, s->pending_buf = (uint32_t)k;
	return WC_OK;
}

static wc_err begin_locked(wcodec_cuda_units *s, uint32_t id, cudaStream_t stream, int *buffer)
{
	unit *u = &s->units[id];
	int k = -1;
	cudaError_t ce = cudaSuccess;
	const uint32_t p = s->pending;
	s->pending = NONE;
	if (p == id) {
		k = (int)s->pending_buf;
		ce = cudaStreamWaitEvent(stream, s->ready[k], 0);
		s->decoded_ahead++;
	} else {
		if (p != NONE) { /* decoded ahead for nothing: free once that decode is done */
			s->owner[s->pending_buf] = NONE;
			s->done[s->pending_buf] = s->ready[s->pending_buf];
		}
		k = free_buffer(s, u->bytes, -1);
		if (k >= 0) {
			if (s->done[k])
				ce = cudaStreamWaitEvent(stream, s->done[k], 0);
			if (ce == cudaSuccess) {
				wc_err e = decode(s, u, (unsigned)k, stream);
				if (e != WC_OK)
					return e;
				s->owner[k] = id;
			}
		}
	}
	if (ce != cudaSuccess)
		return cuda_err("wait", ce);
	u->running = k;
	u->stream = stream;
	*buffer = k;
	if (s->last != NONE && s->last != id)
		s->units[s->last].next = id;
	s->last = id;
	return decode_ahead(s, id, k);
}

EXPORT wc_err wcodec_cuda_units_begin(wcodec_cuda_units *s, uint32_t id, cudaStream_t stream, int *buffer)
{
	*buffer = -1;
	if (id >= s->nunits)
		return wc_fail(WC_E_RANGE, "cuda units: no unit %u", id);
	pthread_mutex_lock(&s->mu);
	int prev = s->gpu;
	cudaGetDevice(&prev);
	if (prev != s->gpu)
		cudaSetDevice(s->gpu);
	wc_err e = begin_locked(s, id, stream, buffer);
	if (prev != s->gpu)
		cudaSetDevice(prev);
	pthread_mutex_unlock(&s->mu);
	return e;
}

EXPORT wc_err wcodec_cuda_units_end(wcodec_cuda_units *s, uint32_t id)
{
	if (id >= s->nunits)
		return wc_fail(WC_E_RANGE, "cuda units: no unit %u", id);
	pthread_mutex_lock(&s->mu);
	unit *u = &s->units[id];
	const int k = u->running;
	u->running = -2;
	wc_err e = WC_OK;
	if (k >= 0) {
		s->owner[k] = NONE;
		cudaError_t ce = cudaEventRecord(s->ended[k], u->stream);
		s->done[k] = ce == cudaSuccess ? s->ended[k] : s->done[k];
		if (ce != cudaSuccess)
			e = cuda_err("event", ce);
	}
	pthread_mutex_unlock(&s->mu);
	return e;
}

EXPORT void wcodec_cuda_units_counts(wcodec_cuda_units *s, uint64_t *decoded, uint64_t *ahead)
{
	pthread_mutex_lock(&s->mu);
	*decoded = s->decoded;
	*ahead = s->decoded_ahead;
	pthread_mutex_unlock(&s->mu);
}

EXPORT size_t wcodec_cuda_units_device_bytes(wcodec_cuda_units *s)
{
	pthread_mutex_lock(&s->mu);
	size_t b = s->work[0] ? 2 * s->work_bytes : 0;
	pthread_mutex_unlock(&s->mu);
	return b;
}

EXPORT void wcodec_cuda_units_free(wcodec_cuda_units *s)
{
	if (!s)
		return;
	int prev = s->gpu;
	cudaGetDevice(&prev);
	cudaSetDevice(s->gpu);
	if (s->ahead) {
		cudaStreamSynchronize(s->ahead);
		cudaStreamDestroy(s->ahead);
	}
	for (unsigned k = 0; k < 2; k++) {
		if (s->ended[k]) {
			cudaEventSynchronize(s->ended[k]);
			cudaEventDestroy(s->ended[k]);
		}
		if (s->ready[k])
			cudaEventDestroy(s->ready[k]);
	}
	cudaFree(s->work[0]);
	cudaFree(s->work[1]);
	cudaSetDevice(prev);
	for (size_t i = 0; i < s->nunits; i++) {
		free(s->units[i].sets);
		free(s->units[i].offsets);
	}
	free(s->units);
	pthread_mutex_destroy(&s->mu);
	free(s);
}
