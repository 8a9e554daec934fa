/*
 * wcc_lane.c - what a job needs on the GPU and how it fills a lane
 * (wcc_impl.h): the device cache of frequency tables, the plan of one job
 * (planes, chunks, scratch), and the batch descriptors of a lane.
 */
#include <stdlib.h>
#include <string.h>

#include "container/lossy_job.h"
#include "wcc_impl.h"

/* ---- frequency tables ------------------------------------------------- */

/* Slot of table 0 of the job's table set, uploading the set on first use
 * (keyed by job->table_key). Returns 0 and sets *base, or -1 if the set
 * cannot be placed (then the job is decoded on the CPU). */
static int table_base(wcc_ctx *ctx, const wc_tile_job *job, uint32_t *base)
{
	int rc = -1;
	pthread_mutex_lock(&ctx->mu);
	for (size_t i = 0; i < ctx->ntc; i++) {
		if (ctx->tcache[i].key == job->table_key && ctx->tcache[i].count == job->ntables) {
			*base = ctx->tcache[i].base;
			rc = 0;
			goto out;
		}
	}
	if (ctx->dead || job->ntables == 0 || job->ntables > TABLE_SLOTS - ctx->table_used) {
		if (!ctx->dead && !ctx->full_logged) {
			ctx->full_logged = 1;
			wc_log(WC_LOG_WARN, "cuda: frequency-table cache full (%u slots): new files decode on the CPU",
			       TABLE_SLOTS);
		}
		goto out;
	}
	if (ctx->ntc == ctx->cap_tc) {
		size_t cap = ctx->cap_tc ? 2 * ctx->cap_tc : 16;
		table_entry *t = realloc(ctx->tcache, cap * sizeof(*t));
		if (!t)
			goto out;
		ctx->tcache = t;
		ctx->cap_tc = cap;
	}
	uint32_t b = ctx->table_used;
	for (uint32_t i = 0; i < job->ntables; i++)
		ctx->table_ok[b + i] = wc_freq_validate(&job->tables[i]) == WC_OK;
	cudaError_t e = cudaMemcpyAsync(ctx->d_freqs + (size_t)b * 256u, job->tables,
					(size_t)job->ntables * sizeof(wc_freqtab), cudaMemcpyHostToDevice,
					ctx->upload);
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(ctx->upload);
	if (e != cudaSuccess) {
		wcc_cuda_fail(ctx, "uploading frequency tables", e);
		goto out;
	}
	ctx->table_used += job->ntables;
	ctx->tcache[ctx->ntc++] = (table_entry){ .key = job->table_key, .base = b, .count = job->ntables };
	*base = b;
	rc = 0;
out:
	pthread_mutex_unlock(&ctx->mu);
	return rc;
}

/* ---- planning one job --------------------------------------------------- */


static uint32_t rd32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

/* Check a rANS body's chunk_end array (FORMAT.md 4): strictly increasing
 * ends, chunks >= 128 bytes and multiples of 4, the last ending at the body's
 * end. The device checks what is inside each chunk. */
static int chunks_ok(const wc_plane_view *v, uint32_t nchunks)
{
	if (nchunks == 0 || (uint64_t)v->size < 4ull * nchunks)
		return 0;
	uint32_t data = v->size - 4u * nchunks, prev = 0;
	for (uint32_t k = 0; k < nchunks; k++) {
		uint32_t end = rd32(v->body + 4u * k);
		if (end <= prev || end - prev < 128u || ((end - prev) & 3u) || end > data)
			return 0;
		prev = end;
	}
	return prev == data;
}

/* Can the GPU decode this job? Fills *pl. Jobs it cannot (zstd planes,
 * dictionary tensors, other kinds, anything malformed) go to the CPU, which
 * reports errors; for a device target the CPU's bytes are copied up. */
static int plan_lossy(wcc_ctx *ctx, const wc_tile_job *job, const uint8_t *dev_out, job_plan *pl);

