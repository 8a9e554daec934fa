/*
 * wcc_lossy.c - what the GPU decoder needs of a lossy tile (docs/FORMAT.md
 * 2.2) besides its codes: the scales it reads, laid out for the device, and
 * its merge tile of kind WCC_KIND_LOSSY. Shared by the lanes (wcc_lane.c)
 * and the resident sets (resident_plan.c).
 */
#include <string.h>

#include "container/lossy_job.h"
#include "wcc_impl.h"

int wcc_scale_span_of(const wc_lossy_params *p, uint64_t first, uint64_t n, wcc_scale_span *s)
{
	const uint64_t C = p->channels, N = p->elems;
	if (C == 0 || N % C || n == 0 || first >= N || n > N - first || N >= UINT32_MAX)
		return -1;
	const uint64_t per = N / C, group = p->group ? p->group : per;
	const uint64_t groups = (per + group - 1) / group, last = first + n - 1;
	memset(s, 0, sizeof *s);
	if (p->axis == 0) {
		s->slo = first / per * groups + first % per / group;
		s->shi = last / per * groups + last % per / group + 1;
		s->count = s->shi - s->slo;
	} else {
		s->slo = first / C / group;
		s->shi = (C - 1) * groups + last / C / group + 1;
		s->count = s->shi - s->slo;
		if (groups > 1) { /* only the tile's rows' groups of each channel */
			s->ng = (uint32_t)(last / C / group - s->slo + 1);
			s->count = C * s->ng;
		}
	}
	s->groups = (uint32_t)groups;
	return s->shi <= C * groups ? 0 : -1;
}

void wcc_scale_copy(const float *scales, uint32_t channels, const wcc_scale_span *s, uint8_t *dst)
{
	if (s->ng == 0) {
		memcpy(dst, scales + s->slo, s->count * 4);
		return;
	}
	for (uint64_t c = 0; c < channels; c++)
		memcpy(dst + 4u * s->ng * c, scales + c * s->groups + s->slo, 4u * s->ng);
}

void wcc_lossy_merge_tile(wcc_merge_tile *t, const wc_lossy_job *lj, uint32_t n, const wcc_scale_span *s,
			  const uint8_t *codes, const uint8_t *scales, uint8_t *out)
{
	const wc_lossy_params *p = &lj->p;
	const uint32_t per = (uint32_t)(p->elems / p->channels);
	memset(t, 0, sizeof *t);
	t->lossy = (wcc_lossy_tile){ .codes = (const int8_t *)codes,
				     .scales = (const float *)scales,
				     .first = (uint32_t)lj->first,
				     .per = per,
				     .channels = p->channels,
				     .group = p->group ? p->group : per,
				     .groups = s->ng ? s->ng : s->groups,
				     .scale_base = (uint32_t)s->slo,
				     .axis = p->axis,
				     .dtype = p->dtype };
	t->out = out;
	t->n = n;
	t->kind = WCC_KIND_LOSSY;
	t->elem_size = p->dtype == WC_LOSSY_F32 ? 4 : 2; /* wc_lossy_dtype_size, not exported */
}
