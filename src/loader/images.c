/* images.c - the images of a .qvq archive into caller memory (images.h). */
#include "loader/images.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/limits.h"
#include "engine/backend.h"
#include "engine/threadpool.h"
#include "qvq/qvq.h"
#include "qvq/qvq_job.h"
#include "loader/images_internal.h"

/* The CUDA plugin's wcodec_cuda_vq_place (cuda/wcodec_cuda.h), reached by
 * name so that the library knows nothing of CUDA. */
typedef wc_err (*wcodec_vq_place_fn)(wc_backend *be, wc_tile_job *jobs, size_t n, const void *dsts,
				     size_t ndst, void *stream);

/* Bytes held on the host (decoded tiles; payloads on the GPU path) and
 * tiles a batch may take (one tile at least). */
#define BATCH_BYTES (64u << 20)
#define BATCH_TILES 1024u

/* Buffers kept at most (one per thread decoding at once, typically). */
#define KEEP_BUFS 8

/* Threads reading a batch's payloads: a shuffled batch is hundreds of
 * small reads from the page cache, each checked against its XXH3-64, which
 * on one thread took longer than the GPU's whole decode of the batch. */
#define READ_THREADS 8u

/* A buffer of at least `need` bytes: a kept one that fits, else a new one
 * (the backend's memory: page-locked for CUDA) with room for the next
 * batches' payloads, whose sizes vary. NULL if out of memory. */
static batch_buf *buf_take(wc_image_set *s, size_t need)
{
	pthread_mutex_lock(&s->lock);
	batch_buf **pp = &s->free, *b = NULL;
	for (; *pp; pp = &(*pp)->next)
		if ((*pp)->cap >= need) {
			b = *pp;
			*pp = b->next;
			s->nfree--;
			break;
		}
	pthread_mutex_unlock(&s->lock);
	if (b)
		return b;
	if (!(b = malloc(sizeof *b)))
		return NULL;
	b->cap = (need + need / 4 + 0xffff) & ~(size_t)0xffff;
	if (!(b->p = wc_backend_buf_alloc(s->be, b->cap))) {
		free(b);
		return NULL;
	}
	return b;
}

static void buf_free(wc_image_set *s, batch_buf *b)
{
	wc_backend_buf_free(s->be, b->p, b->cap);
	free(b);
}

/* Keep b for a later call; beyond KEEP_BUFS free the smallest buffer, b or
 * a kept one: kept buffers too small for the batches now asked for would
 * make every call allocate and free page-locked memory (each a device-wide
 * synchronisation: batches of 1024 images ran 8 times slower so). */
static void buf_give(wc_image_set *s, batch_buf *b)
{
	pthread_mutex_lock(&s->lock);
	if (s->nfree == KEEP_BUFS) {
		batch_buf **small = &s->free;
		for (batch_buf **pp = &s->free; *pp; pp = &(*pp)->next)
			if ((*pp)->cap < (*small)->cap)
				small = pp;
		if ((*small)->cap < b->cap) {
			batch_buf *x = *small;
			*small = x->next;
			s->nfree--;
			x->next = NULL;
			b->next = s->free;
			s->free = b;
			s->nfree++;
			b = x;
		}
	} else {
		b->next = s->free;
		s->free = b;
		s->nfree++;
		b = NULL;
	}
	pthread_mutex_unlock(&s->lock);
	if (b)
		buf_free(s, b);
}

/* "cuda:N" and "auto:N" name GPU N; the name without it goes to *name. */
static wc_err backend_name(const char *spec, char name[16], int *gpu)
{
	const char *colon = strchr(spec, ':');
	size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
	if (len >= 16)
		return wc_fail(WC_E_INVAL, "decode backend \"%s\": auto, cpu or cuda, with :N for GPU N", spec);
	memcpy(name, spec, len);
	name[len] = '\0';
	*gpu = 0;
	if (!colon)
		return WC_OK;
	char *end;
	long n = strtol(colon + 1, &end, 10);
	if (strcmp(name, "cpu") == 0 || end == colon + 1 || *end || n < 0 || n > 1023)
		return wc_fail(WC_E_INVAL, "decode backend \"%s\": auto, cpu or cuda, with :N for GPU N", spec);
	*gpu = (int)n;
	return WC_OK;
}

