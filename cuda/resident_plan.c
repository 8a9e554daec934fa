/*
 * resident_plan.c - how a set of packed tensors resident in device memory
 * is decoded (resident_impl.h): where each tensor and tile goes, and the
 * batch descriptors of the GPU decoder (wcc_kernels.h) in steps, with
 * addresses relative to the destination (REL) and to a work buffer (WORK)
 * that wcr_rebase() makes absolute.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resident_impl.h"

wc_err wcr_cuda_err(const char *what, cudaError_t e)
{
	return wc_fail(WC_E_BACKEND, "cuda resident: %s: %s", what, cudaGetErrorString(e));
}

/* Append the lane's current batch to the blob as one step (wcc_lane_write_descs). */
static wc_err close_step(wcodec_cuda_resident *r, wcc_lane *ln)
{
	if (ln->nchunks == 0 && ln->ntiles == 0)
		return WC_OK;
	const size_t add = wcc_lane_desc_bytes(ln);
	uint32_t *cnt = calloc(TABLE_SLOTS + 1u, sizeof *cnt);
	step *ns = realloc(r->steps, (r->nsteps + 1) * sizeof *ns);
	if (ns)
		r->steps = ns;
	uint8_t *nb = cnt && ns ? realloc(r->blob, r->blob_bytes + add) : NULL;
	if (!nb) {
		free(cnt);
		return wc_fail(WC_E_NOMEM, "cuda resident: descriptors");
	}
	r->blob = nb;
	memset(r->blob + r->blob_bytes, 0, add);
	step *s = &r->steps[r->nsteps++];
	wcc_lane_write_descs(ln, r->blob, r->blob_bytes, cnt, &s->d);
	free(cnt);
	r->blob_bytes = s->d.end;
	s->nchunks = (uint32_t)ln->nchunks;
	s->ntiles = (uint32_t)ln->ntiles;
	s->nsegs = (uint32_t)ln->nsegs;
	if (r->part_bytes + ln->used_scr > r->work_bytes)
		r->work_bytes = r->part_bytes + ln->used_scr;
	ln->nchunks = ln->ntiles = ln->nsegs = 0;
	ln->used_scr = 0;
	return WC_OK;
}

/* Close the step if one more job (scratch bytes of plane scratch) would
 * pass its bounds. */
static wc_err room_for(wcodec_cuda_resident *r, wcc_lane *ln, size_t *in_step, size_t scratch)
{
	if (*in_step < STEP_JOBS && ln->used_scr + scratch <= ln->cap_scr)
		return WC_OK;
	*in_step = 0;
	return close_step(r, ln);
}

/* Piece p's tile as a job, its payload on the host at payload. */
static void describe(const wc_container *c, const piece *p, const uint8_t *payload, wc_tile_job *job)
{
	wc_tile_source *src = wc_container_source((wc_container *)c);
	const wc_tile_info *tl = wc_container_tile(c, p->tile);
	src->ops->describe_job(src, p->tile, job);
	job->payload = payload;
	job->payload_size = tl->csize;
	job->out_size = tl->dsize;
}

wc_err wcr_plan_begin(wcodec_cuda_resident *r, wcr_planner *pl)
{
	memset(pl, 0, sizeof *pl);
	pl->jobs = calloc(r->ntiles ? r->ntiles : 1, sizeof *pl->jobs);
	pl->ln.jobs = calloc(r->ntiles ? r->ntiles : 1, sizeof *pl->ln.jobs);
	pl->ln.d_in = r->d_payload;
	pl->ln.d_scr = (uint8_t *)(WORK + r->part_bytes);
	pl->ln.cap_scr = STEP_SCRATCH;
	r->work_bytes = r->part_bytes;
	return pl->jobs && pl->ln.jobs ? WC_OK : wc_fail(WC_E_NOMEM, "cuda resident: jobs");
}

