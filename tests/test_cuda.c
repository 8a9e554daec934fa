/* test_cuda.c - the CUDA plugin against the CPU decoder: bit-exact output for
 * every layout, plane mode, chunk size and odd tile size, batches of 1 to
 * thousands of tiles, corrupted streams detected (on the host path and on
 * the device-only path), zstd planes through the CPU, and whole tensors
 * decoded into device memory. Exits 77 when no GPU is usable. */
#include <check.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>
#include <xxhash.h>

#include "codec/tile_codec.h"
#include "codec_testutil.h"
#include "cuda_plugin.h"
#include "container/container.h"
#include "engine/backend.h"
#include "qvq/kmeans.h"
#include "wcodec_cuda.h"
#include "st_builder.h"

typedef wc_err (*decode_jobs_fn)(wc_tile_job *, size_t, void *const *, int);
typedef wc_err (*decode_tensor_fn)(const char *, const char *, void *, size_t, int, cudaStream_t);
typedef wc_err (*load_fn)(wc_tensor_file *const *, size_t, const wc_load_range *, size_t, int,
			  const wcodec_cuda_load_opts *, wcodec_cuda_load_stats *);

static wc_backend *g_be;
static wcodec_cuda_vq_nearest_fn g_vq_nearest;
static wc_backend_create_fn g_create;
static decode_jobs_fn g_decode_jobs;
static decode_tensor_fn g_decode_tensor;
static load_fn g_load;

/* ---- test tiles --------------------------------------------------------- */

enum { LAYOUTS = 6 };
static const char *const layout_names[LAYOUTS] = { "bf16", "f32", "shuffle2", "shuffle4", "shuffle8", "bytes" };
/* One table set per layout (a "file"): from weight-like data, every symbol
 * given a count so any data can be rANS-coded. table_key = 100 + layout. */
static wc_freqtab g_tabs[LAYOUTS][WC_MAX_PLANES];

enum gen { GEN_WEIGHTS, GEN_RANDOM, GEN_CONST, GEN_MIXED, GEN_SMALL, GEN_REPEAT, GENS };

static void gen_data(unsigned li, enum gen g, uint8_t *d, size_t nbytes, uint64_t seed)
{
	size_t n = nbytes;
	switch (g) {
	case GEN_WEIGHTS:
		if (li == 0) {
			tu_weights_bf16(d, n / 2, 0.02, seed);
		} else if (li == 1) {
			tu_weights_f32(d, n / 4, 0.02, seed);
		} else if (li == 2) {
			tu_weights_f16(d, n / 2, 0.05, seed);
		} else {
			/* small signed integers / skewed bytes */
			for (size_t i = 0; i < n; i++)
				d[i] = (uint8_t)(tu_normal(&seed) * 6.0);
		}
		return;
	case GEN_RANDOM:
		for (size_t i = 0; i < n; i++)
			d[i] = (uint8_t)tu_next(&seed);
		return;
	case GEN_CONST:
		for (size_t i = 0; i < n; i++)
			d[i] = (uint8_t)(0x5a + (i % 2));
		return;
	case GEN_MIXED: /* byte k of each 8: constant, skewed or random */
		for (size_t i = 0; i < n; i++) {
			unsigned k = i % 8;
			d[i] = k == 7 ? 0 : k >= 4 ? (uint8_t)(tu_normal(&seed) * 3.0) : (uint8_t)tu_next(&seed);
		}
		return;
	case GEN_SMALL: /* byte k of each 8: 2, 4 or 16 equiprobable values (PACK planes) */
		for (size_t i = 0; i < n; i++)
			d[i] = (uint8_t)(tu_next(&seed) % (i % 8 % 3 == 0 ? 2u : i % 8 % 3 == 1 ? 4u : 16u));
		return;
	default: /* repetitive: zstd wins */
		for (size_t i = 0; i < n; i++)
			d[i] = (uint8_t)((i * 7) % 61 + ((i / 4096) & 3));
		return;
	}
}

/* Called from main, outside any test: plain checks. */
static void build_tables(void)
{
	for (unsigned li = 0; li < LAYOUTS; li++) {
		wc_layout l;
		if (wc_layout_parse(layout_names[li], &l) != 0)
			abort();
		size_t n = 1 << 16, nbytes = n * l.elem_size;
		uint8_t *d = malloc(nbytes), *planes[WC_MAX_PLANES];
		gen_data(li, GEN_WEIGHTS, d, nbytes, 7 + li);
		for (unsigned p = 0; p < l.nplanes; p++)
			planes[p] = malloc(n);
		wc_planes_split(l, d, n, planes);
		for (unsigned p = 0; p < l.nplanes; p++) {
			uint64_t h[256];
			tu_hist(planes[p], n, h);
			for (unsigned s = 0; s < 256; s++)
				h[s] = h[s] * 64 + 1;
			if (wc_freq_normalize(h, &g_tabs[li][p]) != WC_OK)
				abort();
			free(planes[p]);
		}
		free(d);
	}
}