wc_err wc_image_set_open(const char *path, const char *backend, unsigned threads, wc_image_set **out)
{
	*out = NULL;
	wc_image_set *s = calloc(1, sizeof *s);
	if (!s || !(s->path = strdup(path))) {
		free(s);
		return wc_fail(WC_E_NOMEM, "out of memory");
	}
	pthread_mutex_init(&s->lock, NULL);
	wc_backend_opts bo = {.threads = threads};
	char name[16];
	wc_err e = backend_name(backend ? backend : "auto", name, &bo.gpu);
	if (!e)
		e = wc_qvq_open(path, &s->q);
	if (!e)
		e = wc_backend_create(name, &bo, &s->be);
	if (e) {
		wc_image_set_close(s);
		return e;
	}
	*out = s;
	return WC_OK;
}

void wc_image_set_close(wc_image_set *s)
{
	if (!s)
		return;
	while (s->free) {
		batch_buf *b = s->free;
		s->free = b->next;
		buf_free(s, b);
	}
	pthread_mutex_destroy(&s->lock);
	if (s->resident)
		s->resident_free(s->resident);
	if (s->readers)
		wc_threadpool_destroy(s->readers);
	if (s->be)
		wc_backend_destroy(s->be);
	if (s->q)
		wc_qvq_release(s->q);
	free(s->path);
	free(s);
}

uint32_t wc_image_set_count(const wc_image_set *s) { return wc_qvq_nimages(s->q); }
uint32_t wc_image_set_ntiles(const wc_image_set *s) { return wc_qvq_ntiles(s->q); }
const char *wc_image_set_backend(const wc_image_set *s) { return s->be->ops->name; }

wc_err wc_image_set_info(const wc_image_set *s, uint32_t i, wc_image_info *out)
{
	if (i >= wc_qvq_nimages(s->q))
		return wc_fail(WC_E_RANGE, "%s: image %u of %u", s->path, i, wc_qvq_nimages(s->q));
	const wc_qvq_image *im = wc_qvq_image_at(s->q, i);
	*out = (wc_image_info){
		.width = im->width,
		.height = im->height,
		.channels = wc_qvq_header_of(s->q)->channels,
		.label = im->label == WC_QVQ_NO_LABEL ? -1 : (int32_t)im->label,
		.tile = im->tile,
		.tile_off = im->tile_off,
	};
	return WC_OK;
}

const char *wc_image_set_name(const wc_image_set *s, uint32_t i)
{
	return i < wc_qvq_nimages(s->q) ? wc_qvq_image_at(s->q, i)->name : NULL;
}

uint32_t wc_image_set_nlabels(const wc_image_set *s)
{
	uint32_t n;
	wc_qvq_labels(s->q, &n);
	return n;
}

const char *wc_image_set_label(const wc_image_set *s, uint32_t l)
{
	uint32_t n;
	const char *const *names = wc_qvq_labels(s->q, &n);
	return l < n ? names[l] : NULL;
}

uint64_t wc_image_set_tile_bytes(const wc_image_set *s, uint32_t t)
{
	return t < wc_qvq_ntiles(s->q) ? wc_qvq_tile_at(s->q, t)->dsize : 0;
}

/* A requested image: its tile, the image, and the caller's slot it fills. */
typedef struct want {
	uint32_t tile, img;
	size_t k;
} want;

static int by_tile(const void *a, const void *b)
{
	const want *x = a, *y = b;
	if (x->tile != y->tile)
		return x->tile < y->tile ? -1 : 1;
	return x->k < y->k ? -1 : x->k > y->k;
}

/* One call's state: the wants sorted by tile, a batch's buffers (the
 * backend's: page-locked where it is CUDA), allocated once for the largest
 * batch. */
