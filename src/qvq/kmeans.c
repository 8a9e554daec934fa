/* kmeans.c - k-means++ seeding, Lloyd iterations and exact nearest-entry
 * search over uint8 vectors (see kmeans.h for the sources). */
#include "qvq/kmeans.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/limits.h"
#include "core/wc_error.h"
#include "engine/threadpool.h"
#include "qvq/qvq_parallel.h"

/* ---- random numbers: splitmix64 (Steele, Lea & Flood, OOPSLA 2014) ---- */

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [0, n) by multiply-shift (Lemire); n > 0. */
static uint64_t rng_below(uint64_t *s, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)rng_next(s) * n) >> 64);
}

/* ---- distances ---------------------------------------------------------- */

static inline __attribute__((always_inline)) uint32_t dist_n(const uint8_t *a, const uint8_t *b,
							     uint32_t dim)
{
	uint32_t d = 0;
	for (uint32_t i = 0; i < dim; i++) {
		int t = (int)a[i] - (int)b[i];
		d += (uint32_t)(t * t);
	}
	return d;
}

static inline uint32_t vsum(const uint8_t *a, uint32_t dim)
{
	uint32_t s = 0;
	for (uint32_t i = 0; i < dim; i++)
		s += a[i];
	return s;
}

/* ---- exact nearest entry: entries sorted by component sum --------------- */

typedef struct nn_index {
	uint32_t k, dim;
	uint8_t *cb;       /* entries in sum order, k * dim bytes */
	uint32_t *id;      /* their original indices */
	int32_t *sum;      /* their sums, ascending */
	float *perp;       /* their distance from the grey axis (see perp_norm) */
} nn_index;

/* Distance of x from the line through 0 and (1, ..., 1): with s = sum(x),
 * sqrt(|x|^2 - s^2 / dim). Splitting x - c into its component along that
 * line and the rest gives |x - c|^2 >= (s_x - s_c)^2 / dim +
 * (perp(x) - perp(c))^2, a cheap lower bound that skips most distance
 * computations inside the sum window. */
static float perp_norm(const uint8_t *x, uint32_t dim)
{
	uint32_t s = 0, q = 0;
	for (uint32_t i = 0; i < dim; i++) {
		s += x[i];
		q += (uint32_t)x[i] * x[i];
	}
	double r = (double)q - (double)s * s / dim;
	return r > 0 ? (float)sqrt(r) : 0.0f;
}

typedef struct sum_key {
	uint32_t sum, id;
} sum_key;

static int cmp_key(const void *a, const void *b)
{
	const sum_key *x = a, *y = b;
	if (x->sum != y->sum)
		return x->sum < y->sum ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

static void nn_free(nn_index *ix)
{
	free(ix->cb);
	free(ix->id);
	free(ix->sum);
	free(ix->perp);
}

static wc_err nn_build(nn_index *ix, const uint8_t *cb, uint32_t k, uint32_t dim)
{
	memset(ix, 0, sizeof *ix);
	ix->k = k;
	ix->dim = dim;
	sum_key *keys = malloc((size_t)k * sizeof *keys);
	ix->cb = malloc((size_t)k * dim);
	ix->id = malloc((size_t)k * sizeof *ix->id);
	ix->sum = malloc((size_t)k * sizeof *ix->sum);
	ix->perp = malloc((size_t)k * sizeof *ix->perp);
	if (!keys || !ix->cb || !ix->id || !ix->sum || !ix->perp) {
		free(keys);
		nn_free(ix);
		return wc_fail(WC_E_NOMEM, "k-means: no memory for the search index");
	}
	for (uint32_t c = 0; c < k; c++)
		keys[c] = (sum_key){vsum(cb + (size_t)c * dim, dim), c};
	qsort(keys, k, sizeof *keys, cmp_key);
	for (uint32_t j = 0; j < k; j++) {
		ix->id[j] = keys[j].id;
		ix->sum[j] = (int32_t)keys[j].sum;
		memcpy(ix->cb + (size_t)j * dim, cb + (size_t)keys[j].id * dim, dim);
		ix->perp[j] = perp_norm(ix->cb + (size_t)j * dim, dim);
	}
	free(keys);
	return WC_OK;
}

/* Nearest entry of x (lowest original index on ties); *dout its distance.
 * Scans outward from x's sum, nearer sum first, until the bound
 * (sum(x) - sum(c))^2 > dim * best rules out every remaining entry. */
static inline __attribute__((always_inline)) uint32_t nn_query_dim(const nn_index *ix,
								   const uint8_t *x, uint32_t dim,
								   uint32_t *dout)
{
	int32_t s = (int32_t)vsum(x, dim);
	uint32_t lo = 0, hi = ix->k; /* first position with sum >= s */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (ix->sum[mid] < s)
			lo = mid + 1;
		else
			hi = mid;
	}
	int64_t down = (int64_t)lo - 1, up = lo;
	uint32_t best = UINT32_MAX, bid = UINT32_MAX;
	uint64_t bound = UINT64_MAX;
	const float px = perp_norm(x, dim), inv_dim = 1.0f / (float)dim;
	/* Skip a candidate only when its lower bound exceeds best by more than
	 * float rounding could account for, so ties are still examined. */
	float skip_above = INFINITY;
	for (;;) {
		int64_t j;
		int32_t gap;
		if (up < ix->k && (down < 0 || ix->sum[up] - s <= s - ix->sum[down])) {
			j = up++;
			gap = ix->sum[j] - s;
		} else if (down >= 0) {
			j = down--;
			gap = s - ix->sum[j];
		} else {
			break;
		}
		if ((uint64_t)((int64_t)gap * gap) > bound)
			break;
		float dp = px - ix->perp[j];
		if ((float)gap * (float)gap * inv_dim + dp * dp > skip_above)
			continue;
		uint32_t d = dist_n(x, ix->cb + (size_t)j * dim, dim);
		uint32_t c = ix->id[j];
		if (d < best || (d == best && c < bid)) {
			best = d;
			bid = c;
			bound = (uint64_t)dim * best;
			skip_above = (float)best * 1.0001f + 0.5f;
		}
	}
	*dout = best;
	return bid;
}

