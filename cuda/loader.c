/*
 * loader.c - the pipelined GPU loader (wcodec_cuda_load, wcodec_cuda.h).
 *
 * The work is cut into segments (one tile of a .wcodec file, or up to
 * PLAIN_SEG bytes of a plain safetensors file), and the segments into groups
 * that fill one slot of a ring of page-locked staging buffers. Reader
 * threads take segments in order, pread each into its group's slot (waiting
 * until the slot's previous group is decoded) and check the payload's XXH3
 * while it is still in the CPU's cache. Once every segment of a group is
 * in, one of the decode threads hands its tiles to the context's batch
 * pipeline (wcc_decode with device targets: the payloads DMA straight from
 * the slot on the lanes' streams, the kernels write the caller's tensors)
 * and its plain bytes to cudaMemcpyAsync, then frees the slot. So disk or
 * page-cache reads, hashing, PCIe uploads and decoding all overlap, and
 * host memory is bounded by the ring whatever the model's size.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wcc_device.h"
#include "wcodec_cuda.h"

#define EXPORT __attribute__((visibility("default")))
#define MAX_GPUS 64
#define MIB ((size_t)1 << 20)
#define PLAIN_SEG (2u * MIB)             /* bytes of a plain file per segment */
#define DEFAULT_STAGING (128u * MIB)     /* the ring, when the caller gives none */
#define SLOT_BYTES (16u * MIB)           /* one group's payloads */
#define RUN_BYTES (8u * MIB)             /* payloads one request from an object store fetches at most */
#define PLAIN_GAP (64u << 10)            /* unused bytes such a request may span between two ranges */
#define DECODERS 2u                      /* threads handing groups to the GPU */
/* The loader context's device budget: three lanes of 16 MiB decoded each
 * (wcc_device.c sizes them), under 200 MiB of device memory. */
#define LOADER_DEVICE_LIMIT (176u * MIB)

typedef struct seg {
	uint32_t range;
	uint32_t tile;     /* .wcodec: the tile; plain: UINT32_MAX */
	uint64_t off, len; /* data-section bytes this segment delivers */
	uint32_t group;
	uint32_t partial;  /* a tile only partly inside its range */
	size_t slot_off;   /* where its file bytes go in the slot */
	size_t file_len;   /* file bytes: payload or plain bytes */
} seg;

typedef struct group {
	size_t first, count; /* segments */
	size_t left;         /* segments not read yet */
	int state;           /* 0 reading, 1 read, 2 taken by a decoder */
} group;

/* Per GPU: the decode context and the staging ring, made on first use and
 * kept; loads on one GPU take turns (load_mu). */
typedef struct gpu_loader {
	pthread_mutex_t load_mu;
	wcc_ctx *ctx;
	uint8_t *ring;
	size_t ring_bytes;
	int ready;
} gpu_loader;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static gpu_loader *g_loaders[MAX_GPUS];

typedef struct pipe {
	wc_tensor_file *const *files;
	const wc_load_range *ranges;
	int from_runs;              /* wcodec_cuda_load_payloads: payloads from runs, not the files */
	const wc_payload_run *runs; /* in host memory */
	size_t nruns;
	seg *segs;
	size_t nsegs;
	group *groups;
	size_t ngroups;
	uint8_t *ring;
	size_t nslots, slot_bytes;
	wcc_ctx *ctx;
	int gpu;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	size_t next_seg;       /* readers: next segment to read */
	size_t *slot_owner;    /* the group allowed to fill slot s */
	size_t first_untaken;  /* decoders: lowest group not taken */
	size_t taken;
	wc_err err;
	char why[700];
} pipe_t;

