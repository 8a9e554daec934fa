/* images_resident.c - transform-mode archives kept in GPU memory
 * (images.h, wc_image_set_resident), through the CUDA plugin's
 * wcodec_cuda_tx_resident_* calls, reached by name so that the library
 * knows nothing of CUDA. */
#include <stdlib.h>
#include <string.h>

#include "loader/images_internal.h"
#include "qvq/qvq_job.h"

typedef wc_err (*resident_create_fn)(wc_backend *be, wc_tile_job *jobs, size_t n, uint64_t max_bytes, void **out);

#define A16(x) (((size_t)(x) + 15u) & ~(size_t)15u)

wc_err wc_image_set_resident(wc_image_set *s, uint64_t max_bytes)
{
	pthread_mutex_lock(&s->lock);
	if (s->resident) {
		pthread_mutex_unlock(&s->lock);
		return WC_OK;
	}
	pthread_mutex_unlock(&s->lock);
	resident_create_fn create = (resident_create_fn)wc_backend_symbol(s->be, "wcodec_cuda_tx_resident_create");
	wcodec_tx_resident_launch_fn launch =
		(wcodec_tx_resident_launch_fn)wc_backend_symbol(s->be, "wcodec_cuda_tx_resident_launch");
	wcodec_tx_resident_wait_fn wait =
		(wcodec_tx_resident_wait_fn)wc_backend_symbol(s->be, "wcodec_cuda_tx_resident_wait");
	void (*release)(void *) = (void (*)(void *))wc_backend_symbol(s->be, "wcodec_cuda_tx_resident_free");
	if (!create || !launch || !wait || !release)
		return wc_fail(WC_E_UNSUPPORTED, "%s: the %s decode backend keeps no archive in GPU memory", s->path,
			       s->be->ops->name);
	if (wc_qvq_header_of(s->q)->mode != WC_QVQ_MODE_DCT)
		return wc_fail(WC_E_UNSUPPORTED, "%s: a codebook-mode archive: only transform-mode archives stay in GPU "
			       "memory", s->path);
	const uint32_t nt = wc_qvq_ntiles(s->q);
	uint64_t total = 0;
	for (uint32_t t = 0; t < nt; t++)
		total += A16(wc_qvq_tile_at(s->q, t)->csize);
	if (total > max_bytes)
		return wc_fail(WC_E_RANGE, "%s: payloads of %llu bytes past the %llu given", s->path,
			       (unsigned long long)total, (unsigned long long)max_bytes);
	wc_tile_job *jobs = calloc(nt, sizeof *jobs);
	uint8_t *pay = malloc(total ? total : 1);
	wc_err e = jobs && pay ? WC_OK : wc_fail(WC_E_NOMEM, "%s: no memory for %llu bytes of payloads", s->path,
						  (unsigned long long)total);
	size_t off = 0;
	for (uint32_t t = 0; t < nt && !e; t++) {
		const wc_qvq_tile *tl = wc_qvq_tile_at(s->q, t);
		wc_qvq_describe_job(s->q, t, &jobs[t]);
		jobs[t].payload = pay + off;
		jobs[t].payload_size = tl->csize;
		jobs[t].out_size = tl->dsize;
		if ((e = wc_qvq_read_payload(s->q, t, pay + off)))
			e = wc_fail_context(e, "%s", s->path);
		off += A16(tl->csize);
	}
	void *r = NULL;
	if (!e)
		e = create(wc_backend_plugin_backend(s->be), jobs, nt, max_bytes, &r);
	free(jobs);
	free(pay);
	if (e)
		return e;
	pthread_mutex_lock(&s->lock);
	if (s->resident) { /* another thread got there first */
		pthread_mutex_unlock(&s->lock);
		release(r);
		return WC_OK;
	}
	s->resident_launch = launch;
	s->resident_wait = wait;
	s->resident_free = release;
	s->resident = r;
	pthread_mutex_unlock(&s->lock);
	return WC_OK;
}

wc_err wc_image_set_decode_resident_start(wc_image_set *s, const int64_t *idx, size_t n, wc_image_layout layout,
					  const float *scale, const float *bias, void *dst, size_t dst_stride, void *stream,
					  uint64_t *ticket)
{
	if (!s->resident)
		return wc_fail(WC_E_INVAL, "%s: no archive in GPU memory (wc_image_set_resident first)", s->path);
	if (layout != WC_IMAGE_HWC && layout != WC_IMAGE_CHW)
		return wc_fail(WC_E_INVAL, "image layout %d", (int)layout);
	wc_err e = s->resident_launch(s->resident, idx, n, layout == WC_IMAGE_CHW, scale != NULL, scale, bias, dst,
				      dst_stride, stream, ticket);
	return e ? wc_fail_context(e, "%s", s->path) : WC_OK;
}

wc_err wc_image_set_decode_resident_finish(wc_image_set *s, uint64_t ticket)
{
	if (!s->resident)
		return wc_fail(WC_E_INVAL, "%s: no archive in GPU memory (wc_image_set_resident first)", s->path);
	wc_err e = s->resident_wait(s->resident, ticket);
	return e ? wc_fail_context(e, "%s", s->path) : WC_OK;
}

wc_err wc_image_set_decode_resident(wc_image_set *s, const int64_t *idx, size_t n, wc_image_layout layout,
				    const float *scale, const float *bias, void *dst, size_t dst_stride, void *stream)
{
	uint64_t ticket;
	if (n == 0 && s->resident)
		return WC_OK;
	wc_err e = wc_image_set_decode_resident_start(s, idx, n, layout, scale, bias, dst, dst_stride, stream, &ticket);
	return e ? e : wc_image_set_decode_resident_finish(s, ticket);
}