static uint32_t nn_query(const nn_index *ix, const uint8_t *x, uint32_t *dout)
{
	if (ix->dim == 12) /* 2x2 RGB patches: let the compiler unroll */
		return nn_query_dim(ix, x, 12, dout);
	return nn_query_dim(ix, x, ix->dim, dout);
}

/* ---- assignment ---------------------------------------------------------- */

typedef struct assign_ctx {
	const nn_index *ix;
	const uint8_t *points;
	uint16_t *out;
	uint64_t *sse; /* per slice */
} assign_ctx;

static void assign_slice(void *p, unsigned slice, size_t begin, size_t end)
{
	assign_ctx *c = p;
	uint32_t dim = c->ix->dim;
	uint64_t sse = 0;
	for (size_t i = begin; i < end; i++) {
		uint32_t d;
		c->out[i] = (uint16_t)nn_query(c->ix, c->points + i * dim, &d);
		sse += d;
	}
	c->sse[slice] = sse;
}

wc_err wc_kmeans_assign(const uint8_t *codebook, uint32_t k, uint32_t dim, const uint8_t *points,
			uint64_t n, unsigned threads, uint16_t *out, uint64_t *sse)
{
	if (k < 1 || k > 65536 || dim < 1 || dim > WC_KMEANS_MAX_DIM)
		return wc_fail(WC_E_INVAL, "k-means: k %u, dim %u", k, dim);
	if (!threads)
		threads = wc_cpu_count();
	nn_index ix;
	wc_err e = nn_build(&ix, codebook, k, dim);
	if (e)
		return e;
	uint64_t *part = calloc(threads, sizeof *part);
	if (!part) {
		nn_free(&ix);
		return wc_fail(WC_E_NOMEM, "k-means: no memory");
	}
	assign_ctx c = {&ix, points, out, part};
	wc_qvq_parallel(threads, n, assign_slice, &c);
	uint64_t total = 0;
	for (unsigned t = 0; t < threads; t++)
		total += part[t];
	if (sse)
		*sse = total;
	free(part);
	nn_free(&ix);
	return e;
}

/* ---- k-means++ seeding ---------------------------------------------------- */

#define SEED_BLOCK 256u

typedef struct seeder {
	uint32_t dim;
	uint64_t n;
	uint8_t *pts;    /* sample sorted by sum */
	uint32_t *psum;  /* their sums */
	uint32_t *d;     /* squared distance to the nearest chosen centre */
	uint64_t nb;     /* blocks */
	uint64_t *bsum;  /* per block: sum of d */
	uint32_t *bmax;  /* per block: max of d */
} seeder;

