/*
 * resident_impl.h - the state of a set of packed tensors resident in device
 * memory (resident.c: create, decode, free; resident_plan.c: the layout of
 * the decoded tensors and the batch descriptors). Not installed.
 */
#ifndef WCC_RESIDENT_IMPL_H
#define WCC_RESIDENT_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "container/container.h"
#include "wcc_impl.h"
#include "wcodec_cuda.h"

#define REL ((uintptr_t)1 << 56)  /* destination-relative addresses: REL + offset */
#define WORK ((uintptr_t)1 << 57) /* addresses in a slot's work buffer: WORK + offset */
#define NSLOT 4u                 /* destinations whose descriptors stay on the device */
#define STEP_JOBS 4096u
#define STEP_SCRATCH (64u * MIB)
#define OUT_ALIGN 256u

/* One step's descriptors: where they lie in the host blob, and counts. */
typedef struct step {
	wcc_desc_offsets d;
	uint32_t nchunks, ntiles, nsegs;
} step;

/* One tile to decode: the tiles of the tensors, a tile shared by two of them
 * once per tensor. */
typedef struct piece {
	uint32_t tile;
	size_t poff;     /* its payload in d_payload */
	uintptr_t out;   /* REL + destination offset, or WORK + work offset */
	const char *name;
	/* a lossy tensor's tile: its tensor's parameters, the scales it reads
	 * (span) at soff in d_payload, right after its payload (where a lane
	 * stages them: wcc_lane_add) */
	const wc_tensor_info *lossy;
	wc_lossy_params lp;
	wcc_scale_span span;
	size_t soff;
} piece;

/* A tile shared with bytes outside the tensor: decoded into the work
 * buffer, its tensor's part copied to the destination after. */
typedef struct piece_copy {
	uint64_t work_off, dst_off, len;
} piece_copy;

typedef struct slot {
	uintptr_t dst;     /* 0: empty */
	uint8_t *d_blob;   /* the descriptors rebased onto dst and work */
	uint8_t *d_work;   /* its own work buffer (shared tiles, then plane
			    * scratch: work_bytes), when the decodes give none */
	uint8_t *work;     /* the work buffer its descriptors name: d_work or
			    * the caller's */
	cudaEvent_t used;  /* after the last decode that read them */
	uint64_t last;     /* for eviction: the decode count at its last use */
} slot;

struct wcodec_cuda_resident {
	wc_container *c;    /* a reference: the pieces name its tensors and tiles */
	wcc_ctx *ctx;
	int gpu;
	uint32_t ntensors;
	uint64_t *offsets;  /* tensor k's bytes at dst + offsets[k] */
	uint64_t out_bytes;
	piece *pieces;      /* the tiles decoded (wcr_lay_out) */
	size_t ntiles;      /* of pieces */
	uint8_t *d_payload; /* every tile's payload, 16-byte aligned */
	size_t payload_bytes;
	size_t part_bytes;  /* shared tiles' room at the start of a work buffer */
	size_t work_bytes;  /* part_bytes + the most plane scratch a step uses */
	piece_copy *copies;
	size_t ncopies;
	uint32_t *h_status, *d_status; /* page-locked, mapped: status per tile */
	uint8_t *blob;      /* host descriptors of every step (relative) */
	uint8_t *h_stage;   /* page-locked copy being rebased for upload */
	size_t blob_bytes;
	step *steps;
	size_t nsteps;
	slot slots[NSLOT];
	uint64_t ndecodes;
};


/* WC_E_BACKEND, the reason "cuda resident: WHAT: the CUDA error's string". */
wc_err wcr_cuda_err(const char *what, cudaError_t e);

/* The pieces of tensors names[0..n) (r->pieces, r->ntiles of them): the
 * tensors' offsets in the destination, r->out_bytes, the
 * payloads' places (r->payload_bytes, lossy tiles' scales after their
 * payloads), shared tiles' places in the work buffer and their copies.
 * Errors: WC_E_NOTFOUND, WC_E_UNSUPPORTED (a lossy tensor's tiles or
 * scales), WC_E_NOMEM. */
wc_err wcr_lay_out(wcodec_cuda_resident *r, const wc_container *c, const char *const *names, size_t n);

/* Planning r's pieces into the steps' descriptors (r->blob, r->steps;
 * r->work_bytes), a window of payloads at a time: the planner's lane, the
 * jobs of the pieces planned, and the next piece to plan. */
typedef struct wcr_planner {
	wc_tile_job *jobs;
	wcc_lane ln;
	job_plan jp;
	size_t in_step; /* jobs in the step being built */
	size_t next;
} wcr_planner;

/* Start planning r (its d_payload and part_bytes set). Errors: WC_E_NOMEM. */
wc_err wcr_plan_begin(wcodec_cuda_resident *r, wcr_planner *pl);

/* Plan the pieces from pl->next up to end, whose payloads (and lossy
 * scales) lie on the host in window, which holds the payload bytes from
 * offset base of d_payload's layout; only their headers are read, and
 * window may be reused once this returns. Errors: WC_E_UNSUPPORTED (tiles
 * the GPU does not decode), WC_E_NOMEM. */
wc_err wcr_plan_pieces(wcodec_cuda_resident *r, const wc_container *c, wcr_planner *pl, size_t end,
		       const uint8_t *window, size_t base);

/* Finish: with e == WC_OK the last step is closed; the planner's memory is
 * freed either way. Returns e, or the error closing the step. */
wc_err wcr_plan_end(wcodec_cuda_resident *r, wcr_planner *pl, wc_err e);

/* Read, check and upload every piece's payload into r->d_payload (allocated),
 * through page-locked windows on `stream`, planning each window's pieces
 * as it arrives (resident_load.c). Returns with the uploads complete.
 * Errors: as wc_container_read_payload (naming the tensor and tile),
 * wcr_plan_pieces's, WC_E_BACKEND. */
wc_err wcr_load_payloads(wcodec_cuda_resident *r, const wc_container *c, cudaStream_t stream);

/* The descriptors rebased onto a destination and a work buffer, into
 * r->h_stage. */
void wcr_rebase(const wcodec_cuda_resident *r, uintptr_t dst, uintptr_t work);

#endif /* WCC_RESIDENT_IMPL_H */