typedef struct ttile {
	uint8_t *data, *payload, *out;
	size_t nbytes, plen;
	wc_tile_job job;
} ttile;

/* Encode a tile of nbytes of kind g for layout li with chunk size C. */
static void make_tile(ttile *t, unsigned li, enum gen g, size_t nbytes, uint32_t C, uint64_t seed)
{
	wc_layout l;
	wc_layout_parse(layout_names[li], &l);
	nbytes -= nbytes % l.elem_size;
	memset(t, 0, sizeof(*t));
	t->nbytes = nbytes;
	t->data = malloc(nbytes + 1);
	gen_data(li, g, t->data, nbytes, seed);
	wc_plane_plan plan[WC_MAX_PLANES];
	for (unsigned p = 0; p < l.nplanes; p++)
		plan[p] = (wc_plane_plan){ &g_tabs[li][p], p, g == GEN_REPEAT };
	size_t cap = wc_tile_encode_bound(l, nbytes, C);
	t->payload = malloc(cap);
	wc_err e = wc_tile_encode(l, t->data, nbytes, plan, C, t->payload, cap, &t->plen, NULL);
	ck_assert_msg(e == WC_OK, "encode: %s", wc_last_detail());
	t->out = malloc(nbytes + 16);
	memset(t->out, 0xee, nbytes + 16);
	t->job = (wc_tile_job){
		.kind = WC_JOB_PLANES, .layout = l, .chunk_symbols = C,
		.payload = t->payload, .payload_size = (uint32_t)t->plen,
		.tables = g_tabs[li], .ntables = l.nplanes, .table_key = 100 + li,
		.out = t->out, .out_size = (uint32_t)nbytes,
		.dhash = XXH3_64bits(t->data, nbytes), .status = WC_E__COUNT,
	};
}

static void free_tile(ttile *t)
{
	free(t->data);
	free(t->payload);
	free(t->out);
}

/* Decode tiles[0..n) in one backend call; check every one bit-exact
 * against the original and the CPU decoder. */
static void decode_and_check(ttile *t, size_t n)
{
	wc_tile_job *jobs = malloc(n * sizeof(*jobs));
	for (size_t i = 0; i < n; i++)
		jobs[i] = t[i].job;
	ck_assert_int_eq(g_be->ops->decode(g_be, jobs, n), WC_OK);
	uint8_t *ref = NULL;
	size_t refcap = 0;
	for (size_t i = 0; i < n; i++) {
		ck_assert_msg(jobs[i].status == WC_OK, "tile %zu (%zu bytes): status %d: %s", i, t[i].nbytes,
			      jobs[i].status, jobs[i].detail);
		ck_assert_msg(memcmp(t[i].out, t[i].data, t[i].nbytes) == 0, "tile %zu (%zu bytes, %s) differs", i,
			      t[i].nbytes, wc_layout_name(t[i].job.layout));
		ck_assert_uint_eq(t[i].out[t[i].nbytes], 0xee); /* nothing written past the end */
		if (t[i].nbytes > refcap) {
			refcap = t[i].nbytes;
			ref = realloc(ref, refcap);
		}
		ck_assert_int_eq(wc_tile_decode(t[i].job.layout, t[i].payload, t[i].plen, t[i].job.tables,
						t[i].job.ntables, t[i].job.chunk_symbols, ref, t[i].nbytes),
				 WC_OK);
		ck_assert(memcmp(ref, t[i].out, t[i].nbytes) == 0);
	}
	free(ref);
	free(jobs);
}

/* ---- tests ---------------------------------------------------------------- */

