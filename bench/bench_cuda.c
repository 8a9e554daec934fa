/* bench_cuda.c - GPU decode throughput (docs/BENCHMARKS.md).
 *
 *   bench_cuda [--tiles-max N] [--gpu G] [--chunk SYMBOLS]
 *
 * Data: BF16 weights drawn from N(0, 0.02) (as trained transformer weights
 * look), cut into 1 MiB tiles, encoded by the CPU encoder with one
 * frequency table per plane and 16384-symbol chunks (--chunk): the exponent plane is
 * rANS-coded, the sign|mantissa plane is stored RAW (it is near 8 bits of
 * entropy). 64 distinct tiles, repeated to make larger batches (each copy
 * is uploaded to its own device address, so no cache sees a repeat).
 *
 * Reported, all in GB/s of DECODED bytes (10^9 bytes/s):
 *  1. device: kernel time only (CUDA events around the rANS and merge
 *     launches), payloads already uploaded in the same lane; one lane big
 *     enough for the largest batch; median of 5 runs per batch size.
 *  2. device call: wall time of a whole decode into device memory
 *     (wcodec_cuda_decode_jobs path: host memcpy into pinned staging,
 *     upload, kernels), median of 5.
 *  3. host: the backend path (wcc_decode into host buffers, 3 lanes on 3
 *     streams overlapping copy-in, decode and copy-out, every tile's
 *     XXH3-64 checked), median of 5: with pageable caller buffers (staged
 *     through the lanes' pinned buffers) and with page-locked caller
 *     buffers (cudaHostRegister: DMA straight to and from them).
 *  4. PCIe reference: pinned cudaMemcpy H2D and D2H of 256 MiB.
 * Every decoded tile is checked (hash) once per configuration.
 */
#include <cuda_runtime_api.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#include "codec/tile_codec.h"
#include "wcc_device.h"
#include "wcc_kernels.h"

#define TILE (1u << 20)
#define DISTINCT 64u

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double normal(uint64_t *s)
{
	double u = ((rng_next(s) >> 11) + 1) * 0x1p-53, v = (rng_next(s) >> 11) * 0x1p-53;
	return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static uint16_t bf16(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	u += 0x7fff + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof(double), cmp_double);
	return v[n / 2];
}

#define CK(call)                                                                    \
	do {                                                                        \
		cudaError_t e_ = (call);                                            \
		if (e_ != cudaSuccess) {                                            \
			fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e_)); \
			exit(1);                                                    \
		}                                                                   \
	} while (0)