static void block_refresh(seeder *s, uint64_t b)
{
	uint64_t lo = b * SEED_BLOCK, hi = lo + SEED_BLOCK < s->n ? lo + SEED_BLOCK : s->n;
	uint64_t sum = 0;
	uint32_t mx = 0;
	for (uint64_t i = lo; i < hi; i++) {
		sum += s->d[i];
		mx = s->d[i] > mx ? s->d[i] : mx;
	}
	s->bsum[b] = sum;
	s->bmax[b] = mx;
}

/* Lower d[] with the new centre at sample position p, visiting only blocks
 * whose sum range can hold a point the centre is nearer to. The blocks
 * that can are contiguous around p's (the sample is sorted by sum and gmax,
 * the largest d before this centre, bounds every block); each is updated
 * on its own, so a wide range is spread over the pool's threads with the
 * same result as one thread gives. */
typedef struct seed_step {
	seeder *s;
	const uint8_t *c; /* the new centre */
	int64_t sc;       /* its sum */
	uint64_t b0;      /* first block of the range */
} seed_step;

static void seed_block(seed_step *st, uint64_t b)
{
	seeder *s = st->s;
	uint64_t dimu = s->dim;
	uint64_t lo = b * SEED_BLOCK, hi = lo + SEED_BLOCK < s->n ? lo + SEED_BLOCK : s->n;
	int64_t gap = (int64_t)s->psum[lo] > st->sc ? (int64_t)s->psum[lo] - st->sc
		    : (int64_t)s->psum[hi - 1] < st->sc ? st->sc - (int64_t)s->psum[hi - 1] : 0;
	if ((uint64_t)(gap * gap) >= dimu * s->bmax[b])
		return; /* no point of the block is farther from its centre than gap */
	int changed = 0;
	for (uint64_t j = lo; j < hi; j++) {
		int64_t g = (int64_t)s->psum[j] - st->sc;
		if ((uint64_t)(g * g) >= dimu * s->d[j])
			continue;
		uint32_t d = dist_n(s->pts + j * s->dim, st->c, s->dim);
		if (d < s->d[j]) {
			s->d[j] = d;
			changed = 1;
		}
	}
	if (changed)
		block_refresh(s, b);
}

/* A pool's share: SEED_CHUNK blocks (2048 sample points). The pool wakes
 * one worker per share beyond the caller's, so a narrow range wakes few
 * (waking all 15 workers of a 16-CPU machine for every centre made the
 * seeding slower than with 4 threads). */
#define SEED_CHUNK 8u

typedef struct seed_range {
	seed_step *st;
	uint64_t end; /* one past the range's last block */
} seed_range;

static void seed_chunk(void *p, size_t i)
{
	seed_range *r = p;
	uint64_t b = r->st->b0 + (uint64_t)i * SEED_CHUNK;
	uint64_t e = b + SEED_CHUNK < r->end ? b + SEED_CHUNK : r->end;
	for (; b < e; b++)
		seed_block(r->st, b);
}

static void seeder_add(seeder *s, uint64_t p, uint32_t gmax, wc_threadpool *pool)
{
	seed_step st = {s, s->pts + p * s->dim, s->psum[p], 0};
	uint64_t dimu = s->dim, pb = p / SEED_BLOCK, hi = pb, lo = pb;
	while (hi + 1 < s->nb) { /* upwards: gaps grow with the block's first sum */
		int64_t gap = (int64_t)s->psum[(hi + 1) * SEED_BLOCK] - st.sc;
		if (gap > 0 && (uint64_t)(gap * gap) >= dimu * gmax)
			break;
		hi++;
	}
	while (lo > 0) { /* downwards: with the block's last sum */
		int64_t gap = st.sc - (int64_t)s->psum[lo * SEED_BLOCK - 1];
		if (gap > 0 && (uint64_t)(gap * gap) >= dimu * gmax)
			break;
		lo--;
	}
	st.b0 = lo;
	uint64_t nchunks = (hi - lo) / SEED_CHUNK + 1;
	if (pool && nchunks >= 2) {
		seed_range r = {&st, hi + 1};
		wc_threadpool_run(pool, seed_chunk, &r, (size_t)nchunks);
	} else {
		for (uint64_t b = lo; b <= hi; b++)
			seed_block(&st, b);
	}
}