START_TEST(every_layout_mode_and_size)
{
	static const uint32_t Cs[] = { 32, 4096, 16384 };
	ttile *t = calloc(2000, sizeof(*t));
	size_t n = 0;
	uint64_t seed = 1;
	for (unsigned li = 0; li < LAYOUTS; li++) {
		wc_layout l;
		wc_layout_parse(layout_names[li], &l);
		for (unsigned ci = 0; ci < 3; ci++) {
			const uint32_t C = Cs[ci];
			const size_t elems[] = { 1, 3, 31, 32, 33, 511, 512, 513, C - 1, C, C + 1, 3 * (size_t)C + 17 };
			for (unsigned si = 0; si < sizeof(elems) / sizeof(elems[0]); si++)
				for (unsigned g = 0; g < GEN_REPEAT; g++)
					make_tile(&t[n++], li, (enum gen)g, elems[si] * l.elem_size, C, seed++);
		}
		/* one full 1 MiB tile of weights per layout */
		make_tile(&t[n++], li, GEN_WEIGHTS, 1u << 20, 16384, seed++);
	}
	/* every plane mode the GPU decodes must have occurred */
	int seen[WC_PLANE_MODES] = { 0 };
	for (size_t i = 0; i < n; i++) {
		wc_plane_view v[WC_MAX_PLANES];
		ck_assert_int_eq(wc_tile_parse(t[i].job.layout, t[i].payload, t[i].plen, t[i].nbytes,
					       t[i].job.ntables, v), WC_OK);
		for (unsigned p = 0; p < t[i].job.layout.nplanes; p++)
			seen[v[p].mode]++;
	}
	ck_assert_int_gt(seen[WC_PLANE_RAW], 0);
	ck_assert_int_gt(seen[WC_PLANE_CONST], 0);
	ck_assert_int_gt(seen[WC_PLANE_RANS], 100);
	ck_assert_int_gt(seen[WC_PLANE_PACK], 100);
	decode_and_check(t, n);
	for (size_t i = 0; i < n; i++)
		free_tile(&t[i]);
	free(t);
}
END_TEST

START_TEST(batches_of_one_to_thousands)
{
	static const size_t sizes[] = { 1, 2, 7, 100, 1000, 3000 };
	ttile *t = calloc(3000, sizeof(*t));
	for (size_t i = 0; i < 3000; i++)
		make_tile(&t[i], i % 3 == 2 ? 1 : 0, GEN_WEIGHTS, 4096 + 64 * (i % 5), 256, 1000 + i);
	for (unsigned k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		for (size_t i = 0; i < sizes[k]; i++)
			memset(t[i].out, 0xee, t[i].nbytes + 16);
		decode_and_check(t, sizes[k]);
	}
	for (size_t i = 0; i < 3000; i++)
		free_tile(&t[i]);
	free(t);
}
END_TEST

START_TEST(zstd_planes_go_through_the_cpu)
{
	ttile t[6];
	for (unsigned li = 0; li < LAYOUTS; li++)
		make_tile(&t[li], li, GEN_REPEAT, 100000, 4096, 77 + li);
	int zstd = 0;
	for (unsigned li = 0; li < LAYOUTS; li++) {
		wc_plane_view v[WC_MAX_PLANES];
		wc_tile_parse(t[li].job.layout, t[li].payload, t[li].plen, t[li].nbytes, t[li].job.ntables, v);
		for (unsigned p = 0; p < t[li].job.layout.nplanes; p++)
			zstd += v[p].mode == WC_PLANE_ZSTD;
	}
	ck_assert_int_gt(zstd, 0);
	decode_and_check(t, LAYOUTS);
	for (unsigned li = 0; li < LAYOUTS; li++)
		free_tile(&t[li]);
}
END_TEST

/* Damage tile i's first rANS plane: mode 0 flips a bit of a lane state,
 * 1 a bit of a renormalisation word, 2 breaks the chunk_end array. */
static int corrupt(ttile *t, unsigned how, uint64_t *rng)
{
	wc_plane_view v[WC_MAX_PLANES];
	ck_assert_int_eq(wc_tile_parse(t->job.layout, t->payload, t->plen, t->nbytes, t->job.ntables, v), WC_OK);
	for (unsigned p = 0; p < t->job.layout.nplanes; p++) {
		if (v[p].mode != WC_PLANE_RANS)
			continue;
		uint8_t *body = t->payload + (v[p].body - t->payload);
		size_t n = t->nbytes / t->job.layout.elem_size, C = t->job.chunk_symbols;
		size_t nc = (n + C - 1) / C, k = tu_next(rng) % nc;
		uint32_t start = 0, end;
		if (k)
			memcpy(&start, body + 4 * (k - 1), 4);
		memcpy(&end, body + 4 * k, 4);
		uint8_t *chunk = body + 4 * nc + start;
		if (how == 0) {
			chunk[4 * (tu_next(rng) % 32) + 1] ^= (uint8_t)(1u << (tu_next(rng) % 8));
		} else if (how == 1) {
			if (end - start <= 132)
				continue;
			chunk[128 + tu_next(rng) % (end - start - 132)] ^= 0x10;
		} else {
			body[4 * k] ^= 0x40;
		}
		return 1;
	}
	return 0;
}