wc_err wcr_plan_pieces(wcodec_cuda_resident *r, const wc_container *c, wcr_planner *pl, size_t end,
		       const uint8_t *window, size_t base)
{
	const piece *pc = r->pieces;
	wcc_lane *ln = &pl->ln;
	wc_err e = WC_OK;
	for (; pl->next < end && e == WC_OK; pl->next++) {
		/* a lossy tile as in a lane (wcc_lane.c): its codes into the work
		 * buffer's plane scratch or read in place, its scales at soff, right
		 * after its payload, where wcc_lane_add expects them */
		const size_t i = pl->next;
		wc_tile_job *job = &pl->jobs[i];
		describe(c, &pc[i], window + (pc[i].poff - base), job);
		uint8_t *dev_out = (uint8_t *)pc[i].out;
		if (!wcc_plan_job(r->ctx, job, dev_out, &pl->jp))
			return wc_fail(WC_E_UNSUPPORTED,
				       "cuda resident: tile %u of tensor '%s' cannot be decoded on the GPU "
				       "(zstd or dictionary planes, lossy codes of an unaligned tile, or a malformed "
				       "payload)",
				       pc[i].tile, pc[i].name);
		if (pl->jp.scr > ln->cap_scr)
			return wc_fail(WC_E_UNSUPPORTED, "cuda resident: tile %u of tensor '%s' needs %zu bytes of "
				       "plane scratch", pc[i].tile, pc[i].name, pl->jp.scr);
		e = room_for(r, ln, &pl->in_step, pl->jp.scr);
		ln->used_in = pc[i].poff; /* where lane_add takes the payload from */
		if (e == WC_OK)
			e = wcc_lane_add(ln, job, dev_out, &pl->jp);
		pl->in_step++;
	}
	return e;
}

wc_err wcr_plan_end(wcodec_cuda_resident *r, wcr_planner *pl, wc_err e)
{
	if (e == WC_OK)
		e = close_step(r, &pl->ln);
	free(pl->ln.chunks);
	free(pl->ln.chunk_table);
	free(pl->ln.tiles);
	free(pl->ln.segs);
	free(pl->ln.jobs);
	free(pl->jobs);
	memset(pl, 0, sizeof *pl);
	return e;
}

/* An address of the descriptors, rebased onto dst and work. */
static void *fix(const void *p, uintptr_t dst, uintptr_t work)
{
	const uintptr_t a = (uintptr_t)p;
	if (a >= WORK)
		return (void *)(work + (a - WORK));
	if (a >= REL)
		return (void *)(dst + (a - REL));
	return (void *)a;
}

/* The descriptors rebased onto dst and work, into h_stage. */
void wcr_rebase(const wcodec_cuda_resident *r, uintptr_t dst, uintptr_t work)
{
	memcpy(r->h_stage, r->blob, r->blob_bytes);
	for (size_t k = 0; k < r->nsteps; k++) {
		const step *s = &r->steps[k];
		wcc_chunk *ch = (wcc_chunk *)(r->h_stage + s->d.chunks);
		for (uint32_t i = 0; i < s->nchunks; i++)
			ch[i].out = fix(ch[i].out, dst, work);
		wcc_merge_tile *t = (wcc_merge_tile *)(r->h_stage + s->d.tiles);
		for (uint32_t i = 0; i < s->ntiles; i++) {
			t[i].out = fix(t[i].out, dst, work);
			if (t[i].kind == WCC_KIND_LOSSY)
				t[i].lossy.codes = fix(t[i].lossy.codes, dst, work);
			else
				for (unsigned p = 0; p < 8; p++)
					t[i].src[p] = fix(t[i].src[p], dst, work);
		}
	}
}

/* The scales a lossy tile reads (wcc_scale_span_of), placed after its
 * payload (the caller has just placed it). Lossy tiles hold one tensor's
 * codes (never shared). */