typedef struct decode_call {
	wc_image_set *s;
	wc_image_layout layout;
	uint8_t *const *dst;        /* host destinations, or NULL */
	void *const *device_dst;    /* device destinations (place != NULL) */
	wcodec_vq_place_fn place;   /* the plugin's wcodec_cuda_vq_place */
	void *stream;
	int f32;                    /* device images as normalised floats */
	float scale[3], bias[3];
	wc_qvq_image_dst *places;   /* per want of a batch */
	want *w;
	uint8_t *payloads, *outs; /* in buf */
	batch_buf *buf;
	wc_tile_job *jobs;
	uint32_t *tiles;
	uint64_t *out_off; /* per job: where its tile's bytes start in outs */
	uint64_t *pay_off; /* per job: where its payload starts in payloads */
} decode_call;

#define PAY_ALIGN(x) (((size_t)(x) + 15u) & ~(size_t)15u)

static wc_err tile_failed(const decode_call *d, uint32_t tile, wc_err e, const char *why)
{
	const wc_qvq_tile *t = wc_qvq_tile_at(d->s->q, tile);
	char reason[400];
	snprintf(reason, sizeof reason, "%s", why);
	return wc_fail(e, "%s: tile %u (its first image: %s): %s", d->s->path, tile,
		       wc_qvq_image_at(d->s->q, t->first_image)->name, reason);
}

/* An image's npix pixels of `channels` bytes from src (HWC, as decoded) to
 * dst in `layout`. */
static void place(uint8_t *restrict dst, const uint8_t *restrict src, size_t npix, unsigned channels,
		  wc_image_layout layout)
{
	if (layout == WC_IMAGE_HWC) {
		memcpy(dst, src, npix * channels);
	} else if (channels == 3) { /* the usual case, kept simple for the vectorizer */
		uint8_t *r = dst, *g = dst + npix, *b = dst + 2 * npix;
		for (size_t p = 0; p < npix; p++) {
			r[p] = src[3 * p];
			g[p] = src[3 * p + 1];
			b[p] = src[3 * p + 2];
		}
	} else {
		for (unsigned c = 0; c < channels; c++)
			for (size_t p = 0; p < npix; p++)
				dst[c * npix + p] = src[p * channels + c];
	}
}

/* Read tile d->tiles[j]'s payload and describe its job (a pool loop body):
 * the job's status and detail say whether the read and its check passed. */
static void read_one(void *arg, size_t j)
{
	decode_call *d = arg;
	wc_tile_job *job = &d->jobs[j];
	const wc_qvq_tile *t = wc_qvq_tile_at(d->s->q, d->tiles[j]);
	memset(job, 0, sizeof *job);
	wc_qvq_describe_job(d->s->q, d->tiles[j], job);
	job->payload = d->payloads + d->pay_off[j];
	job->payload_size = t->csize;
	job->out = d->place ? NULL : d->outs + d->out_off[j]; /* the GPU path writes no tile to the host */
	job->out_size = t->dsize;
	wc_err e = wc_qvq_read_payload(d->s->q, d->tiles[j], d->payloads + d->pay_off[j]);
	if (e)
		wc_job_fail(job, e, "%s", wc_last_detail());
}

/* Decode the distinct tiles d->tiles[0..nt) in one backend batch and copy
 * the wants [wi, wend), which lie in them, into their slots. Payloads lie
 * at 16-byte aligned offsets, as the GPU's staging buffers place them, so
 * that the batch's upload is one copy. */