/* Corrupted tiles end WC_E_CORRUPT, the others decode exactly, on the host
 * path (dev == 0) and on the device-only path (dev == 1), where nothing but
 * the GPU's stream checks stands between a damaged chunk and wrong bytes. */
static void corrupted_batch(int dev)
{
	enum { N = 300 };
	ttile *t = calloc(N, sizeof(*t));
	int bad[N] = { 0 };
	uint64_t rng = 99;
	int nbad = 0;
	for (size_t i = 0; i < N; i++) {
		make_tile(&t[i], i % 2 ? 1 : 0, GEN_WEIGHTS, 65536, i % 4 ? 4096 : 32, 5000 + i);
		if (i % 3 == 0)
			nbad += bad[i] = corrupt(&t[i], (unsigned)(i / 3 % 3), &rng);
	}
	ck_assert_int_gt(nbad, 60); /* about 75 of the 100 candidates have a chunk to damage */
	wc_tile_job jobs[N];
	for (size_t i = 0; i < N; i++)
		jobs[i] = t[i].job;
	if (!dev) {
		ck_assert_int_eq(g_be->ops->decode(g_be, jobs, N), WC_OK);
	} else {
		void *dst[N];
		uint8_t *d;
		ck_assert_int_eq(cudaMalloc((void **)&d, (size_t)N * 65536), cudaSuccess);
		ck_assert_int_eq(cudaMemset(d, 0xee, (size_t)N * 65536), cudaSuccess);
		for (size_t i = 0; i < N; i++)
			dst[i] = d + i * 65536;
		ck_assert_int_eq(g_decode_jobs(jobs, N, dst, 0), WC_OK);
		for (size_t i = 0; i < N; i++)
			ck_assert_int_eq(cudaMemcpy(t[i].out, dst[i], t[i].nbytes, cudaMemcpyDeviceToHost), cudaSuccess);
		cudaFree(d);
	}
	for (size_t i = 0; i < N; i++) {
		if (bad[i]) {
			ck_assert_msg(jobs[i].status == WC_E_CORRUPT, "corrupted tile %zu: status %d", i, jobs[i].status);
			ck_assert(jobs[i].detail[0] != '\0'); /* with a reason */
		} else {
			ck_assert_msg(jobs[i].status == WC_OK, "tile %zu: status %d", i, jobs[i].status);
			ck_assert_msg(memcmp(t[i].out, t[i].data, t[i].nbytes) == 0, "tile %zu differs", i);
		}
	}
	for (size_t i = 0; i < N; i++)
		free_tile(&t[i]);
	free(t);
}

START_TEST(corruption_detected_host_path)
{
	corrupted_batch(0);
}
END_TEST

START_TEST(corruption_detected_device_path)
{
	corrupted_batch(1);
}
END_TEST

/* Page-locked caller buffers go by DMA directly; mixed with pageable ones
 * in one batch (runs of staged payloads and outputs between them). */
START_TEST(pinned_and_pageable_buffers_mixed)
{
	enum { N = 40 };
	ttile t[N];
	for (unsigned i = 0; i < N; i++) {
		make_tile(&t[i], i % 2 ? 0 : 1, GEN_WEIGHTS, 50000 + 16 * i, 4096, 700 + i);
		if (i % 3 == 0 || i % 5 == 0) {
			/* private pages, registered with the driver */
			size_t pc = (t[i].plen + 4095) & ~(size_t)4095, oc = (t[i].nbytes + 16 + 4095) & ~(size_t)4095;
			uint8_t *p = aligned_alloc(4096, pc), *o = aligned_alloc(4096, oc);
			memcpy(p, t[i].payload, t[i].plen);
			memset(o, 0xee, oc);
			free(t[i].payload);
			free(t[i].out);
			t[i].payload = p;
			t[i].out = o;
			t[i].job.payload = p;
			t[i].job.out = o;
			if (i % 3 == 0)
				ck_assert_int_eq(cudaHostRegister(p, pc, cudaHostRegisterDefault), cudaSuccess);
			if (i % 5 == 0)
				ck_assert_int_eq(cudaHostRegister(o, oc, cudaHostRegisterDefault), cudaSuccess);
		}
	}
	decode_and_check(t, N);
	for (unsigned i = 0; i < N; i++) {
		if (i % 3 == 0)
			cudaHostUnregister(t[i].payload);
		if (i % 5 == 0)
			cudaHostUnregister(t[i].out);
		free_tile(&t[i]);
	}
}
END_TEST

/* The engine's loader finds the plugin (WCODEC_PLUGIN_DIR) and "auto"
 * chooses it when a GPU is usable; wc_backend_decode goes through it. */