static void pipe_fail(pipe_t *p, wc_err e, const wc_tensor_file *f, const char *tensor, const char *reason)
{
	pthread_mutex_lock(&p->mu);
	if (p->err == WC_OK) {
		p->err = e;
		if (f && tensor)
			snprintf(p->why, sizeof p->why, "%s: tensor '%s': %s", wc_tensor_file_path(f), tensor, reason);
		else if (f)
			snprintf(p->why, sizeof p->why, "%s: %s", wc_tensor_file_path(f), reason);
		else
			snprintf(p->why, sizeof p->why, "%s", reason);
	}
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

static const char *tensor_of(const wc_tensor_file *f, uint32_t tile)
{
	wc_container *c = wc_tensor_file_container(f);
	return c ? wc_container_tensor(c, wc_container_tile(c, tile)->tensor)->name : NULL;
}

/* ---- planning ------------------------------------------------------------ */

/* Cut the ranges into segments (segs NULL: count them) after checking them. */
static wc_err plan_segs(wc_tensor_file *const *files, size_t nfiles, const wc_load_range *ranges, size_t n,
			int gpu, seg *segs, size_t *nsegs)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		const wc_load_range *r = &ranges[i];
		wc_err e = wc_load_range_check(files, nfiles, ranges, i);
		if (e != WC_OK)
			return e;
		const wc_tensor_file *f = files[r->file];
		if (r->length == 0)
			continue;
		if (!segs) { /* the destination must be this GPU's memory, both ends */
			for (int end = 0; end < 2; end++) {
				struct cudaPointerAttributes a;
				const uint8_t *q = (const uint8_t *)r->dst + (end ? r->length - 1 : 0);
				if (cudaPointerGetAttributes(&a, q) != cudaSuccess || a.type != cudaMemoryTypeDevice ||
				    a.device != gpu) {
					cudaGetLastError();
					return wc_fail(WC_E_INVAL, "cuda load: range %zu: destination %p..+%llu is not "
						       "device memory of GPU %d", i, r->dst,
						       (unsigned long long)r->length, gpu);
				}
			}
		}
		wc_container *c = wc_tensor_file_container(f);
		if (!c) {
			for (uint64_t o = r->offset; o < r->offset + r->length; o += PLAIN_SEG, k++) {
				if (!segs)
					continue;
				uint64_t left = r->offset + r->length - o;
				seg *s = &segs[k];
				memset(s, 0, sizeof *s);
				s->range = (uint32_t)i;
				s->tile = UINT32_MAX;
				s->off = o;
				s->len = left < PLAIN_SEG ? left : PLAIN_SEG;
				s->file_len = (size_t)s->len;
			}
			continue;
		}
		uint32_t first, last;
		if ((e = wc_tensor_file_tiles(f, r->offset, r->length, &first, &last)) != WC_OK)
			return e;
		size_t plen;
		wc_container_prefix(c, &plen);
		for (uint32_t t = first; t <= last; t++, k++) {
			if (!segs)
				continue;
			const wc_tile_info *ti = wc_container_tile(c, t);
			const uint64_t tb = ti->voff - plen, te = tb + ti->dsize;
			seg *s = &segs[k];
			memset(s, 0, sizeof *s);
			s->range = (uint32_t)i;
			s->tile = t;
			s->off = tb > r->offset ? tb : r->offset;
			s->len = (te < r->offset + r->length ? te : r->offset + r->length) - s->off;
			s->partial = s->off != tb || s->len != ti->dsize;
			s->file_len = ti->csize;
		}
	}
	*nsegs = k;
	return WC_OK;
}

/* Group consecutive segments into slots of slot_bytes (64-byte aligned
 * offsets). A segment larger than a slot gets a group of its own, which
 * the caller made the slots large enough for. */
static size_t plan_groups(seg *segs, size_t nsegs, size_t slot_bytes, group *groups)
{
	size_t g = 0, used = 0;
	for (size_t i = 0; i < nsegs; i++) {
		const size_t need = (segs[i].file_len + 63u) & ~(size_t)63u;
		if (i == 0 || used + need > slot_bytes) {
			if (i > 0)
				g++;
			if (groups)
				groups[g] = (group){ .first = i };
			used = 0;
		}
		segs[i].group = (uint32_t)g;
		segs[i].slot_off = used;
		used += need;
		if (groups)
			groups[g].count++;
	}
	return nsegs ? g + 1 : 0;
}

/* ---- readers --------------------------------------------------------------- */