int wcc_plan_job(wcc_ctx *ctx, const wc_tile_job *job, const uint8_t *dev_out, job_plan *pl)
{
	const wc_layout l = job->layout;
	const uint32_t C = job->chunk_symbols;
	pl->lossy = 0;
	pl->scale_bytes = 0;
	if (job->kind == WC_JOB_LOSSY)
		return plan_lossy(ctx, job, dev_out, pl);
	if (job->kind != WC_JOB_PLANES || job->out_size == 0 || l.nplanes == 0 || l.nplanes > WC_MAX_PLANES ||
	    l.elem_size == 0 || C < WC_RANS_CHUNK_MIN || C > WC_RANS_CHUNK_MAX || C % 32u)
		return 0;
	if (l.kind == WC_LAYOUT_DICT || job->dict) /* no GPU gather yet */
		return 0;
	if (wc_tile_parse(l, job->payload, job->payload_size, job->out_size, job->ntables, pl->v) != WC_OK)
		return 0;
	pl->n = job->out_size / l.elem_size;
	pl->total_chunks = 0;
	pl->scr = 0;
	pl->direct = 0;
	int have_base = 0;
	for (unsigned k = 0; k < l.nplanes; k++) {
		const wc_plane_view *v = &pl->v[k];
		pl->nchunks[k] = 0;
		if (v->mode == WC_PLANE_ZSTD)
			return 0;
		if (v->mode != WC_PLANE_RANS)
			continue;
		if (!have_base) {
			if (pl->memo && pl->memo_key == job->table_key && pl->memo_count == job->ntables) {
				pl->base = pl->memo_base;
			} else {
				if (table_base(ctx, job, &pl->base) != 0)
					return 0;
				pl->memo = 1;
				pl->memo_key = job->table_key;
				pl->memo_count = job->ntables;
				pl->memo_base = pl->base;
			}
			have_base = 1;
		}
		if (v->table >= job->ntables || !ctx->table_ok[pl->base + v->table])
			return 0;
		uint32_t nc = (uint32_t)((pl->n + C - 1u) / C);
		if (!chunks_ok(v, nc))
			return 0;
		pl->nchunks[k] = nc;
		pl->total_chunks += nc;
	}
	/* dev_out is NULL (an aligned lane buffer) or the caller's address */
	const int aligned = ((uintptr_t)dev_out & 15u) == 0;
	unsigned nrans = 0, npack = 0;
	pl->fused = -1;
	for (unsigned k = 0; k < l.nplanes; k++) {
		npack += pl->v[k].mode == WC_PLANE_PACK;
		if (pl->v[k].mode == WC_PLANE_RANS) {
			nrans++;
			pl->fused = (int)k;
		}
	}
	/* The fused decode reads the other plane a word at a time as bytes:
	 * a PACK plane is unpacked by the merge instead. */
	if (nrans != 1 || !aligned || npack)
		pl->fused = -1;
	if (l.nplanes == 1 && pl->fused == 0) {
		pl->direct = 1; /* one plane: the symbols are the bytes */
		pl->fused = -1;
	} else if (pl->fused < 0) {
		for (unsigned k = 0; k < l.nplanes; k++)
			if (pl->v[k].mode == WC_PLANE_RANS)
				pl->scr += ALIGN16(pl->n);
	}
	pl->nsegs = pl->direct || pl->fused >= 0 ? 0 : (pl->n + WCC_MERGE_SEG - 1u) / WCC_MERGE_SEG;
	return 1;
}

/* A lossy tile (container/lossy_job.h): its code plane planned as a plain
 * one-plane job of n bytes (rANS: decoded into lane scratch; RAW: read in
 * place), and the span of scales its dequantization reads. The output must
 * be aligned to the dtype (the merge kernel's scalar stores). */