START_TEST(engine_loader_picks_cuda)
{
	char dir[1024];
	const char *top = getenv("top_builddir");
	snprintf(dir, sizeof dir, "%s/cuda/.libs", top ? top : ".");
	setenv("WCODEC_PLUGIN_DIR", dir, 1);
	wc_backend *be;
	wc_backend_opts o = { .threads = 2, .gpu = 0, .gpu_memory_limit = 64u << 20 };
	ck_assert_msg(wc_backend_create("auto", &o, &be) == WC_OK, "%s", wc_last_detail());
	ck_assert_str_eq(be->ops->name, "cuda");
	ck_assert_uint_ge(be->max_batch, 16);
	ttile t[20];
	wc_tile_job jobs[20];
	for (unsigned i = 0; i < 20; i++) {
		make_tile(&t[i], i % LAYOUTS, GEN_WEIGHTS, 30000, 1024, 900 + i);
		jobs[i] = t[i].job;
	}
	ck_assert_int_eq(wc_backend_decode(be, jobs, 20), WC_OK);
	for (unsigned i = 0; i < 20; i++) {
		ck_assert_int_eq(jobs[i].status, WC_OK);
		ck_assert(memcmp(t[i].out, t[i].data, t[i].nbytes) == 0);
		free_tile(&t[i]);
	}
	wc_backend_destroy(be);
}
END_TEST

/* k-means' nearest-entry search on the GPU (wcodec_cuda_vq_nearest)
 * gives the CPU search's answer for every vector: random vectors and
 * entries, duplicated entries (ties go to the lowest index), exact matches,
 * one entry, slices of the codebook's shared-memory passes (2048, 2049),
 * 65536 entries, and more vectors than one device pass (2^23). */
START_TEST(vq_nearest_equals_the_cpu_search)
{
	static const struct { uint32_t dim, k; uint64_t n; } cases[] = {
		{12, 1, 1000}, {12, 5, 1}, {12, 2048, 20000}, {12, 2049, 20000}, {12, 4096, 50000},
		{12, 65536, 20000}, {4, 300, 10000}, {8, 300, 10000}, {16, 300, 10000},
		{4, 3, (1ull << 23) + 5},
	};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		uint32_t dim = cases[c].dim, k = cases[c].k;
		uint64_t n = cases[c].n;
		uint8_t *cb = malloc((size_t)k * dim), *pts = malloc(n * dim);
		uint16_t *gpu = malloc(n * 2), *cpu = malloc(n * 2);
		ck_assert(cb && pts && gpu && cpu);
		uint64_t r = 0x9e3779b97f4a7c15ull * (c + 1);
		for (size_t i = 0; i < (size_t)k * dim; i++) {
			r = r * 6364136223846793005ull + 1442695040888963407ull;
			cb[i] = (uint8_t)(r >> 56);
		}
		if (k > 7)
			memcpy(cb + 7 * dim, cb + 2 * dim, dim); /* a tie: 2 must win */
		for (uint64_t i = 0; i < n; i++) {
			r = r * 6364136223846793005ull + 1442695040888963407ull;
			if (i % 97 == 0) /* exact matches, the duplicate among them */
				memcpy(pts + i * dim, cb + (size_t)((r >> 33) % k) * dim, dim);
			else
				for (uint32_t j = 0; j < dim; j++)
					pts[i * dim + j] = (uint8_t)(r >> (8 * (j % 8)));
		}
		if (k > 7)
			memcpy(pts, cb + 7 * dim, dim);
		wc_err e = g_vq_nearest(0, cb, k, dim, pts, n, gpu);
		ck_assert_msg(e == WC_OK, "case %zu: %s", c, wc_last_detail());
		ck_assert_int_eq(wc_kmeans_assign(cb, k, dim, pts, n, 0, cpu, NULL), WC_OK);
		for (uint64_t i = 0; i < n; i++)
			ck_assert_msg(gpu[i] == cpu[i], "case %zu (dim %u, k %u), vector %llu: GPU %u, CPU %u",
				      c, dim, k, (unsigned long long)i, gpu[i], cpu[i]);
		if (k > 7)
			ck_assert_uint_eq(gpu[0], 2);
		free(cb);
		free(pts);
		free(gpu);
		free(cpu);
	}
	/* Sizes the kernel does not take are refused, for the CPU to search. */
	uint8_t v[13] = {0};
	uint16_t o;
	ck_assert_int_eq(g_vq_nearest(0, v, 1, 13, v, 1, &o), WC_E_UNSUPPORTED);
	ck_assert_int_eq(g_vq_nearest(0, v, 1, 20, v, 1, &o), WC_E_UNSUPPORTED);
}
END_TEST