static wc_err read_seg(pipe_t *p, const seg *s, uint8_t *dst)
{
	const wc_load_range *r = &p->ranges[s->range];
	const wc_tensor_file *f = p->files[r->file];
	if (s->tile != UINT32_MAX && p->from_runs) {
		const void *src = wc_payload_run_find(p->files, p->runs, p->nruns, r->file, s->tile);
		if (!src)
			return wc_fail(WC_E_INVAL, "tile %u is in none of the %zu payload runs", s->tile, p->nruns);
		memcpy(dst, src, s->file_len);
		return wc_container_check_payload(wc_tensor_file_container(f), s->tile, dst);
	}
	if (s->tile != UINT32_MAX)
		return wc_container_read_payload(wc_tensor_file_container(f), s->tile, dst);
	return wc_tensor_file_read_data(f, dst, s->file_len, s->off);
}

/* Where segment s's bytes start: in the data section of a plain file (c
 * NULL), else its payload's place in the container. */
static uint64_t seg_at(const wc_container *c, const seg *s)
{
	return c ? wc_container_tile(c, s->tile)->coff : s->off;
}

/* How many segments from segs[i] one read can fetch (up to RUN_BYTES):
 * from an object store, the following ones of the same group and file
 * whose tile is the one before again (shared by several tensors: read
 * once) or the next one, its payload adjacent; in a plain file, the
 * following ranges within PLAIN_GAP of each other (many small tensors:
 * one request for many, as the host loader does). Else 1. */
static size_t run_length(const pipe_t *p, size_t i)
{
	const seg *a = &p->segs[i];
	const wc_tensor_file *f = p->files[p->ranges[a->range].file];
	const wc_container *c = wc_tensor_file_container(f);
	if (p->from_runs || !wc_tensor_file_remote(f))
		return 1;
	size_t n = 1;
	for (size_t j = i + 1; j < p->nsegs; j++, n++) {
		const seg *b = &p->segs[j], *prev = &p->segs[j - 1];
		if (b->group != a->group || p->ranges[b->range].file != p->ranges[a->range].file)
			break;
		if (c && b->tile == prev->tile)
			continue; /* the same payload again */
		const uint64_t end = seg_at(c, prev) + prev->file_len, at = seg_at(c, b);
		if ((c ? b->tile != prev->tile + 1 || at != end : at < end || at - end > PLAIN_GAP) ||
		    at + b->file_len - seg_at(c, a) > RUN_BYTES)
			break;
	}
	return n;
}

/* Read the n segments from segs[i] (run_length) into their places in the
 * slot: one request into a buffer (each payload checked), then copied. */
static wc_err read_run(pipe_t *p, size_t i, size_t n, uint8_t *slot, uint32_t *bad)
{
	const seg *a = &p->segs[i], *z = &p->segs[i + n - 1];
	const wc_tensor_file *f = p->files[p->ranges[a->range].file];
	const wc_container *c = wc_tensor_file_container(f);
	*bad = a->tile;
	const uint64_t first = seg_at(c, a), len = seg_at(c, z) + z->file_len - first;
	uint8_t *buf = malloc((size_t)len);
	if (!buf)
		return wc_fail(WC_E_NOMEM, "out of memory for a run of %zu reads", n);
	wc_err e = c ? wc_container_read_payloads(c, a->tile, z->tile, buf, bad)
		     : wc_tensor_file_read_data(f, buf, (size_t)len, first);
	for (size_t j = i; e == WC_OK && j < i + n; j++)
		memcpy(slot + p->segs[j].slot_off, buf + (seg_at(c, &p->segs[j]) - first), p->segs[j].file_len);
	free(buf);
	return e;
}