static int plan_lossy(wcc_ctx *ctx, const wc_tile_job *job, const uint8_t *dev_out, job_plan *pl)
{
	const wc_lossy_job *lj = job->kind_data;
	if (!lj || job->layout.elem_size != 1 || job->layout.nplanes != 1)
		return 0;
	const unsigned w = lj->p.dtype == WC_LOSSY_F32 ? 4u : 2u;
	const size_t n = job->out_size / w;
	if (n == 0 || job->out_size % w || ((uintptr_t)dev_out & (w - 1u)))
		return 0;
	wc_tile_job codes = *job;
	codes.kind = WC_JOB_PLANES;
	codes.kind_data = NULL;
	codes.out_size = (uint32_t)n;
	if (!wcc_plan_job(ctx, &codes, NULL, pl) || (!pl->direct && pl->v[0].mode != WC_PLANE_RAW))
		return 0;
	wcc_scale_span s;
	if (wcc_scale_span_of(&lj->p, lj->first, n, &s) != 0 || s.count * 4 > (job->out_size > 65536 ? job->out_size : 65536))
		return 0;
	pl->lossy = 1;
	pl->span = s;
	pl->scale_bytes = ALIGN16(s.count * 4);
	pl->scr = pl->direct ? ALIGN16(n) : 0;
	pl->fused = -1;
	pl->nsegs = (n + WCC_MERGE_SEG - 1u) / WCC_MERGE_SEG;
	return 1;
}

/* ---- filling a lane ----------------------------------------------------- */

/* Bytes of h_in the descriptors of the batch take, in submit order. */
static size_t desc_bytes(size_t njobs, size_t nchunks, size_t ntiles, size_t nsegs)
{
	return ALIGN16(4u * njobs) + ALIGN16(sizeof(wcc_chunk) * nchunks) +
	       ALIGN16(sizeof(wcc_rans_block) * nchunks) + ALIGN16(sizeof(wcc_merge_tile) * ntiles) +
	       ALIGN16(sizeof(wcc_merge_seg) * nsegs);
}

int wcc_lane_fits(const wcc_lane *ln, const wc_tile_job *job, const job_plan *pl)
{
	if (ln->njobs >= LANE_MAX_JOBS)
		return 0;
	size_t in = ln->used_in + ALIGN16(job->payload_size) + pl->scale_bytes +
		    desc_bytes(ln->njobs + 1, ln->nchunks + pl->total_chunks, ln->ntiles + 1, ln->nsegs + pl->nsegs);
	size_t out = ln->host_target ? ln->used_out + ALIGN16(job->out_size) : 0;
	return in <= ln->cap_in && out <= ln->cap_out && ln->used_scr + pl->scr <= ln->cap_scr;
}

int wcc_grow(void **arr, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t c = *cap ? *cap : 256;
	while (c < need)
		c *= 2;
	void *p = realloc(*arr, c * elem);
	if (!p)
		return -1;
	*arr = p;
	*cap = c;
	return 0;
}