START_TEST(device_jobs_every_layout)
{
	/* device targets, including an unaligned destination */
	enum { N = LAYOUTS * 4 };
	ttile t[N];
	wc_tile_job jobs[N];
	void *dst[N];
	uint8_t *d;
	size_t off = 0, offs[N];
	for (unsigned i = 0; i < N; i++) {
		make_tile(&t[i], i % LAYOUTS, (enum gen)(i / LAYOUTS), 40000 + 8 * i, 4096, 300 + i);
		jobs[i] = t[i].job;
		offs[i] = off + (i == 5 ? 3 : 0); /* a bytes tile at an odd address */
		off += t[i].nbytes + 64;
	}
	ck_assert_int_eq(cudaMalloc((void **)&d, off), cudaSuccess);
	for (unsigned i = 0; i < N; i++)
		dst[i] = d + offs[i];
	ck_assert_int_eq(g_decode_jobs(jobs, N, dst, 0), WC_OK);
	for (unsigned i = 0; i < N; i++) {
		ck_assert_int_eq(jobs[i].status, WC_OK);
		ck_assert_int_eq(cudaMemcpy(t[i].out, dst[i], t[i].nbytes, cudaMemcpyDeviceToHost), cudaSuccess);
		ck_assert_msg(memcmp(t[i].out, t[i].data, t[i].nbytes) == 0, "tile %u differs", i);
	}
	cudaFree(d);
	for (unsigned i = 0; i < N; i++)
		free_tile(&t[i]);
}
END_TEST

START_TEST(tensors_into_device_memory)
{
	char dir[256], st_path[300], wc_path[300];
	ck_assert_ptr_nonnull(st_temp_dir(dir, sizeof dir, "wc_test_cuda"));
	snprintf(st_path, sizeof st_path, "%s/in.safetensors", dir);
	snprintf(wc_path, sizeof wc_path, "%s/in.wcodec", dir);
	st_file f;
	st_all_dtypes(&f, 42);
	size_t st_len;
	uint8_t *st = st_serialize(&f, &st_len);
	ck_assert_int_eq(st_write_bytes(st_path, st, st_len), 0);
	wc_pack_opts o = { .tile_size = 4096, .chunk_symbols = 256, .threads = 2 };
	wc_pack_stats s;
	ck_assert_msg(wc_pack_safetensors(st_path, wc_path, &o, &s) == WC_OK, "pack: %s", wc_last_detail());

	wc_container *c;
	ck_assert_int_eq(wc_container_open(wc_path, &c), WC_OK);
	size_t plen;
	wc_container_prefix(c, &plen);
	uint8_t *d, *host = malloc(st_len);
	ck_assert_int_eq(cudaMalloc((void **)&d, st_len), cudaSuccess);
	unsigned checked = 0;
	for (uint32_t i = 0; i < wc_container_ntensors(c); i++) {
		const wc_tensor_info *ti = wc_container_tensor(c, i);
		size_t nb = ti->end - ti->begin;
		ck_assert_int_eq(cudaMemset(d, 0xee, st_len), cudaSuccess);
		wc_err e = g_decode_tensor(wc_path, ti->name, d, nb, 0, 0);
		ck_assert_msg(e == WC_OK, "tensor %s: %s", ti->name, wc_last_detail());
		ck_assert_int_eq(cudaMemcpy(host, d, nb + 1 <= st_len ? nb + 1 : nb, cudaMemcpyDeviceToHost),
				 cudaSuccess);
		ck_assert_msg(memcmp(host, st + ti->begin, nb) == 0, "tensor %s differs", ti->name);
		if (nb + 1 <= st_len)
			ck_assert_uint_eq(host[nb], 0xee);
		if (nb) {
			ck_assert_int_eq(g_decode_tensor(wc_path, ti->name, d, nb - 1, 0, 0), WC_E_RANGE);
			checked++;
		}
	}
	ck_assert_uint_gt(checked, 10);
	/* the whole data section at once */
	ck_assert_int_eq(g_decode_tensor(wc_path, NULL, d, st_len - plen, 0, 0), WC_OK);
	ck_assert_int_eq(cudaMemcpy(host, d, st_len - plen, cudaMemcpyDeviceToHost), cudaSuccess);
	ck_assert(memcmp(host, st + plen, st_len - plen) == 0);
	ck_assert_int_eq(g_decode_tensor(wc_path, "no such tensor", d, st_len, 0, 0), WC_E_NOTFOUND);
	cudaFree(d);
	wc_container_release(c);
	free(host);
	free(st);
	st_free(&f);
	ck_assert_int_eq(st_remove_tree(dir), 0);
}
END_TEST