static void *reader_main(void *arg)
{
	pipe_t *p = arg;
	pthread_setname_np(pthread_self(), "wcodec-reader");
	pthread_mutex_lock(&p->mu);
	while (p->err == WC_OK && p->next_seg < p->nsegs) {
		const size_t i = p->next_seg, n = run_length(p, i);
		p->next_seg += n;
		const seg *s = &p->segs[i];
		const size_t slot = s->group % p->nslots;
		while (p->err == WC_OK && p->slot_owner[slot] != s->group)
			pthread_cond_wait(&p->cv, &p->mu);
		if (p->err != WC_OK)
			break;
		pthread_mutex_unlock(&p->mu);
		uint32_t bad = s->tile;
		wc_err e = n > 1 ? read_run(p, i, n, p->ring + slot * p->slot_bytes, &bad)
				 : read_seg(p, s, p->ring + slot * p->slot_bytes + s->slot_off);
		if (e != WC_OK) {
			const wc_tensor_file *f = p->files[p->ranges[s->range].file];
			pipe_fail(p, e, f, bad != UINT32_MAX ? tensor_of(f, bad) : NULL, wc_last_detail());
			pthread_mutex_lock(&p->mu);
			break;
		}
		pthread_mutex_lock(&p->mu);
		if ((p->groups[s->group].left -= n) == 0) {
			p->groups[s->group].state = 1;
			pthread_cond_broadcast(&p->cv);
		}
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

/* ---- decoders ------------------------------------------------------------ */

/* A tile only partly inside its range: decoded on this thread into host
 * memory (its dhash checked), the wanted part copied up. */
static wc_err decode_partial(pipe_t *p, const seg *s, const uint8_t *payload, cudaStream_t st)
{
	const wc_load_range *r = &p->ranges[s->range];
	wc_container *c = wc_tensor_file_container(p->files[r->file]);
	const wc_tile_info *ti = wc_container_tile(c, s->tile);
	size_t plen;
	wc_container_prefix(c, &plen);
	uint8_t *tmp = malloc(ti->dsize ? ti->dsize : 1);
	if (!tmp)
		return wc_fail(WC_E_NOMEM, "tile %u: %u bytes", s->tile, ti->dsize);
	wc_err e = wc_container_decode_tile(c, s->tile, payload, tmp);
	if (e == WC_OK) {
		cudaError_t ce = cudaMemcpyAsync((uint8_t *)r->dst + (s->off - r->offset),
						 tmp + (s->off - (ti->voff - plen)), (size_t)s->len,
						 cudaMemcpyHostToDevice, st);
		if (ce == cudaSuccess)
			ce = cudaStreamSynchronize(st);
		if (ce != cudaSuccess)
			e = wc_fail(WC_E_BACKEND, "cuda: copy of a partial tile: %s", cudaGetErrorString(ce));
	}
	free(tmp);
	return e;
}

typedef struct decoder {
	pipe_t *p;
	cudaStream_t stream;
	wc_tile_job *jobs;
	uint8_t **dst;
	const seg **of_job;
	size_t cap;
} decoder;

static int grow_jobs(decoder *d, size_t n)
{
	if (n <= d->cap)
		return 0;
	wc_tile_job *j = realloc(d->jobs, n * sizeof *j);
	if (j)
		d->jobs = j;
	uint8_t **t = realloc(d->dst, n * sizeof *t);
	if (t)
		d->dst = t;
	const seg **o = realloc(d->of_job, n * sizeof *o);
	if (o)
		d->of_job = o;
	if (!j || !t || !o)
		return -1;
	d->cap = n;
	return 0;
}

static void decode_group(decoder *d, size_t g)
{
	pipe_t *p = d->p;
	const group *gr = &p->groups[g];
	uint8_t *slot = p->ring + (g % p->nslots) * p->slot_bytes;
	if (grow_jobs(d, gr->count)) {
		pipe_fail(p, WC_E_NOMEM, NULL, NULL, "cuda load: job list");
		return;
	}
	size_t njobs = 0;
	cudaError_t ce = cudaSuccess;
	for (size_t i = gr->first; i < gr->first + gr->count; i++) {
		const seg *s = &p->segs[i];
		const wc_load_range *r = &p->ranges[s->range];
		const wc_tensor_file *f = p->files[r->file];
		uint8_t *payload = slot + s->slot_off;
		if (s->tile == UINT32_MAX) {
			ce = cudaMemcpyAsync((uint8_t *)r->dst + (s->off - r->offset), payload, s->file_len,
					     cudaMemcpyHostToDevice, d->stream);
			if (ce != cudaSuccess)
				break;
			continue;
		}
		if (s->partial) {
			wc_err e = decode_partial(p, s, payload, d->stream);
			if (e != WC_OK) {
				pipe_fail(p, e, f, tensor_of(f, s->tile), wc_last_detail());
				return;
			}
			continue;
		}
		wc_tile_source *src = wc_container_source(wc_tensor_file_container(f));
		wc_tile_job *job = &d->jobs[njobs];
		memset(job, 0, sizeof *job);
		src->ops->describe_job(src, s->tile, job);
		job->payload = payload;
		job->payload_size = (uint32_t)s->file_len;
		job->out_size = (uint32_t)s->len;
		d->dst[njobs] = (uint8_t *)r->dst + (s->off - r->offset);
		d->of_job[njobs] = s;
		njobs++;
	}
	if (ce != cudaSuccess) {
		char why[300];
		snprintf(why, sizeof why, "cuda: upload of plain bytes: %s", cudaGetErrorString(ce));
		pipe_fail(p, WC_E_BACKEND, NULL, NULL, why);
		return;
	}
	if (njobs) {
		wc_err e = wcc_decode(p->ctx, d->jobs, njobs, d->dst);
		if (e != WC_OK) {
			pipe_fail(p, e, NULL, NULL, wc_last_detail());
			return;
		}
		for (size_t j = 0; j < njobs; j++) {
			if (d->jobs[j].status == WC_OK)
				continue;
			const seg *s = d->of_job[j];
			const wc_tensor_file *f = p->files[p->ranges[s->range].file];
			char why[400];
			snprintf(why, sizeof why, "tile %u: %s", s->tile,
				 d->jobs[j].detail[0] ? d->jobs[j].detail : wc_strerror(d->jobs[j].status));
			pipe_fail(p, d->jobs[j].status, f, tensor_of(f, s->tile), why);
			return;
		}
	}
	ce = cudaStreamSynchronize(d->stream);
	if (ce != cudaSuccess) {
		char why[300];
		snprintf(why, sizeof why, "cuda: upload of plain bytes: %s", cudaGetErrorString(ce));
		pipe_fail(p, WC_E_BACKEND, NULL, NULL, why);
	}
}

static void *decoder_main(void *arg)
{
	decoder *d = arg;
	pipe_t *p = d->p;
	pthread_setname_np(pthread_self(), "wcodec-decoder");
	cudaSetDevice(p->gpu);
	pthread_mutex_lock(&p->mu);
	for (;;) {
		size_t g = p->first_untaken;
		while (g < p->ngroups && p->groups[g].state != 1)
			g++;
		if (p->err != WC_OK || p->taken == p->ngroups)
			break;
		if (g == p->ngroups) {
			pthread_cond_wait(&p->cv, &p->mu);
			continue;
		}
		p->groups[g].state = 2;
		p->taken++;
		while (p->first_untaken < p->ngroups && p->groups[p->first_untaken].state == 2)
			p->first_untaken++;
		pthread_mutex_unlock(&p->mu);
		decode_group(d, g);
		pthread_mutex_lock(&p->mu);
		p->slot_owner[g % p->nslots] = g + p->nslots;
		pthread_cond_broadcast(&p->cv);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

/* ---- the per-GPU loader ---------------------------------------------------- */

static wc_err get_loader(int gpu, gpu_loader **out)
{
	if (gpu < 0 || gpu >= MAX_GPUS)
		return wc_fail(WC_E_BACKEND, "cuda: GPU ordinal %d out of range", gpu);
	pthread_mutex_lock(&g_mu);
	if (!g_loaders[gpu]) {
		gpu_loader *l = calloc(1, sizeof *l);
		if (l)
			pthread_mutex_init(&l->load_mu, NULL);
		g_loaders[gpu] = l;
	}
	*out = g_loaders[gpu];
	pthread_mutex_unlock(&g_mu);
	return *out ? WC_OK : wc_fail(WC_E_NOMEM, "cuda: loader");
}

/* Under l->load_mu: the context and a ring of at least `bytes`. */
static wc_err prepare(gpu_loader *l, int gpu, size_t bytes)
{
	if (!l->ctx) {
		wcc_ctx_opts o = { .gpu = gpu, .memory_limit = LOADER_DEVICE_LIMIT, .lanes = 3, .host_threads = 2,
				   .device_only = 1 };
		wc_err e = wcc_ctx_create(&o, &l->ctx);
		if (e != WC_OK)
			return e;
	}
	if (l->ring_bytes != bytes) {
		int prev = 0;
		cudaGetDevice(&prev);
		cudaSetDevice(gpu);
		cudaFreeHost(l->ring);
		l->ring = NULL;
		l->ring_bytes = 0;
		cudaError_t ce = cudaHostAlloc((void **)&l->ring, bytes, cudaHostAllocDefault);
		cudaSetDevice(prev);
		if (ce != cudaSuccess) {
			l->ring = NULL;
			return wc_fail(WC_E_BACKEND, "cuda: %zu MiB of page-locked staging: %s", bytes / MIB,
				       cudaGetErrorString(ce));
		}
		l->ring_bytes = bytes;
	}
	return WC_OK;
}

static unsigned default_readers(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n < 2 ? 2u : n > 32 ? 32u : (unsigned)n;
}

static wc_err load(wc_tensor_file *const *files, size_t nfiles, int from_runs, const wc_payload_run *runs,
		   size_t nruns, const wc_load_range *ranges, size_t n, int gpu, const wcodec_cuda_load_opts *opts,
		   wcodec_cuda_load_stats *stats)
{
	if (stats)
		memset(stats, 0, sizeof *stats);
	int ndev = 0;
	cudaError_t ce = cudaGetDeviceCount(&ndev);
	if (ce != cudaSuccess)
		return wc_fail(WC_E_BACKEND, "cuda: no usable GPU: %s", cudaGetErrorString(ce));
	if (gpu < 0 || gpu >= ndev)
		return wc_fail(WC_E_BACKEND, "cuda: GPU %d requested, %d present", gpu, ndev);
	size_t nsegs;
	wc_err e = plan_segs(files, nfiles, ranges, n, gpu, NULL, &nsegs);
	if (e != WC_OK || nsegs == 0)
		return e;
	pipe_t p = { .files = files, .ranges = ranges, .from_runs = from_runs, .runs = runs, .nruns = nruns,
		     .gpu = gpu };
	p.segs = calloc(nsegs, sizeof *p.segs);
	if (!p.segs)
		return wc_fail(WC_E_NOMEM, "cuda load: %zu segments", nsegs);
	plan_segs(files, nfiles, ranges, n, gpu, p.segs, &nsegs);
	p.nsegs = nsegs;

	size_t staging = opts && opts->staging_bytes ? opts->staging_bytes : DEFAULT_STAGING;
	size_t slot = SLOT_BYTES, biggest = 0;
	for (size_t i = 0; i < nsegs; i++)
		if (p.segs[i].file_len > biggest)
			biggest = p.segs[i].file_len;
	biggest = (biggest + 63u) & ~(size_t)63u;
	if (slot > staging / 4)
		slot = (staging / 4) & ~(size_t)63u;
	if (slot < biggest) /* a tile larger than a slot: slots grow to hold it */
		slot = biggest;
	p.nslots = staging / slot < 4 ? 4 : staging / slot;
	p.slot_bytes = slot;
	p.ngroups = plan_groups(p.segs, nsegs, slot, NULL);
	p.groups = calloc(p.ngroups, sizeof *p.groups);
	p.slot_owner = calloc(p.nslots, sizeof *p.slot_owner);
	if (!p.groups || !p.slot_owner) {
		free(p.segs);
		free(p.groups);
		free(p.slot_owner);
		return wc_fail(WC_E_NOMEM, "cuda load: %zu groups", p.ngroups);
	}
	plan_groups(p.segs, nsegs, slot, p.groups);
	for (size_t g = 0; g < p.ngroups; g++)
		p.groups[g].left = p.groups[g].count;
	for (size_t s = 0; s < p.nslots; s++)
		p.slot_owner[s] = s;

	gpu_loader *l;
	if ((e = get_loader(gpu, &l)) != WC_OK)
		goto out_free;
	pthread_mutex_lock(&l->load_mu);
	if ((e = prepare(l, gpu, p.nslots * p.slot_bytes)) != WC_OK) {
		pthread_mutex_unlock(&l->load_mu);
		goto out_free;
	}
	p.ring = l->ring;
	p.ctx = l->ctx;
	pthread_mutex_init(&p.mu, NULL);
	pthread_cond_init(&p.cv, NULL);

	unsigned nread = opts && opts->readers ? opts->readers : default_readers();
	if (nread > 256)
		nread = 256;
	if (nread > nsegs) /* a small load (one tensor of safe_open) starts no idle readers */
		nread = (unsigned)nsegs;
	const unsigned ndec = p.ngroups < DECODERS ? (unsigned)p.ngroups : DECODERS;
	pthread_t rt[256], dt[DECODERS];
	decoder dec[DECODERS];
	memset(dec, 0, sizeof dec);
	unsigned nr = 0, nd = 0;
	int prev = 0;
	cudaGetDevice(&prev);
	cudaSetDevice(gpu);
	for (; nd < ndec; nd++) {
		dec[nd].p = &p;
		if ((ce = cudaStreamCreateWithFlags(&dec[nd].stream, cudaStreamNonBlocking)) != cudaSuccess) {
			pipe_fail(&p, WC_E_BACKEND, NULL, NULL, "cuda load: creating a stream");
			break;
		}
		if (pthread_create(&dt[nd], NULL, decoder_main, &dec[nd]) != 0) {
			cudaStreamDestroy(dec[nd].stream);
			pipe_fail(&p, WC_E_IO, NULL, NULL, "cuda load: starting a decode thread");
			break;
		}
	}
	for (; nr < nread && p.err == WC_OK; nr++)
		if (pthread_create(&rt[nr], NULL, reader_main, &p) != 0) {
			if (nr == 0)
				pipe_fail(&p, WC_E_IO, NULL, NULL, "cuda load: starting a reader thread");
			break;
		}
	for (unsigned i = 0; i < nr; i++)
		pthread_join(rt[i], NULL);
	for (unsigned i = 0; i < nd; i++) {
		pthread_join(dt[i], NULL);
		cudaStreamDestroy(dec[i].stream);
		free(dec[i].jobs);
		free(dec[i].dst);
		free(dec[i].of_job);
	}
	cudaSetDevice(prev);
	if (stats) {
		for (size_t i = 0; i < nsegs; i++) {
			stats->file_bytes += p.segs[i].file_len;
			stats->out_bytes += p.segs[i].len;
		}
		stats->pinned_bytes = l->ring_bytes + wcc_ctx_pinned_bytes(l->ctx);
		stats->device_bytes = wcc_ctx_device_bytes(l->ctx);
	}
	pthread_mutex_unlock(&l->load_mu);
	pthread_cond_destroy(&p.cv);
	pthread_mutex_destroy(&p.mu);
	e = p.err;
	if (e != WC_OK)
		wc_fail(e, "%s", p.why);
out_free:
	free(p.segs);
	free(p.groups);
	free(p.slot_owner);
	return e;
}

EXPORT wc_err wcodec_cuda_load(wc_tensor_file *const *files, size_t nfiles, const wc_load_range *ranges, size_t n,
			       int gpu, const wcodec_cuda_load_opts *opts, wcodec_cuda_load_stats *stats)
{
	return load(files, nfiles, 0, NULL, 0, ranges, n, gpu, opts, stats);
}

EXPORT wc_err wcodec_cuda_load_payloads(wc_tensor_file *const *files, size_t nfiles, const wc_payload_run *runs,
					size_t nruns, const wc_load_range *ranges, size_t n, int gpu,
					const wcodec_cuda_load_opts *opts, wcodec_cuda_load_stats *stats)
{
	if (stats)
		memset(stats, 0, sizeof *stats);
	wc_err e = wc_payload_runs_check(files, nfiles, runs, nruns);
	if (e != WC_OK)
		return e;
	return load(files, nfiles, 1, runs, runs ? nruns : 0, ranges, n, gpu, opts, stats);
}

EXPORT wc_err wcodec_cuda_loader_memory(int gpu, size_t *pinned_bytes, size_t *device_bytes)
{
	*pinned_bytes = *device_bytes = 0;
	if (gpu < 0 || gpu >= MAX_GPUS)
		return wc_fail(WC_E_INVAL, "cuda: GPU ordinal %d out of range", gpu);
	pthread_mutex_lock(&g_mu);
	gpu_loader *l = g_loaders[gpu];
	pthread_mutex_unlock(&g_mu);
	if (!l)
		return WC_OK;
	pthread_mutex_lock(&l->load_mu);
	if (l->ctx) {
		*pinned_bytes = l->ring_bytes + wcc_ctx_pinned_bytes(l->ctx);
		*device_bytes = wcc_ctx_device_bytes(l->ctx);
	}
	pthread_mutex_unlock(&l->load_mu);
	return WC_OK;
}
