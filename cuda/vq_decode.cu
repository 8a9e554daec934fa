/*
 * vq_decode.cu - the CUDA backend's path for WC_JOB_VQ jobs (vq_gather.h):
 * indices decoded by the plugin's plane pipeline into device memory, the
 * gather kernel, copy-out and dhash check, CPU fallback for any job that
 * fails anything. Host code; compiled by nvcc with the kernels.
 */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "vq_gather.h"
#include "wcc_slots.h"

extern "C" {
#include "core/hash.h"
#include "qvq/qvq_job.h"
#include "wcc_device.h"
}

#define VQ_CODEBOOKS 64u
#define A16(x) (((size_t)(x) + 15u) & ~(size_t)15u)

/* ---- the backend path ---------------------------------------------------------- */

typedef struct vq_codebook {
	uint64_t key;
	uint8_t *d_cb;
	size_t bytes;
} vq_codebook;

struct wcc_vq {
	struct wcc_ctx *ctx;
	int gpu;
	pthread_mutex_t mu; /* the codebooks */
	wcc_slots slots;
	vq_codebook cbs[VQ_CODEBOOKS];
	unsigned ncb;
};

extern "C" wc_err wcc_vq_create(struct wcc_ctx *ctx, int gpu, wcc_vq **out)
{
	wcc_vq *vq = (wcc_vq *)calloc(1, sizeof *vq);
	if (!vq)
		return wc_fail(WC_E_NOMEM, "cuda vq: no memory");
	vq->ctx = ctx;
	vq->gpu = gpu;
	pthread_mutex_init(&vq->mu, NULL);
	cudaError_t e = wcc_slots_init(&vq->slots, gpu);
	if (e == cudaSuccess) /* the gather's code on the device before the first batch */
		e = (cudaError_t)wcc_vq_preload_kernels();
	if (e != cudaSuccess) {
		wcc_vq_destroy(vq);
		return wc_fail(WC_E_BACKEND, "cuda vq: setting up GPU %d (kernel, streams): %s", gpu, cudaGetErrorString(e));
	}
	*out = vq;
	return WC_OK;
}

extern "C" void wcc_vq_destroy(wcc_vq *vq)
{
	if (!vq)
		return;
	wcc_slots_destroy(&vq->slots);
	for (unsigned c = 0; c < vq->ncb; c++)
		cudaFree(vq->cbs[c].d_cb);
	pthread_mutex_destroy(&vq->mu);
	free(vq);
}

extern "C" int wcc_vq_any(const wc_tile_job *jobs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (jobs[i].kind == WC_JOB_VQ)
			return 1;
	return 0;
}

/* The device copy of a job's codebook, uploaded on first use; NULL when the
 * cache is full (that job then goes to the CPU). Called with vq->mu held. */
static const uint8_t *device_codebook(wcc_vq *vq, const wc_tile_job *j, cudaStream_t st,
				      cudaError_t *err)
{
	size_t bytes = (size_t)wc_qvq_job_of(j)->entries * wc_qvq_job_of(j)->patch_h * wc_qvq_job_of(j)->patch_w * wc_qvq_job_of(j)->channels;
	for (unsigned c = 0; c < vq->ncb; c++)
		if (vq->cbs[c].key == wc_qvq_job_of(j)->codebook_key && vq->cbs[c].bytes == bytes)
			return vq->cbs[c].d_cb;
	if (vq->ncb == VQ_CODEBOOKS)
		return NULL;
	uint8_t *d = NULL;
	*err = cudaMalloc(&d, bytes);
	if (*err == cudaSuccess)
		*err = cudaMemcpyAsync(d, wc_qvq_job_of(j)->codebook, bytes, cudaMemcpyHostToDevice, st);
	if (*err == cudaSuccess)
		*err = cudaStreamSynchronize(st);
	if (*err != cudaSuccess) {
		cudaFree(d);
		return NULL;
	}
	vq->cbs[vq->ncb].key = wc_qvq_job_of(j)->codebook_key;
	vq->cbs[vq->ncb].d_cb = d;
	vq->cbs[vq->ncb].bytes = bytes;
	vq->ncb++;
	return d;
}

static int job_ok_for_gpu(const wc_tile_job *j)
{
	return wc_qvq_job_of(j)->codebook && wc_qvq_job_of(j)->dims && wc_qvq_job_of(j)->channels == 3 && wc_qvq_job_of(j)->patch_h >= 1 &&
	       wc_qvq_job_of(j)->patch_w >= 1 && (wc_qvq_job_of(j)->index_bytes == 1 || wc_qvq_job_of(j)->index_bytes == 2) &&
	       j->layout.elem_size == wc_qvq_job_of(j)->index_bytes && wc_qvq_job_of(j)->nimages > 0 && j->out_size > 0;
}

