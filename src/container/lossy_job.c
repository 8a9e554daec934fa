/* lossy_job.c - decoding a lossy tensor's tile on the CPU (lossy_job.h). */
#include "container/lossy_job.h"

#include "codec/tile_codec.h"

wc_err wc_lossy_decode_job(wc_tile_job *job)
{
	const wc_lossy_job *lj = job->kind_data;
	const unsigned w = wc_lossy_dtype_size((wc_lossy_dtype)lj->p.dtype);
	const size_t n = job->out_size / w;
	if (job->out_size % w || lj->first > lj->p.elems || n > lj->p.elems - lj->first)
		return wc_job_fail(job, WC_E_CORRUPT, "lossy tile: %u bytes are not elements [%llu, ...) of the %llu",
				   job->out_size, (unsigned long long)lj->first, (unsigned long long)lj->p.elems);
	/* The codes go to the last n bytes of out: element i (w bytes at i * w)
	 * is written after code i is read and before any later code is
	 * overwritten (i * w + w <= (w - 1) * n + i + 1 for i < n). */
	uint8_t *codes = job->out + job->out_size - n;
	wc_clear_detail();
	wc_err e = wc_tile_decode(job->layout, job->payload, job->payload_size, job->tables, job->ntables,
				  job->chunk_symbols, codes, n);
	if (e)
		return wc_job_fail(job, e, "%s", *wc_last_detail() ? wc_last_detail() : wc_strerror(e));
	wc_lossy_dequant(&lj->p, (const int8_t *)codes, lj->first, n, job->out);
	return wc_job_check_hash(job);
}