int main(int argc, char **argv)
{
	unsigned tiles_max = 2048;
	uint32_t chunk_syms = 16384;
	int gpu = 0;
	static const struct option lo[] = { { "tiles-max", required_argument, 0, 't' },
					    { "gpu", required_argument, 0, 'g' },
					    { "chunk", required_argument, 0, 'c' }, { 0, 0, 0, 0 } };
	int c;
	while ((c = getopt_long(argc, argv, "t:g:c:", lo, NULL)) != -1) {
		if (c == 't')
			tiles_max = (unsigned)atoi(optarg);
		else if (c == 'c')
			chunk_syms = (uint32_t)atoi(optarg);
		else if (c == 'g')
			gpu = atoi(optarg);
		else
			return 2;
	}
	const double t_start = now();
	struct cudaDeviceProp prop;
	CK(cudaGetDeviceProperties(&prop, gpu));
	printf("GPU %d: %s, %d SMs, %.0f GiB\n", gpu, prop.name, prop.multiProcessorCount,
	       prop.totalGlobalMem / 1073741824.0);

	/* ---- startup: CUDA initialisation and a context as the backend makes it ---- */
	{
		wcc_ctx *ctx;
		wcc_ctx_opts o = { .gpu = gpu, .memory_limit = 0, .lanes = 3, .host_threads = 7 };
		double s = now();
		if (wcc_ctx_create(&o, &ctx) != WC_OK) {
			fprintf(stderr, "context: %s\n", wc_last_detail());
			return 1;
		}
		double e = now();
		size_t lane_mib = wcc_ctx_lane_bytes(ctx) >> 20;
		wcc_ctx_destroy(ctx);
		printf("startup: process start to first context %.0f ms (of which the context: 3 lanes of %zu MiB, %.0f ms)\n",
		       (e - t_start) * 1e3, lane_mib, (e - s) * 1e3);
		s = now();
		if (wcc_ctx_create(&o, &ctx) != WC_OK)
			return 1;
		printf("startup: a second context %.0f ms\n", (now() - s) * 1e3);
		wcc_ctx_destroy(ctx);
	}

	/* ---- data ---- */
	wc_layout l;
	wc_layout_parse("bf16", &l);
	uint8_t *data = malloc((size_t)DISTINCT * TILE);
	uint64_t seed = 12345;
	for (size_t i = 0; i < (size_t)DISTINCT * TILE / 2; i++) {
		uint16_t v = bf16((float)(normal(&seed) * 0.02));
		memcpy(data + 2 * i, &v, 2);
	}
	wc_freqtab tabs[2];
	{
		size_t n = TILE / 2;
		uint8_t *p0 = malloc(n), *p1 = malloc(n), *planes[2] = { p0, p1 };
		wc_planes_split(l, data, n, planes);
		uint64_t h0[256] = { 0 }, h1[256] = { 0 };
		for (size_t i = 0; i < n; i++) {
			h0[p0[i]]++;
			h1[p1[i]]++;
		}
		for (int s = 0; s < 256; s++) {
			h0[s] = h0[s] * 16 + 1;
			h1[s] = h1[s] * 16 + 1;
		}
		wc_freq_normalize(h0, &tabs[0]);
		wc_freq_normalize(h1, &tabs[1]);
		free(p0);
		free(p1);
	}
	wc_plane_plan plan[2] = { { &tabs[0], 0, 0 }, { &tabs[1], 1, 0 } };
	uint8_t *payload[DISTINCT];
	size_t plen[DISTINCT], total_c = 0;
	uint64_t dhash[DISTINCT];
	double t0 = now();
	for (unsigned i = 0; i < DISTINCT; i++) {
		size_t cap = wc_tile_encode_bound(l, TILE, chunk_syms);
		payload[i] = malloc(cap);
		if (wc_tile_encode(l, data + (size_t)i * TILE, TILE, plan, chunk_syms, payload[i], cap, &plen[i], NULL)) {
			fprintf(stderr, "encode: %s\n", wc_last_detail());
			return 1;
		}
		dhash[i] = XXH3_64bits(data + (size_t)i * TILE, TILE);
		total_c += plen[i];
	}
	double enc_s = now() - t0;
	printf("data: %u distinct 1 MiB BF16 tiles, N(0,0.02), %u-symbol chunks; ratio %.3f (payload/decoded); "
	       "CPU encode %.2f GB/s\n", DISTINCT, chunk_syms, (double)total_c / ((double)DISTINCT * TILE), DISTINCT * (double)TILE / enc_s / 1e9);
	{
		uint8_t *o = malloc(TILE);
		t0 = now();
		for (unsigned i = 0; i < DISTINCT; i++)
			wc_tile_decode(l, payload[i], plen[i], tabs, 2, chunk_syms, o, TILE);
		printf("CPU reference decode (1 thread): %.2f GB/s\n", DISTINCT * (double)TILE / (now() - t0) / 1e9);
		free(o);
	}

	wc_tile_job *jobs = calloc(tiles_max, sizeof(*jobs));
	uint8_t *host_out = malloc((size_t)tiles_max * TILE);
	memset(host_out, 0, (size_t)tiles_max * TILE); /* fault the pages in */
	for (unsigned i = 0; i < tiles_max; i++) {
		unsigned d = i % DISTINCT;
		jobs[i] = (wc_tile_job){ .kind = WC_JOB_PLANES, .layout = l, .chunk_symbols = chunk_syms,
					 .payload = payload[d], .payload_size = (uint32_t)plen[d],
					 .tables = tabs, .ntables = 2, .table_key = 1,
					 .out = host_out + (size_t)i * TILE, .out_size = TILE, .dhash = dhash[d] };
	}

	/* ---- 1 + 2: device targets, one big lane ---- */
	{
		wcc_ctx *ctx;
		uint64_t lane = (uint64_t)tiles_max * TILE;
		wcc_ctx_opts o = { .gpu = gpu, .memory_limit = lane * 13 / 4 + (64u << 20), .lanes = 1, .host_threads = 8 };
		if (wcc_ctx_create(&o, &ctx) != WC_OK) {
			fprintf(stderr, "context: %s\n", wc_last_detail());
			return 1;
		}
		uint8_t *d_out;
		CK(cudaMalloc((void **)&d_out, (size_t)tiles_max * TILE));
		uint8_t **dst = malloc(tiles_max * sizeof(*dst));
		for (unsigned i = 0; i < tiles_max; i++)
			dst[i] = d_out + (size_t)i * TILE;
		static const char *const vname[] = { "launch bounds 4 blocks/SM (default)", "launch bounds 8 blocks/SM",
						     "launch bounds 6 blocks/SM", "launch bounds 3 blocks/SM" };
		for (int variant = 0; variant < 4; variant++) {
		wcc_set_variant(variant);
		printf("\nrANS kernel: %s\n%-8s %-10s %-14s %-14s\n", vname[variant], "tiles", "MiB",
		       "kernel GB/s", "call GB/s");
		/* the default over every batch size, the others at the largest */
		for (unsigned k = variant ? tiles_max : 1; k <= tiles_max; k *= 4) {
			double kt[5], wt[5];
			for (int r = 0; r < 5; r++) {
				wcc_ctx_set_timing(ctx, 1);
				double s = now();
				if (wcc_decode(ctx, jobs, k, dst) != WC_OK) {
					fprintf(stderr, "decode: %s\n", wc_last_detail());
					return 1;
				}
				wt[r] = now() - s;
				kt[r] = wcc_ctx_kernel_ms(ctx) / 1e3;
				for (unsigned i = 0; i < k; i++)
					if (jobs[i].status != WC_OK) {
						fprintf(stderr, "tile %u: status %d\n", i, jobs[i].status);
						return 1;
					}
			}
			/* verify: hash every decoded tile once */
			uint8_t *chk = malloc((size_t)k * TILE);
			CK(cudaMemcpy(chk, d_out, (size_t)k * TILE, cudaMemcpyDeviceToHost));
			for (unsigned i = 0; i < k; i++)
				if (XXH3_64bits(chk + (size_t)i * TILE, TILE) != dhash[i % DISTINCT]) {
					fprintf(stderr, "tile %u decoded wrong\n", i);
					return 1;
				}
			free(chk);
			double bytes = (double)k * TILE;
			printf("%-8u %-10u %-14.1f %-14.1f\n", k, k, bytes / median(kt, 5) / 1e9,
			       bytes / median(wt, 5) / 1e9);
			if (k < tiles_max && k * 4 > tiles_max)
				k = tiles_max / 4;
		}
		}
		wcc_set_variant(0);
		cudaFree(d_out);
		free(dst);
		wcc_ctx_destroy(ctx);
	}

	/* ---- 3: host targets, backend configuration ----
	 * pageable: the caller's buffers are ordinary memory (staged through
	 * the lanes' pinned buffers); pinned: the caller registered them
	 * (cudaHostRegister), so tiles go by DMA straight to and from them. */
	for (int pinned = 0; pinned < 2; pinned++) {
		static const unsigned threads[] = { 4, 8, 15 };
		if (pinned) {
			CK(cudaSetDevice(gpu));
			CK(cudaHostRegister(host_out, (size_t)tiles_max * TILE, cudaHostRegisterDefault));
			for (unsigned i = 0; i < DISTINCT; i++)
				CK(cudaHostRegister(payload[i], plen[i], cudaHostRegisterDefault));
		}
		for (unsigned ti = pinned ? 1 : 0; ti < 3; ti++) {
			wcc_ctx *ctx;
			wcc_ctx_opts o = { .gpu = gpu, .memory_limit = 1024u << 20, .lanes = 3, .host_threads = threads[ti] };
			if (wcc_ctx_create(&o, &ctx) != WC_OK) {
				fprintf(stderr, "context: %s\n", wc_last_detail());
				return 1;
			}
			double wt[5];
			for (int r = 0; r < 5; r++) {
				memset(host_out, 0, TILE);
				memset(host_out + (size_t)(tiles_max - 1) * TILE, 0, TILE);
				double s = now();
				if (wcc_decode(ctx, jobs, tiles_max, NULL) != WC_OK) {
					fprintf(stderr, "decode: %s\n", wc_last_detail());
					return 1;
				}
				wt[r] = now() - s;
				for (unsigned i = 0; i < tiles_max; i++)
					if (jobs[i].status != WC_OK) {
						fprintf(stderr, "tile %u: status %d\n", i, jobs[i].status);
						return 1;
					}
			}
			if (memcmp(host_out, data, TILE) != 0 ||
			    memcmp(host_out + (size_t)(tiles_max - 1) * TILE, data + (size_t)((tiles_max - 1) % DISTINCT) * TILE,
				   TILE) != 0) {
				fprintf(stderr, "host output differs\n");
				return 1;
			}
			printf("%shost path: %u x 1 MiB tiles into %s memory, 3 lanes of %zu MiB, %u+1 host threads, "
			       "dhash checked: %.1f GB/s\n", ti == 0 || (pinned && ti == 1) ? "\n" : "",
			       tiles_max, pinned ? "pinned (registered)" : "pageable", wcc_ctx_lane_bytes(ctx) >> 20,
			       threads[ti], (double)tiles_max * TILE / median(wt, 5) / 1e9);
			wcc_ctx_destroy(ctx);
		}
	}

	/* ---- 3b: the backend's default configuration, as the engine calls it:
	 * calls of max_batch (64) tiles one after another, 8 threads ---- */
	{
		CK(cudaHostUnregister(host_out));
		for (unsigned i = 0; i < DISTINCT; i++)
			CK(cudaHostUnregister(payload[i]));
		wcc_ctx *ctx;
		wcc_ctx_opts o = { .gpu = gpu, .memory_limit = 0, .lanes = 3, .host_threads = 7 };
		if (wcc_ctx_create(&o, &ctx) != WC_OK)
			return 1;
		double wt[5];
		for (int r = 0; r < 5; r++) {
			double s = now();
			for (unsigned i = 0; i < tiles_max; i += 64) {
				unsigned k = tiles_max - i < 64 ? tiles_max - i : 64;
				if (wcc_decode(ctx, jobs + i, k, NULL) != WC_OK)
					return 1;
			}
			wt[r] = now() - s;
			for (unsigned i = 0; i < tiles_max; i++)
				if (jobs[i].status != WC_OK)
					return 1;
		}
		printf("\nbackend defaults (320 MiB device budget: 3 lanes of %zu MiB, 7+1 threads), calls of 64 tiles, "
		       "pageable: %.1f GB/s\n", wcc_ctx_lane_bytes(ctx) >> 20, (double)tiles_max * TILE / median(wt, 5) / 1e9);
		wcc_ctx_destroy(ctx);
	}

	/* ---- 4: PCIe reference ---- */
	{
		size_t n = 256u << 20;
		void *h, *d;
		CK(cudaSetDevice(gpu));
		CK(cudaHostAlloc(&h, n, cudaHostAllocDefault));
		CK(cudaMalloc(&d, n));
		memset(h, 1, n);
		double a[5], b[5];
		for (int r = 0; r < 5; r++) {
			double s = now();
			CK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
			a[r] = now() - s;
			s = now();
			CK(cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost));
			b[r] = now() - s;
		}
		printf("\nPCIe pinned copies of 256 MiB: H2D %.1f GB/s, D2H %.1f GB/s\n", n / median(a, 5) / 1e9,
		       n / median(b, 5) / 1e9);
		cudaFreeHost(h);
		cudaFree(d);
	}
	return 0;
}