extern "C" wc_err wcc_vq_decode(wcc_vq *vq, wc_tile_job *jobs, size_t n)
{
	size_t m = 0;
	for (size_t i = 0; i < n; i++)
		m += jobs[i].kind == WC_JOB_VQ;
	if (!m)
		return WC_OK;
	size_t *vi = (size_t *)malloc(m * sizeof *vi);
	wc_tile_job *shadow = (wc_tile_job *)calloc(m, sizeof *shadow);
	uint8_t **dev_idx = (uint8_t **)calloc(m, sizeof *dev_idx);
	size_t *rgb_off = (size_t *)calloc(m, sizeof *rgb_off);
	const uint8_t **dcb = (const uint8_t **)calloc(m, sizeof *dcb);
	int *cpu = (int *)calloc(m, sizeof *cpu);
	wcc_vq_image *desc = NULL;
	wc_err ret = WC_OK;
	if (!vi || !shadow || !dev_idx || !rgb_off || !dcb || !cpu) {
		ret = wc_fail(WC_E_NOMEM, "cuda vq: no memory");
		goto out;
	}
	{
		size_t k = 0, idx_total = 0, rgb_total = 0, nimg = 0;
		for (size_t i = 0; i < n; i++)
			if (jobs[i].kind == WC_JOB_VQ)
				vi[k++] = i;
		for (size_t a = 0; a < m; a++) {
			const wc_tile_job *j = &jobs[vi[a]];
			if (!job_ok_for_gpu(j)) {
				cpu[a] = 1;
				continue;
			}
			idx_total += A16((size_t)wc_qvq_job_of(j)->nindices * wc_qvq_job_of(j)->index_bytes);
			rgb_total += A16(j->out_size);
			nimg += wc_qvq_job_of(j)->nimages;
		}
		desc = (wcc_vq_image *)malloc((nimg ? nimg : 1) * sizeof *desc);
		if (!desc) {
			ret = wc_fail(WC_E_NOMEM, "cuda vq: no memory");
			goto out;
		}
		size_t desc_bytes = A16(nimg * sizeof *desc), status_bytes = A16(m * 4);
		size_t dbytes = idx_total + rgb_total + desc_bytes + status_bytes;
		size_t hbytes = rgb_total + status_bytes;

		wcc_slot *s = wcc_slots_take(&vq->slots);
		cudaError_t ce = cudaSetDevice(vq->gpu);
		if (ce == cudaSuccess)
			ce = wcc_slot_grow(s, dbytes, hbytes);

		uint8_t *d_idx = s->d_buf, *d_rgb = d_idx + idx_total;
		wcc_vq_image *d_desc = (wcc_vq_image *)(d_rgb + rgb_total);
		uint32_t *d_status = (uint32_t *)((uint8_t *)d_desc + desc_bytes);
		uint32_t *h_status = (uint32_t *)(s->h_buf + rgb_total);

		/* Step 1: the index arrays, decoded by the plane pipeline into
		 * device memory. */
		size_t io = 0, ro = 0, ns = 0;
		size_t *shadow_of = (size_t *)calloc(m, sizeof *shadow_of);
		if (!shadow_of)
			ce = cudaErrorMemoryAllocation;
		for (size_t a = 0; a < m && ce == cudaSuccess; a++) {
			if (cpu[a])
				continue;
			const wc_tile_job *j = &jobs[vi[a]];
			wc_tile_job *sj = &shadow[ns];
			*sj = *j;
			sj->kind = WC_JOB_PLANES;
			sj->out = NULL;
			sj->out_size = wc_qvq_job_of(j)->nindices * wc_qvq_job_of(j)->index_bytes;
			sj->dhash = 0; /* device outputs are not hashed; the RGB bytes are */
			dev_idx[ns] = d_idx + io;
			shadow_of[ns] = a;
			rgb_off[a] = ro;
			io += A16(sj->out_size);
			ro += A16(j->out_size);
			ns++;
		}
		wc_err e = WC_OK;
		if (ce == cudaSuccess && ns)
			e = wcc_decode(vq->ctx, shadow, ns, dev_idx);
		if (ce != cudaSuccess || e == WC_E_BACKEND) {
			ret = ce != cudaSuccess ? wc_fail(WC_E_BACKEND, "cuda vq: %s", cudaGetErrorString(ce))
						: e;
			free(shadow_of);
			wcc_slots_give(&vq->slots, s);
			goto out;
		}
		/* Step 2: the gather, for every job whose indices decoded. */
		size_t nd = 0;
		uint32_t max_patches = 0;
		pthread_mutex_lock(&vq->mu);
		for (size_t b = 0; b < ns && ce == cudaSuccess; b++) {
			size_t a = shadow_of[b];
			const wc_tile_job *j = &jobs[vi[a]];
			if (shadow[b].status != WC_OK ||
			    !(dcb[a] = device_codebook(vq, j, s->stream, &ce))) {
				cpu[a] = 1;
				continue;
			}
			size_t po = 0, oo = 0;
			for (uint32_t i = 0; i < wc_qvq_job_of(j)->nimages; i++) {
				uint32_t w = wc_qvq_job_of(j)->dims[2 * i], h = wc_qvq_job_of(j)->dims[2 * i + 1];
				uint64_t np = wc_qvq_patches(w, h, wc_qvq_job_of(j)->patch_w, wc_qvq_job_of(j)->patch_h);
				wcc_vq_image *di = &desc[nd++];
				memset(di, 0, sizeof *di);
				di->idx = dev_idx[b] + po * wc_qvq_job_of(j)->index_bytes;
				di->out = d_rgb + rgb_off[a] + oo;
				di->codebook = dcb[a];
				di->entries = wc_qvq_job_of(j)->entries;
				di->w = w;
				di->h = h;
				di->ph = wc_qvq_job_of(j)->patch_h;
				di->pw = wc_qvq_job_of(j)->patch_w;
				di->index_bytes = wc_qvq_job_of(j)->index_bytes;
				di->job = (uint32_t)a;
				if (np > max_patches)
					max_patches = (uint32_t)np;
				po += np;
				oo += (size_t)w * h * 3;
			}
		}
		pthread_mutex_unlock(&vq->mu);
		free(shadow_of);
		if (ce == cudaSuccess && nd) {
			ce = cudaMemcpyAsync(d_desc, desc, nd * sizeof *desc, cudaMemcpyHostToDevice,
					     s->stream);
			if (ce == cudaSuccess)
				ce = cudaMemsetAsync(d_status, 0, m * 4, s->stream);
			if (ce == cudaSuccess)
				ce = (cudaError_t)wcc_vq_launch_gather(d_desc, (uint32_t)nd, max_patches,
								       d_status, s->stream);
			if (ce == cudaSuccess)
				ce = cudaMemcpyAsync(s->h_buf, d_rgb, rgb_total, cudaMemcpyDeviceToHost,
						     s->stream);
			if (ce == cudaSuccess)
				ce = cudaMemcpyAsync(h_status, d_status, m * 4, cudaMemcpyDeviceToHost,
						     s->stream);
			if (ce == cudaSuccess)
				ce = cudaStreamSynchronize(s->stream);
		}
		if (ce == cudaSuccess) {
			/* Step 3: copy out and check each job's dhash. */
			for (size_t a = 0; a < m; a++) {
				wc_tile_job *j = &jobs[vi[a]];
				if (cpu[a])
					continue;
				const uint8_t *rgb = s->h_buf + rgb_off[a];
				if (h_status[a] || wc_xxh3_64(rgb, j->out_size) != j->dhash) {
					cpu[a] = 1; /* the CPU decides: corrupt or a GPU fault */
					continue;
				}
				memcpy(j->out, rgb, j->out_size);
				j->status = WC_OK;
			}
		}
		wcc_slots_give(&vq->slots, s);
		if (ce != cudaSuccess) {
			ret = wc_fail(WC_E_BACKEND, "cuda vq: %s", cudaGetErrorString(ce));
			goto out;
		}
	}
	{
		size_t redo = 0;
		for (size_t a = 0; a < m; a++)
			if (cpu[a]) {
				wc_decode_job_cpu(&jobs[vi[a]]);
				redo++;
			}
		/* Visible, so a GPU path that silently fell back cannot pass for
		 * a working one (a damaged tile also lands here, then the CPU
		 * reports it corrupt). */
		if (redo)
			wc_log(WC_LOG_WARN, "cuda vq: %zu of %zu image tiles decoded on the CPU instead",
			       redo, m);
	}
out:
	free(vi);
	free(shadow);
	free(dev_idx);
	free(rgb_off);
	free(dcb);
	free(cpu);
	free(desc);
	return ret;
}