static wc_err seed_kmeanspp(const uint8_t *sample, uint64_t n, uint32_t dim, uint32_t k,
			    uint64_t *rng, uint8_t *centres, uint32_t *k_out,
			    const wc_kmeans_opts *o)
{
	seeder s = {.dim = dim, .n = n, .nb = (n + SEED_BLOCK - 1) / SEED_BLOCK};
	sum_key *keys = malloc(n * sizeof *keys);
	s.pts = malloc(n * dim);
	s.psum = malloc(n * sizeof *s.psum);
	s.d = malloc(n * sizeof *s.d);
	s.bsum = malloc(s.nb * sizeof *s.bsum);
	s.bmax = malloc(s.nb * sizeof *s.bmax);
	wc_err e = WC_OK;
	/* Wide ranges of blocks are updated by a pool (no pool: one thread), of
	 * at most 8 threads: on a 16-CPU machine (H100 host, K=65536, 262,144
	 * sample points) 1, 4, 8 and 16 threads seeded in 11.0, 4.5, 4.0 and
	 * 7.9 s; past 8 the per-centre hand-offs cost more than they share. */
	wc_threadpool *pool = NULL;
	unsigned threads = o->threads ? o->threads : wc_cpu_count();
	if (threads > 8)
		threads = 8;
	if (threads > 1 && wc_threadpool_create(threads - 1, &pool) != WC_OK)
		pool = NULL;
	if (!keys || !s.pts || !s.psum || !s.d || !s.bsum || !s.bmax) {
		e = wc_fail(WC_E_NOMEM, "k-means++: no memory for %llu sample points",
			    (unsigned long long)n);
		goto out;
	}
	for (uint64_t i = 0; i < n; i++)
		keys[i] = (sum_key){vsum(sample + i * dim, dim), (uint32_t)i};
	qsort(keys, n, sizeof *keys, cmp_key);
	for (uint64_t i = 0; i < n; i++) {
		memcpy(s.pts + i * dim, sample + (uint64_t)keys[i].id * dim, dim);
		s.psum[i] = keys[i].sum;
		s.d[i] = UINT32_MAX;
	}
	for (uint64_t b = 0; b < s.nb; b++)
		block_refresh(&s, b);
	/* First centre uniformly, then each with probability proportional to d. */
	uint64_t p = rng_below(rng, n);
	uint32_t got = 0;
	for (;;) {
		memcpy(centres + (size_t)got * dim, s.pts + p * dim, dim);
		got++;
		uint32_t gmax = 0;
		for (uint64_t b = 0; b < s.nb; b++)
			gmax = s.bmax[b] > gmax ? s.bmax[b] : gmax;
		if (got == 1) {
			for (uint64_t i = 0; i < n; i++)
				s.d[i] = dist_n(s.pts + i * dim, s.pts + p * dim, dim);
			for (uint64_t b = 0; b < s.nb; b++)
				block_refresh(&s, b);
		} else {
			seeder_add(&s, p, gmax, pool);
		}
		if (o->progress && (got % 1024 == 0 || got == k))
			o->progress(o->progress_ctx, 0, got, k);
		if (got == k)
			break;
		uint64_t total = 0;
		for (uint64_t b = 0; b < s.nb; b++)
			total += s.bsum[b];
		if (total == 0)
			break; /* every sample point is a centre already */
		uint64_t r = rng_below(rng, total), b = 0;
		while (r >= s.bsum[b])
			r -= s.bsum[b++];
		p = b * SEED_BLOCK;
		while (r >= s.d[p])
			r -= s.d[p++];
	}
	*k_out = got;
out:
	if (pool)
		wc_threadpool_destroy(pool);
	free(keys);
	free(s.pts);
	free(s.psum);
	free(s.d);
	free(s.bsum);
	free(s.bmax);
	return e;
}

/* ---- Lloyd iterations ----------------------------------------------------- */

/* One Lloyd step over a slice of the sample: each point's nearest entry
 * (found by the CPU search ix, or given in found by a search elsewhere:
 * the same answer), and the per-slice integer sums and counts of the new
 * means and the number of points whose entry changed. */
typedef struct lloyd_ctx {
	const nn_index *ix;     /* NULL when found is given */
	const uint16_t *found;  /* the entries o->nearest found, or NULL */
	const uint8_t *pts;
	uint32_t dim, k;
	uint32_t *assign;
	uint64_t *sums;   /* per slice: k * dim */
	uint64_t *counts; /* per slice: k */
	uint64_t *changed;/* per slice */
} lloyd_ctx;