/* wcodec_cuda_load: many unaligned ranges of a .wcodec file and of its
 * original at once, through a ring so small that every slot is reused
 * many times, equal the original bytes; a host destination is refused; a
 * damaged payload is WC_E_CORRUPT naming its tensor. */
START_TEST(pipelined_loader_ranges)
{
	char dir[256], st_path[300], wc_path[300], bad_path[300];
	ck_assert_ptr_nonnull(st_temp_dir(dir, sizeof dir, "wc_test_cuda"));
	snprintf(st_path, sizeof st_path, "%s/in.safetensors", dir);
	snprintf(wc_path, sizeof wc_path, "%s/in.wcodec", dir);
	snprintf(bad_path, sizeof bad_path, "%s/bad.wcodec", dir);
	st_file f;
	st_all_dtypes(&f, 9);
	size_t st_len;
	uint8_t *st = st_serialize(&f, &st_len);
	st_free(&f);
	ck_assert_int_eq(st_write_bytes(st_path, st, st_len), 0);
	wc_pack_opts o = { .tile_size = 4096, .chunk_symbols = 256, .threads = 2 };
	wc_pack_stats ps;
	ck_assert_msg(wc_pack_safetensors(st_path, wc_path, &o, &ps) == WC_OK, "pack: %s", wc_last_detail());
	wc_tensor_file *files[2];
	ck_assert_int_eq(wc_tensor_file_open(st_path, &files[0]), WC_OK);
	ck_assert_int_eq(wc_tensor_file_open(wc_path, &files[1]), WC_OK);
	const uint64_t size = wc_tensor_file_data_size(files[0]), data_off = st_len - size;
	enum { N = 48 };
	wc_load_range r[N];
	uint8_t *d, *host = malloc(N * size);
	ck_assert_int_eq(cudaMalloc((void **)&d, N * size), cudaSuccess);
	uint64_t rng = 99;
	for (int round = 0; round < 4; round++) {
		for (int i = 0; i < N; i++) {
			rng = rng * 6364136223846793005ull + 1442695040888963407ull;
			uint64_t off = (rng >> 13) % size;
			rng = rng * 6364136223846793005ull + 1442695040888963407ull;
			uint64_t len = i == 0 ? size - off : (rng >> 13) % (size - off + 1);
			if (i == 0)
				off = 0, len = size;
			r[i] = (wc_load_range){ .file = (uint32_t)(i & 1), .offset = off, .length = len,
						.dst = d + (size_t)i * size };
		}
		ck_assert_int_eq(cudaMemset(d, 0xee, N * size), cudaSuccess);
		wcodec_cuda_load_opts lo = { .staging_bytes = round & 1 ? 64u << 10 : 0, .readers = round + 1 };
		wcodec_cuda_load_stats ls;
		wc_err e = g_load(files, 2, r, N, 0, &lo, &ls);
		ck_assert_msg(e == WC_OK, "round %d: %s", round, wc_last_detail());
		ck_assert_uint_gt(ls.pinned_bytes, 0);
		ck_assert_int_eq(cudaMemcpy(host, d, N * size, cudaMemcpyDeviceToHost), cudaSuccess);
		for (int i = 0; i < N; i++) {
			const uint8_t *got = host + (size_t)i * size;
			ck_assert_msg(memcmp(got, st + data_off + r[i].offset, r[i].length) == 0,
				      "round %d range %d [%llu, +%llu) of file %u", round, i,
				      (unsigned long long)r[i].offset, (unsigned long long)r[i].length, r[i].file);
			if (r[i].length < size)
				ck_assert_uint_eq(got[r[i].length], 0xee);
		}
	}
	/* host memory is not a destination */
	wc_load_range hr = { .file = 1, .offset = 0, .length = 64, .dst = host };
	ck_assert_int_eq(g_load(files, 2, &hr, 1, 0, NULL, NULL), WC_E_INVAL);
	/* a damaged payload */
	wc_container *c = wc_tensor_file_container(files[1]);
	const uint32_t victim = wc_container_ntiles(c) / 3;
	const wc_tile_info *ti = wc_container_tile(c, victim);
	char want[300];
	snprintf(want, sizeof want, "tensor '%s': ", wc_container_tensor(c, ti->tensor)->name);
	ck_assert_int_eq(st_copy_flipped(wc_path, bad_path, ti->coff + ti->csize / 2, 0x08), 0);
	wc_tensor_file *bad;
	ck_assert_int_eq(wc_tensor_file_open(bad_path, &bad), WC_OK);
	wc_load_range br = { .file = 0, .offset = 0, .length = size, .dst = d };
	ck_assert_int_eq(g_load(&bad, 1, &br, 1, 0, NULL, NULL), WC_E_CORRUPT);
	ck_assert_msg(strstr(wc_last_detail(), want) && strstr(wc_last_detail(), bad_path), "reason: %s",
		      wc_last_detail());
	wc_tensor_file_close(bad);
	wc_tensor_file_close(files[0]);
	wc_tensor_file_close(files[1]);
	cudaFree(d);
	free(host);
	free(st);
	ck_assert_int_eq(st_remove_tree(dir), 0);
}
END_TEST