/* ---- images straight into device memory (wcodec_cuda_vq_place) ---------------- */

extern "C" wc_err wcc_vq_place(wcc_vq *vq, wc_tile_job *jobs, size_t n, const wc_qvq_image_dst *dsts, size_t ndst,
			       void *stream)
{
	for (size_t a = 0; a < n; a++)
		if (jobs[a].kind != WC_JOB_VQ || !job_ok_for_gpu(&jobs[a]))
			return wc_fail(WC_E_INVAL, "cuda vq: job %zu is not an image tile this path decodes", a);
	for (size_t d = 0; d < ndst; d++)
		if (dsts[d].job >= n || dsts[d].image >= wc_qvq_job_of(&jobs[dsts[d].job])->nimages ||
		    !dsts[d].device_dst)
			return wc_fail(WC_E_INVAL, "cuda vq: image destination %zu names no image of the jobs", d);
	wc_tile_job *shadow = (wc_tile_job *)calloc(n ? n : 1, sizeof *shadow);
	uint8_t **dev_idx = (uint8_t **)calloc(n ? n : 1, sizeof *dev_idx);
	const uint8_t **dcb = (const uint8_t **)calloc(n ? n : 1, sizeof *dcb);
	if (!shadow || !dev_idx || !dcb) {
		free(shadow);
		free(dev_idx);
		free(dcb);
		return wc_fail(WC_E_NOMEM, "cuda vq: no memory");
	}
	size_t idx_total = 0;
	for (size_t a = 0; a < n; a++)
		idx_total += A16((size_t)wc_qvq_job_of(&jobs[a])->nindices * wc_qvq_job_of(&jobs[a])->index_bytes);
	size_t desc_bytes = A16(ndst * sizeof(wcc_vq_image)), status_bytes = A16(n * 4);
	wcc_slot *s = wcc_slots_take(&vq->slots);
	cudaError_t ce = cudaSetDevice(vq->gpu);
	if (ce == cudaSuccess)
		ce = wcc_slot_grow(s, idx_total + desc_bytes + status_bytes, status_bytes + desc_bytes);
	uint8_t *d_idx = s->d_buf;
	wcc_vq_image *d_desc = (wcc_vq_image *)(d_idx + idx_total);
	uint32_t *d_status = (uint32_t *)((uint8_t *)d_desc + desc_bytes);
	uint32_t *h_status = (uint32_t *)s->h_buf;
	/* the descriptors are written straight into page-locked memory, copied async */
	wcc_vq_image *h_desc = (wcc_vq_image *)(s->h_buf + status_bytes);
	wc_err ret = WC_OK;

	/* Step 1: every job's index array, by the plane pipeline, into the slot. */
	size_t io = 0;
	for (size_t a = 0; a < n && ce == cudaSuccess; a++) {
		const wc_tile_job *j = &jobs[a];
		shadow[a] = *j;
		shadow[a].kind = WC_JOB_PLANES;
		shadow[a].out = NULL;
		shadow[a].out_size = wc_qvq_job_of(j)->nindices * wc_qvq_job_of(j)->index_bytes;
		shadow[a].dhash = 0; /* device outputs are not hashed: the streams' own checks hold */
		dev_idx[a] = d_idx + io;
		io += A16(shadow[a].out_size);
	}
	wc_err e = ce == cudaSuccess && n ? wcc_decode(vq->ctx, shadow, n, dev_idx) : WC_OK;
	if (ce != cudaSuccess || e) {
		ret = ce != cudaSuccess ? wc_fail(WC_E_BACKEND, "cuda vq: %s", cudaGetErrorString(ce)) : e;
		goto out;
	}
	for (size_t a = 0; a < n; a++) {
		jobs[a].status = shadow[a].status;
		if (shadow[a].status)
			memcpy(jobs[a].detail, shadow[a].detail, sizeof jobs[a].detail);
	}

	/* Step 2: the gather of the images asked for, into their places. */
	{
		size_t nd = 0;
		uint32_t max_patches = 0;
		pthread_mutex_lock(&vq->mu);
		for (size_t a = 0; a < n && ce == cudaSuccess; a++)
			if (jobs[a].status == WC_OK && !(dcb[a] = device_codebook(vq, &jobs[a], s->stream, &ce)) &&
			    ce == cudaSuccess)
				ce = cudaErrorMemoryAllocation; /* the device codebook cache is full */
		pthread_mutex_unlock(&vq->mu);
		for (size_t d = 0; d < ndst && ce == cudaSuccess; d++) {
			const wc_tile_job *j = &jobs[dsts[d].job];
			if (j->status != WC_OK)
				continue;
			const wc_qvq_job *q = wc_qvq_job_of(j);
			uint64_t po = 0;
			for (uint32_t i = 0; i < dsts[d].image; i++)
				po += wc_qvq_patches(q->dims[2 * i], q->dims[2 * i + 1], q->patch_w, q->patch_h);
			uint32_t w = q->dims[2 * dsts[d].image], h = q->dims[2 * dsts[d].image + 1];
			uint64_t np = wc_qvq_patches(w, h, q->patch_w, q->patch_h);
			wcc_vq_image *di = &h_desc[nd++];
			memset(di, 0, sizeof *di);
			di->idx = dev_idx[dsts[d].job] + po * q->index_bytes;
			di->out = (uint8_t *)dsts[d].device_dst;
			di->codebook = dcb[dsts[d].job];
			di->entries = q->entries;
			di->w = w;
			di->h = h;
			di->ph = q->patch_h;
			di->pw = q->patch_w;
			di->index_bytes = q->index_bytes;
			di->chw = dsts[d].chw ? 1 : 0;
			di->job = dsts[d].job;
			di->f32 = dsts[d].f32 ? 1 : 0;
			for (unsigned c = 0; c < 3; c++) {
				di->scale[c] = dsts[d].scale[c];
				di->bias[c] = dsts[d].bias[c];
			}
			if (np > max_patches)
				max_patches = (uint32_t)np;
		}
		if (ce == cudaSuccess) /* after what the caller queued on its stream (NULL: the default one) */
			ce = cudaEventRecord(s->after, (cudaStream_t)stream);
		if (ce == cudaSuccess)
			ce = cudaStreamWaitEvent(s->stream, s->after, 0);
		if (ce == cudaSuccess && nd)
			ce = cudaMemcpyAsync(d_desc, h_desc, nd * sizeof *h_desc, cudaMemcpyHostToDevice, s->stream);
		if (ce == cudaSuccess)
			ce = cudaMemsetAsync(d_status, 0, n * 4, s->stream);
		if (ce == cudaSuccess && nd)
			ce = (cudaError_t)wcc_vq_launch_gather(d_desc, (uint32_t)nd, max_patches, d_status, s->stream);
		if (ce == cudaSuccess)
			ce = cudaMemcpyAsync(h_status, d_status, n * 4, cudaMemcpyDeviceToHost, s->stream);
		if (ce == cudaSuccess)
			ce = cudaStreamSynchronize(s->stream);
	}
	if (ce != cudaSuccess) {
		ret = wc_fail(WC_E_BACKEND, "cuda vq: %s", cudaGetErrorString(ce));
		goto out;
	}
	for (size_t a = 0; a < n; a++)
		if (jobs[a].status == WC_OK && h_status[a])
			wc_job_fail(&jobs[a], WC_E_CORRUPT, "an index past the codebook's %u entries",
				    wc_qvq_job_of(&jobs[a])->entries);
out:
	wcc_slots_give(&vq->slots, s);
	free(shadow);
	free(dev_idx);
	free(dcb);
	return ret;
}

extern "C" wc_err wcc_vq_decode_mixed(wcc_vq *vq, wc_tile_job *jobs, size_t n)
{
	size_t m = 0;
	for (size_t i = 0; i < n; i++)
		m += jobs[i].kind != WC_JOB_VQ;
	wc_err e = WC_OK;
	if (m == n)
		return wcc_decode(vq->ctx, jobs, n, NULL);
	if (m) { /* the others through the plane pipeline, on a compacted copy */
		wc_tile_job *other = (wc_tile_job *)malloc(m * sizeof *other);
		if (!other)
			return wc_fail(WC_E_NOMEM, "cuda vq: no memory");
		for (size_t i = 0, k = 0; i < n; i++)
			if (jobs[i].kind != WC_JOB_VQ)
				other[k++] = jobs[i];
		e = wcc_decode(vq->ctx, other, m, NULL);
		for (size_t i = 0, k = 0; i < n; i++)
			if (jobs[i].kind != WC_JOB_VQ)
				jobs[i].status = other[k++].status;
		free(other);
		if (e)
			return e;
	}
	return wcc_vq_decode(vq, jobs, n);
}