static wc_err lossy_slice(wcodec_cuda_resident *r, const wc_tensor_info *t, const wc_tile_info *tl, piece *p)
{
	const uint64_t w = t->plain_layout.elem_size;
	p->lp = (wc_lossy_params){ .channels = t->lossy_channels,
				   .group = t->lossy_group,
				   .axis = t->lossy_axis,
				   .elems = w ? (t->end - t->begin) / w : 0,
				   .scales = t->lossy_scales };
	if (w == 0 || tl->voff < t->begin || tl->voff + tl->dsize > t->end || tl->dsize % w ||
	    wcc_scale_span_of(&p->lp, (tl->voff - t->begin) / w, tl->dsize / w, &p->span) != 0 ||
	    p->span.shi > t->lossy_nscales || p->span.count * 4 > (tl->dsize > 65536 ? tl->dsize : 65536))
		return wc_fail(WC_E_UNSUPPORTED, "cuda resident: lossy tensor '%s' (its size, tiles or scales)",
			       t->name);
	p->lossy = t;
	p->soff = r->payload_bytes; /* right after the payload */
	r->payload_bytes += ALIGN16(p->span.count * 4);
	return WC_OK;
}

/* The pieces of tensors names[0..n): offsets in the destination, tiles,
 * payload offsets (a tile shared by consecutive tensors read once), shared
 * tiles' places in the work buffer and their copies. */
wc_err wcr_lay_out(wcodec_cuda_resident *r, const wc_container *c, const char *const *names, size_t n)
{
	size_t cap = 0;
	uint32_t *idx = calloc(n, sizeof *idx);
	if (!idx)
		return wc_fail(WC_E_NOMEM, "cuda resident");
	uint64_t pos = 0;
	for (size_t k = 0; k < n; k++) {
		if (!names[k] || wc_container_find_tensor(c, names[k], &idx[k]) != WC_OK) {
			free(idx);
			return wc_fail(WC_E_NOTFOUND, "cuda resident: no tensor '%s'", names[k] ? names[k] : "(null)");
		}
		const wc_tensor_info *t = wc_container_tensor(c, idx[k]);
		pos = (pos + OUT_ALIGN - 1u) & ~(uint64_t)(OUT_ALIGN - 1u);
		r->offsets[k] = pos;
		pos += t->end - t->begin;
		cap += t->end > t->begin ? t->ntiles : 0;
	}
	r->out_bytes = pos;
	piece *pc = r->pieces = calloc(cap + 1, sizeof *pc);
	r->copies = calloc(cap + 1, sizeof *r->copies);
	if (!pc || !r->copies) {
		free(idx);
		return wc_fail(WC_E_NOMEM, "cuda resident");
	}
	size_t np = 0;
	for (size_t k = 0; k < n; k++) {
		const wc_tensor_info *t = wc_container_tensor(c, idx[k]);
		for (uint32_t j = 0; t->end > t->begin && j < t->ntiles; j++) {
			const uint32_t ti = t->first_tile + j;
			const wc_tile_info *tl = wc_container_tile(c, ti);
			piece *p = &pc[np];
			p->tile = ti;
			p->name = t->name;
			if (np > 0 && pc[np - 1].tile == ti) {
				p->poff = pc[np - 1].poff;
			} else {
				p->poff = r->payload_bytes;
				r->payload_bytes += ALIGN16(tl->csize);
			}
			if (t->lossy) {
				wc_err e = lossy_slice(r, t, tl, p);
				if (e != WC_OK) {
					free(idx);
					return e;
				}
			}
			const uint64_t lo = tl->voff > t->begin ? tl->voff : t->begin;
			const uint64_t hi = tl->voff + tl->dsize < t->end ? tl->voff + tl->dsize : t->end;
			if (lo == tl->voff && hi == tl->voff + tl->dsize) {
				p->out = REL + r->offsets[k] + (tl->voff - t->begin);
			} else {
				p->out = WORK + r->part_bytes;
				r->copies[r->ncopies++] = (piece_copy){ .work_off = r->part_bytes + (lo - tl->voff),
									.dst_off = r->offsets[k] + (lo - t->begin),
									.len = hi - lo };
				r->part_bytes += ALIGN16(tl->dsize);
			}
			np++;
		}
	}
	free(idx);
	r->ntiles = np;
	return WC_OK;
}