/* A GPU fault (here an illegal address, injected) ends the call in
 * WC_E_BACKEND, later calls too, and wc_backend_decode() then decodes the
 * batch on the CPU: the bytes are right. A fault poisons the process's CUDA
 * context, so this runs last. */
START_TEST(gpu_fault_falls_back_to_cpu)
{
	wc_backend *be;
	wc_backend_opts o = { .threads = 2, .gpu = 0, .gpu_memory_limit = 64u << 20, .gpu_fault_every_batch = true };
	ck_assert_int_eq(g_create(&o, &be), WC_OK);
	enum { N = 12 };
	ttile t[N];
	wc_tile_job jobs[N];
	for (unsigned i = 0; i < N; i++) {
		make_tile(&t[i], i % LAYOUTS, GEN_WEIGHTS, 20000, 512, 1300 + i);
		jobs[i] = t[i].job;
	}
	ck_assert_int_eq(be->ops->decode(be, jobs, N), WC_E_BACKEND);
	for (unsigned i = 0; i < N; i++)
		ck_assert_int_eq(jobs[i].status, WC_E_BACKEND);
	ck_assert_int_eq(be->ops->decode(be, jobs, N), WC_E_BACKEND); /* disabled for good */
	ck_assert_int_eq(wc_backend_decode(be, jobs, N), WC_OK);      /* CPU fallback */
	for (unsigned i = 0; i < N; i++) {
		ck_assert_int_eq(jobs[i].status, WC_OK);
		ck_assert(memcmp(t[i].out, t[i].data, t[i].nbytes) == 0);
		free_tile(&t[i]);
	}
	be->ops->destroy(be);
}
END_TEST

int main(void)
{
	void *h = cuda_plugin_open("test_cuda");
	if (!h)
		return 1;
	wc_backend_create_fn create = (wc_backend_create_fn)dlsym(h, WC_CUDA_PLUGIN_SYMBOL);
	g_create = create;
	g_decode_jobs = (decode_jobs_fn)dlsym(h, "wcodec_cuda_decode_jobs");
	g_decode_tensor = (decode_tensor_fn)dlsym(h, "wcodec_cuda_decode_tensor");
	g_load = (load_fn)dlsym(h, "wcodec_cuda_load");
	g_vq_nearest = (wcodec_cuda_vq_nearest_fn)dlsym(h, "wcodec_cuda_vq_nearest");
	if (!create || !g_decode_jobs || !g_decode_tensor || !g_load || !g_vq_nearest) {
		fprintf(stderr, "test_cuda: the plugin lacks its entry points\n");
		return 1;
	}
	/* the plugin must export nothing of the CUDA runtime it links statically */
	if (dlsym(h, "cudaMalloc")) {
		fprintf(stderr, "test_cuda: the plugin exports cudaMalloc\n");
		return 1;
	}
	wc_backend_opts o = { .threads = 4, .gpu = 0, .gpu_memory_limit = 256u << 20 };
	wc_err e = create(&o, &g_be);
	if (e != WC_OK) {
		printf("test_cuda: skipped, no usable GPU: %s\n", wc_last_detail());
		return 77;
	}
	build_tables();
	/* last: a fault poisons the process's CUDA context; skipped under
	 * compute-sanitizer (WCODEC_TEST_NO_FAULT=1), which reports the fault */
	const TTest *tests[] = { every_layout_mode_and_size, batches_of_one_to_thousands,
				 zstd_planes_go_through_the_cpu, corruption_detected_host_path,
				 corruption_detected_device_path, pinned_and_pageable_buffers_mixed,
				 engine_loader_picks_cuda, device_jobs_every_layout, tensors_into_device_memory,
				 pipelined_loader_ranges, vq_nearest_equals_the_cpu_search, gpu_fault_falls_back_to_cpu };
	const size_t ntests = sizeof tests / sizeof tests[0] - (getenv("WCODEC_TEST_NO_FAULT") != NULL);
	int rc = cuda_run_tests("cuda", tests, ntests, 600);
	g_be->ops->destroy(g_be);
	return rc;
}