wc_err wcc_lane_add(wcc_lane *ln, wc_tile_job *job, uint8_t *dev_out, const job_plan *pl)
{
	const size_t need = ln->nchunks + pl->total_chunks;
	if (need > ln->cap_chunks) {
		size_t c = ln->cap_chunks ? ln->cap_chunks : 1024;
		while (c < need)
			c *= 2;
		wcc_chunk *ch = realloc(ln->chunks, c * sizeof(*ch));
		if (ch)
			ln->chunks = ch;
		uint32_t *ct = realloc(ln->chunk_table, c * sizeof(*ct));
		if (ct)
			ln->chunk_table = ct;
		if (!ch || !ct)
			return wc_fail(WC_E_NOMEM, "cuda: batch descriptors");
		ln->cap_chunks = c;
	}
	if (wcc_grow((void **)&ln->tiles, &ln->cap_tiles, ln->ntiles + 1, sizeof(wcc_merge_tile)) ||
	    wcc_grow((void **)&ln->segs, &ln->cap_segs, ln->nsegs + pl->nsegs, sizeof(wcc_merge_seg)))
		return wc_fail(WC_E_NOMEM, "cuda: batch descriptors");
	const uint32_t j = (uint32_t)ln->njobs;
	lane_job *lj = &ln->jobs[j];
	memset(lj, 0, sizeof(*lj));
	lj->job = job;
	lj->pin_in = wcc_is_pinned(job->payload, job->payload_size);
	ln->nstaged += !lj->pin_in;
	lj->pin_out = ln->host_target && wcc_is_pinned(job->out, job->out_size);
	lj->payload_off = ln->used_in;
	ln->used_in += ALIGN16(job->payload_size);
	if (pl->lossy) { /* its scales staged after its payload (wcc_device.c) */
		lj->lossy = job->kind_data;
		lj->span = pl->span;
		lj->scale_off = ln->used_in;
		ln->used_in += pl->scale_bytes;
		ln->nstaged += lj->pin_in;
	}
	uint8_t *out;
	if (ln->host_target) {
		lj->out_off = ln->used_out;
		ln->used_out += ALIGN16(job->out_size);
		out = ln->d_out + lj->out_off;
	} else {
		lj->dev_out = dev_out;
		out = dev_out;
	}
	const uint8_t *d_payload = ln->d_in + lj->payload_off;
	const uint32_t C = job->chunk_symbols;
	uint8_t *codes = NULL; /* a lossy tile's codes on the device */
	if (pl->lossy && pl->direct) {
		codes = ln->d_scr + ln->used_scr;
		ln->used_scr += ALIGN16(pl->n);
	} else if (pl->lossy) {
		codes = (uint8_t *)d_payload + (pl->v[0].body - job->payload);
	}
	wcc_merge_tile t;
	memset(&t, 0, sizeof(t));
	for (unsigned k = 0; k < job->layout.nplanes; k++) {
		const wc_plane_view *v = &pl->v[k];
		const uint8_t *d_body = d_payload + (v->body - job->payload);
		if (v->mode == WC_PLANE_RAW) {
			t.src[k] = d_body;
		} else if (v->mode == WC_PLANE_CONST) {
			t.src[k] = NULL;
			t.value[k] = v->value;
		} else if (v->mode == WC_PLANE_PACK) { /* unpacked by the merge kernel */
			t.src[k] = d_body;
			t.bits[k] = v->value;
		} else { /* RANS */
			uint8_t *dst = codes ? codes : out;
			const int fused = (int)k == pl->fused;
			if (!pl->direct && !fused) {
				dst = ln->d_scr + ln->used_scr;
				ln->used_scr += ALIGN16(pl->n);
			}
			t.src[k] = fused ? NULL : dst; /* fused: never read */
			const uint32_t nc = pl->nchunks[k];
			const uint8_t *d_data = d_body + 4u * nc;
			uint32_t start = 0;
			for (uint32_t c = 0; c < nc; c++) {
				uint32_t end = rd32(v->body + 4u * c);
				size_t first = (size_t)c * C;
				wcc_chunk *ch = &ln->chunks[ln->nchunks];
				ch->in = d_data + start;
				ch->out = fused ? out + first * job->layout.elem_size : dst + first;
				ch->in_bytes = end - start;
				ch->nsym = (uint32_t)(pl->n - first < C ? pl->n - first : C);
				ch->job = j;
				ch->fuse = fused ? WCC_FUSE(ln->ntiles, k) : 0;
				ln->chunk_table[ln->nchunks] = pl->base + v->table;
				ln->nchunks++;
				start = end;
			}
		}
	}
	if (pl->lossy) {
		wcc_lossy_merge_tile(&t, lj->lossy, (uint32_t)pl->n, &pl->span, codes, ln->d_in + lj->scale_off, out);
		const uint32_t ti = (uint32_t)ln->ntiles++;
		ln->tiles[ti] = t;
		for (size_t b = 0; b < pl->n; b += WCC_MERGE_SEG)
			ln->segs[ln->nsegs++] = (wcc_merge_seg){ .tile = ti, .begin = (uint32_t)b,
								 .count = (uint32_t)(pl->n - b < WCC_MERGE_SEG ? pl->n - b
														: WCC_MERGE_SEG) };
	} else if (!pl->direct) {
		t.out = out;
		t.n = (uint32_t)pl->n;
		t.kind = job->layout.kind;
		t.elem_size = job->layout.elem_size;
		t.nplanes = job->layout.nplanes;
		const uint32_t ti = (uint32_t)ln->ntiles++;
		ln->tiles[ti] = t;
		for (size_t b = 0; pl->fused < 0 && b < pl->n; b += WCC_MERGE_SEG) {
			wcc_merge_seg *s = &ln->segs[ln->nsegs++];
			s->tile = ti;
			s->begin = (uint32_t)b;
			s->count = (uint32_t)(pl->n - b < WCC_MERGE_SEG ? pl->n - b : WCC_MERGE_SEG);
			s->pad = 0;
		}
	}
	ln->njobs++;
	return WC_OK;
}