static wc_err decode_batch(decode_call *d, size_t nt, size_t wi, size_t wend)
{
	wc_qvq *q = d->s->q;
	size_t poff = 0, ooff = 0;
	for (size_t j = 0; j < nt; j++) {
		const wc_qvq_tile *t = wc_qvq_tile_at(q, d->tiles[j]);
		d->pay_off[j] = poff;
		d->out_off[j] = ooff;
		poff += PAY_ALIGN(t->csize);
		ooff += t->dsize;
	}
	wc_threadpool_run(d->s->readers, read_one, d, nt);
	for (size_t j = 0; j < nt; j++)
		if (d->jobs[j].status)
			return tile_failed(d, d->tiles[j], d->jobs[j].status, d->jobs[j].detail);
	if (d->place) { /* the GPU writes the images where they go */
		size_t j = 0, np = 0;
		for (size_t k = wi; k < wend; k++) {
			while (d->tiles[j] != d->w[k].tile)
				j++;
			const wc_qvq_tile *t = wc_qvq_tile_at(q, d->tiles[j]);
			wc_qvq_image_dst *pl = &d->places[np++];
			*pl = (wc_qvq_image_dst){.job = (uint32_t)j, .image = d->w[k].img - t->first_image,
						 .device_dst = d->device_dst[d->w[k].k],
						 .chw = d->layout == WC_IMAGE_CHW, .f32 = (uint32_t)d->f32};
			memcpy(pl->scale, d->scale, sizeof pl->scale);
			memcpy(pl->bias, d->bias, sizeof pl->bias);
		}
		wc_err e = d->place(wc_backend_plugin_backend(d->s->be), d->jobs, nt, d->places, np, d->stream);
		if (e)
			return e;
		for (j = 0; j < nt; j++)
			if (d->jobs[j].status)
				return tile_failed(d, d->tiles[j], d->jobs[j].status, d->jobs[j].detail);
		return WC_OK;
	}
	wc_err e = wc_backend_decode(d->s->be, d->jobs, nt);
	if (e)
		return e;
	for (size_t j = 0; j < nt; j++)
		if (d->jobs[j].status)
			return tile_failed(d, d->tiles[j], d->jobs[j].status, d->jobs[j].detail);
	size_t j = 0;
	for (size_t k = wi; k < wend; k++) {
		while (d->tiles[j] != d->w[k].tile)
			j++; /* both ascending; every wanted tile is in the batch */
		const wc_qvq_image *im = wc_qvq_image_at(q, d->w[k].img);
		place(d->dst[d->w[k].k], d->outs + d->out_off[j] + im->tile_off, (size_t)im->width * im->height,
		      wc_qvq_header_of(q)->channels, d->layout);
	}
	return WC_OK;
}

/* The batches: runs of distinct tiles of at most BATCH_BYTES decoded bytes
 * (one tile at least). For each, how many tiles and wants, and its payload
 * and decoded bytes; with `run` set, decode it. */
static wc_err batches(decode_call *d, size_t n, bool run, size_t *max_tiles, size_t *max_p, size_t *max_o)
{
	wc_qvq *q = d->s->q;
	for (size_t wi = 0; wi < n;) {
		size_t nt = 0, pb = 0, ob = 0, wend = wi;
		while (wend < n) {
			uint32_t tile = d->w[wend].tile;
			const wc_qvq_tile *t = wc_qvq_tile_at(q, tile);
			/* decoded bytes bound a batch into host memory; on the GPU
			 * path only the payloads pass through the host */
			size_t held = d->place ? pb + PAY_ALIGN(t->csize) : ob + t->dsize;
			if (nt && (held > BATCH_BYTES || nt == BATCH_TILES))
				break;
			if (run)
				d->tiles[nt] = tile;
			nt++;
			pb += PAY_ALIGN(t->csize);
			ob += t->dsize;
			while (wend < n && d->w[wend].tile == tile)
				wend++;
		}
		if (!run) {
			*max_tiles = nt > *max_tiles ? nt : *max_tiles;
			*max_p = pb > *max_p ? pb : *max_p;
			*max_o = ob > *max_o ? ob : *max_o;
		} else {
			wc_err e = decode_batch(d, nt, wi, wend);
			if (e)
				return e;
		}
		wi = wend;
	}
	return WC_OK;
}

/* Start the payload readers on first use: a set opened for its labels and
 * names, or one in each DataLoader worker, starts no threads for nothing. */
static wc_err start_readers(wc_image_set *s)
{
	wc_err e = WC_OK;
	pthread_mutex_lock(&s->lock);
	if (!s->readers) {
		unsigned cpus = wc_cpu_count();
		e = wc_threadpool_create((cpus < READ_THREADS ? cpus : READ_THREADS) - 1, &s->readers);
	}
	pthread_mutex_unlock(&s->lock);
	return e;
}

