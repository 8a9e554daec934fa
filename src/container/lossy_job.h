/*
 * lossy_job.h - the decode job kind of lossy tensors' tiles (layout "int8",
 * docs/FORMAT.md 2.2), registered by the container reader on open. Not
 * installed.
 */
#ifndef WC_LOSSY_JOB_H
#define WC_LOSSY_JOB_H

#include <stdint.h>

#include "codec/lossy.h"
#include "engine/backend.h"

#define WC_JOB_LOSSY 2u /* registered by wc_container_open (wc_job_kind_register) */

/* A lossy tile's job data: its tensor's parameters and its first element.
 * The payload is the tile's int8 codes as one byte plane (job->layout
 * "bytes"); out_size is the elements' bytes in the tensor's dtype. */
typedef struct wc_lossy_job {
	wc_lossy_params p;
	uint64_t first; /* the tile's first element within the tensor */
} wc_lossy_job;

/* The kind's reference CPU decoder (wc_job_kind_ops.cpu_decode): the code
 * plane decoded into the tail of job->out, dequantized in place
 * (wc_lossy_dequant), then the XXH3-64 of out checked against job->dhash.
 * Errors: WC_E_CORRUPT (payload, sizes, hash), WC_E_NOMEM. */
wc_err wc_lossy_decode_job(wc_tile_job *job);

#endif /* WC_LOSSY_JOB_H */