size_t wcc_lane_desc_bytes(const wcc_lane *ln)
{
	return desc_bytes(0, ln->nchunks, ln->ntiles, ln->nsegs);
}

void wcc_lane_write_descs(const wcc_lane *ln, uint8_t *base, size_t off, uint32_t *cnt, wcc_desc_offsets *o)
{
	o->chunks = off;
	off += ALIGN16(sizeof(wcc_chunk) * ln->nchunks);
	o->blocks = off;
	off += ALIGN16(sizeof(wcc_rans_block) * ln->nchunks);
	o->tiles = off;
	off += ALIGN16(sizeof(wcc_merge_tile) * ln->ntiles);
	o->segs = off;
	off += ALIGN16(sizeof(wcc_merge_seg) * ln->nsegs);
	o->end = off;
	memset(cnt, 0, (TABLE_SLOTS + 1u) * sizeof(uint32_t));
	for (size_t i = 0; i < ln->nchunks; i++)
		cnt[ln->chunk_table[i] + 1u]++;
	for (uint32_t s = 0; s < TABLE_SLOTS; s++)
		cnt[s + 1u] += cnt[s];
	wcc_chunk *hc = (wcc_chunk *)(base + o->chunks);
	for (size_t i = 0; i < ln->nchunks; i++)
		hc[cnt[ln->chunk_table[i]]++] = ln->chunks[i];
	/* cnt[s] is now the end of table s's run */
	wcc_rans_block *hb = (wcc_rans_block *)(base + o->blocks);
	uint32_t nblocks = 0, start = 0;
	for (uint32_t s = 0; s < TABLE_SLOTS && start < ln->nchunks; s++) {
		uint32_t end = cnt[s];
		for (uint32_t c = start; c < end; c += WCC_RANS_WARPS) {
			hb[nblocks].first = c;
			hb[nblocks].count = end - c < WCC_RANS_WARPS ? end - c : WCC_RANS_WARPS;
			hb[nblocks].table = s;
			hb[nblocks].pad = 0;
			nblocks++;
		}
		if (end > start)
			start = end;
	}
	o->nblocks = nblocks;
	memcpy(base + o->tiles, ln->tiles, sizeof(wcc_merge_tile) * ln->ntiles);
	memcpy(base + o->segs, ln->segs, sizeof(wcc_merge_seg) * ln->nsegs);
}

void wcc_lane_reset(wcc_lane *ln)
{
	ln->used_in = ln->used_out = ln->used_scr = 0;
	ln->njobs = ln->nstaged = ln->nchunks = ln->ntiles = ln->nsegs = 0;
}