static wc_err decode_images(decode_call d, const uint32_t *idx, size_t n)
{
	wc_image_set *s = d.s;
	if (n == 0)
		return WC_OK;
	wc_err e0 = start_readers(s);
	if (e0)
		return e0;
	if (d.layout != WC_IMAGE_HWC && d.layout != WC_IMAGE_CHW)
		return wc_fail(WC_E_INVAL, "image layout %d", (int)d.layout);
	const uint32_t count = wc_qvq_nimages(s->q);
	d.w = malloc(n * sizeof *d.w);
	d.places = d.place ? malloc(n * sizeof *d.places) : NULL;
	if (!d.w || (d.place && !d.places)) {
		free(d.w);
		free(d.places);
		return wc_fail(WC_E_NOMEM, "out of memory for %zu images", n);
	}
	wc_err e = WC_OK;
	for (size_t k = 0; k < n && !e; k++) {
		if (idx[k] >= count)
			e = wc_fail(WC_E_RANGE, "%s: image %u of %u", s->path, idx[k], count);
		else
			d.w[k] = (want){wc_qvq_image_at(s->q, idx[k])->tile, idx[k], k};
	}
	size_t max_tiles = 0, max_p = 0, max_o = 0;
	if (!e) {
		qsort(d.w, n, sizeof *d.w, by_tile);
		batches(&d, n, false, &max_tiles, &max_p, &max_o);
		d.jobs = calloc(max_tiles, sizeof *d.jobs);
		d.tiles = calloc(max_tiles, sizeof *d.tiles);
		d.out_off = calloc(max_tiles, sizeof *d.out_off);
		d.pay_off = calloc(max_tiles, sizeof *d.pay_off);
		/* decoded tiles first: 64-byte aligned for the backend */
		size_t ob = d.place ? 0 : (max_o + 63) & ~(size_t)63;
		if ((d.buf = buf_take(s, ob + max_p + 1))) {
			d.outs = d.buf->p;
			d.payloads = d.buf->p + ob;
		}
		if (!d.jobs || !d.tiles || !d.out_off || !d.pay_off || !d.buf)
			e = wc_fail(WC_E_NOMEM, "out of memory for a batch of %zu tiles (%zu bytes)", max_tiles,
				    max_p + max_o);
	}
	if (!e)
		e = batches(&d, n, true, NULL, NULL, NULL);
	if (d.buf)
		buf_give(s, d.buf);
	free(d.jobs);
	free(d.tiles);
	free(d.out_off);
	free(d.pay_off);
	free(d.w);
	free(d.places);
	return e;
}

wc_err wc_image_set_decode(wc_image_set *s, const uint32_t *idx, size_t n, wc_image_layout layout,
			   uint8_t *const *dst)
{
	return decode_images((decode_call){.s = s, .layout = layout, .dst = dst}, idx, n);
}

/* The plugin's writer into device memory, or WC_E_UNSUPPORTED. */
static wcodec_vq_place_fn device_writer(const wc_image_set *s)
{
	wcodec_vq_place_fn place = (wcodec_vq_place_fn)wc_backend_symbol(s->be, "wcodec_cuda_vq_place");
	if (!place)
		wc_fail(WC_E_UNSUPPORTED, "%s: the %s decode backend does not write into device memory", s->path,
			s->be->ops->name);
	return place;
}

wc_err wc_image_set_decode_device(wc_image_set *s, const uint32_t *idx, size_t n, wc_image_layout layout,
				  void *const *dst, void *stream)
{
	wcodec_vq_place_fn place = device_writer(s);
	if (!place)
		return WC_E_UNSUPPORTED;
	return decode_images((decode_call){.s = s, .layout = layout, .device_dst = dst, .place = place,
					   .stream = stream},
			     idx, n);
}

wc_err wc_image_set_decode_device_f32(wc_image_set *s, const uint32_t *idx, size_t n, wc_image_layout layout,
				      const float scale[3], const float bias[3], void *const *dst, void *stream)
{
	wcodec_vq_place_fn place = device_writer(s);
	if (!place)
		return WC_E_UNSUPPORTED;
	decode_call d = {.s = s, .layout = layout, .device_dst = dst, .place = place, .stream = stream, .f32 = 1};
	memcpy(d.scale, scale, sizeof d.scale);
	memcpy(d.bias, bias, sizeof d.bias);
	return decode_images(d, idx, n);
}