static void lloyd_slice(void *p, unsigned slice, size_t begin, size_t end)
{
	lloyd_ctx *c = p;
	uint64_t *sums = c->sums + (size_t)slice * c->k * c->dim;
	uint64_t *counts = c->counts + (size_t)slice * c->k;
	memset(sums, 0, (size_t)c->k * c->dim * sizeof *sums);
	memset(counts, 0, (size_t)c->k * sizeof *counts);
	uint64_t changed = 0;
	for (size_t i = begin; i < end; i++) {
		const uint8_t *x = c->pts + i * c->dim;
		uint32_t d, a = c->found ? c->found[i] : nn_query(c->ix, x, &d);
		changed += a != c->assign[i];
		c->assign[i] = a;
		counts[a]++;
		uint64_t *s = sums + (size_t)a * c->dim;
		for (uint32_t j = 0; j < c->dim; j++)
			s[j] += x[j];
	}
	c->changed[slice] = changed;
}

/* Run o->nearest; on an error, warn and return it (the caller then searches
 * on the CPU from here on). An index >= k is the search's fault too. */
static wc_err nearest_elsewhere(const wc_kmeans_opts *o, const uint8_t *cb, uint32_t k,
				const uint8_t *pts, uint64_t n, uint16_t *out)
{
	wc_clear_detail();
	wc_err e = o->nearest(o->nearest_ctx, cb, k, o->dim, pts, n, out);
	for (uint64_t i = 0; !e && i < n; i++)
		if (out[i] >= k)
			e = wc_fail(WC_E_BACKEND, "entry %u of %u for vector %llu", out[i], k,
				    (unsigned long long)i);
	if (e && e != WC_E_UNSUPPORTED) /* unsupported: not for this search, no fault */
		wc_log(WC_LOG_WARN, "k-means: the nearest-entry search on the decode backend failed (%s%s%s); "
		       "searching on the CPU", wc_strerror(e), *wc_last_detail() ? ": " : "",
		       wc_last_detail());
	return e;
}

wc_err wc_kmeans_train(const uint8_t *points, uint64_t n, const wc_kmeans_opts *o,
		       uint8_t *codebook, uint32_t *k_out)
{
	uint32_t k = o->k, dim = o->dim;
	if (k < 1 || k > 65536 || dim < 1 || dim > WC_KMEANS_MAX_DIM || n == 0)
		return wc_fail(WC_E_INVAL, "k-means: k %u, dim %u, %llu points", k, dim,
			       (unsigned long long)n);
	unsigned threads = o->threads ? o->threads : wc_cpu_count();
	uint32_t iters = o->iterations ? o->iterations : 10;
	uint64_t rng = o->seed ^ 0x5157512d6b6d6e73ull; /* "QVQ-kmns" */
	uint64_t tn = o->train_points;
	if (!tn) {
		tn = (uint64_t)k * 32 > (1u << 18) ? (uint64_t)k * 32 : (1u << 18);
		if (tn > (1u << 21))
			tn = 1u << 21;
	}
	if (tn > n)
		tn = n;
	uint64_t sn = o->seed_points;
	if (!sn)
		sn = (uint64_t)k * 4 > (1u << 14) ? (uint64_t)k * 4 : (1u << 14);
	if (sn > tn)
		sn = tn;

	wc_err e = WC_OK;
	uint8_t *train = NULL, *seedpts = NULL;
	uint32_t *assign = NULL;
	uint64_t *sums = NULL, *counts = NULL, *changed = NULL;
	uint16_t *found = NULL; /* assignments of o->nearest */
	const uint8_t *tp = points;
	if (tn < n) { /* sample with replacement */
		train = malloc(tn * dim);
		if (!train) { e = wc_fail(WC_E_NOMEM, "k-means: no memory"); goto out; }
		for (uint64_t i = 0; i < tn; i++)
			memcpy(train + i * dim, points + rng_below(&rng, n) * dim, dim);
		tp = train;
	}
	seedpts = malloc(sn * dim);
	if (!seedpts) { e = wc_fail(WC_E_NOMEM, "k-means: no memory"); goto out; }
	if (sn == tn) /* the whole training set: every distinct vector can be a centre */
		memcpy(seedpts, tp, tn * dim);
	else
		for (uint64_t i = 0; i < sn; i++)
			memcpy(seedpts + i * dim, tp + rng_below(&rng, tn) * dim, dim);
	uint32_t got = 0;
	if ((e = seed_kmeanspp(seedpts, sn, dim, k, &rng, codebook, &got, o)))
		goto out;
	k = got;

	assign = malloc(tn * sizeof *assign);
	sums = malloc((size_t)threads * k * dim * sizeof *sums);
	counts = malloc((size_t)threads * k * sizeof *counts);
	changed = calloc(threads, sizeof *changed);
	if (o->nearest)
		found = malloc(tn * sizeof *found);
	if (!assign || !sums || !counts || !changed || (o->nearest && !found)) {
		e = wc_fail(WC_E_NOMEM, "k-means: no memory for Lloyd iterations");
		goto out;
	}
	memset(assign, 0xff, tn * sizeof *assign);
	for (uint32_t it = 0; it < iters && !e; it++) {
		if (found && nearest_elsewhere(o, codebook, k, tp, tn, found) == WC_OK) {
			lloyd_ctx c = {NULL, found, tp, dim, k, assign, sums, counts, changed};
			wc_qvq_parallel(threads, tn, lloyd_slice, &c);
		} else {
			free(found); /* a failed search is not tried again */
			found = NULL;
			nn_index ix;
			if ((e = nn_build(&ix, codebook, k, dim)))
				break;
			lloyd_ctx c = {&ix, NULL, tp, dim, k, assign, sums, counts, changed};
			wc_qvq_parallel(threads, tn, lloyd_slice, &c);
			nn_free(&ix);
		}
		uint64_t nchanged = 0;
		for (unsigned t = 0; t < threads; t++)
			nchanged += changed[t];
		/* Merge the slices' integer sums (order-free) into rounded means;
		 * an entry nothing chose keeps its value. */
		for (uint32_t a = 0; a < k; a++) {
			uint64_t cnt = 0;
			for (unsigned t = 0; t < threads; t++)
				cnt += counts[(size_t)t * k + a];
			if (!cnt)
				continue;
			for (uint32_t j = 0; j < dim; j++) {
				uint64_t s = 0;
				for (unsigned t = 0; t < threads; t++)
					s += sums[((size_t)t * k + a) * dim + j];
				codebook[(size_t)a * dim + j] = (uint8_t)((s + cnt / 2) / cnt);
			}
		}
		if (o->progress)
			o->progress(o->progress_ctx, 1, it + 1, iters);
		if (nchanged == 0)
			break;
	}
	*k_out = k;
out:
	free(train);
	free(seedpts);
	free(assign);
	free(sums);
	free(counts);
	free(changed);
	free(found);
	return e;
}

/* Sum of squared distances of the vectors to their entries. */
typedef struct sse_ctx {
	const uint8_t *cb, *points;
	const uint16_t *idx;
	uint32_t dim;
	uint64_t *part;
} sse_ctx;

static void sse_slice(void *p, unsigned slice, size_t begin, size_t end)
{
	sse_ctx *c = p;
	uint64_t t = 0;
	for (size_t i = begin; i < end; i++)
		t += dist_n(c->points + i * c->dim, c->cb + (size_t)c->idx[i] * c->dim, c->dim);
	c->part[slice] = t;
}

wc_err wc_kmeans_assign_opts(const uint8_t *codebook, uint32_t k, const uint8_t *points,
			     uint64_t n, const wc_kmeans_opts *o, uint16_t *out, uint64_t *sse)
{
	uint32_t dim = o->dim;
	if (k < 1 || k > 65536 || dim < 1 || dim > WC_KMEANS_MAX_DIM)
		return wc_fail(WC_E_INVAL, "k-means: k %u, dim %u", k, dim);
	unsigned threads = o->threads ? o->threads : wc_cpu_count();
	if (!o->nearest || nearest_elsewhere(o, codebook, k, points, n, out) != WC_OK)
		return wc_kmeans_assign(codebook, k, dim, points, n, threads, out, sse);
	if (!sse)
		return WC_OK;
	uint64_t *part = calloc(threads, sizeof *part);
	if (!part)
		return wc_fail(WC_E_NOMEM, "k-means: no memory");
	sse_ctx c = {codebook, points, out, dim, part};
	wc_qvq_parallel(threads, n, sse_slice, &c);
	*sse = 0;
	for (unsigned t = 0; t < threads; t++)
		*sse += part[t];
	free(part);
	return WC_OK;
}
