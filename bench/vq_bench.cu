/*
 * vq_bench.cu - GPU decode throughput of .qvq images (not a test; run by
 * contrib/bench/bench-qvq.sh, results in docs/BENCHMARKS.md ("Image archives")).
 *
 *   vq_bench gather [N] [K]     N synthetic 224x224 images (default 16384)
 *                               with a K-entry codebook (default 256) on the
 *                               device: gather kernel images/s, batched in
 *                               launches of all N images; every image then
 *                               compared with the CPU gather (bit-exact).
 *   vq_bench archive Y.qvq PLUGIN.so [COPIES [REPEAT]]
 *                               full device decode of an archive: payloads
 *                               from host memory (the archive's tiles
 *                               COPIES times over), rANS on the GPU
 *                               (wcodec_cuda_decode_jobs), then the gather;
 *                               images/s end to end (device-resident
 *                               output), then every tile compared with the
 *                               CPU decode (bit-exact).
 */
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vq_gather.h"

extern "C" {
#include "qvq/qvq.h"
}

#define CK(x)                                                                              \
	do {                                                                               \
		cudaError_t e_ = (x);                                                      \
		if (e_ != cudaSuccess) {                                                   \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x,         \
				cudaGetErrorString(e_));                                   \
			exit(1);                                                           \
		}                                                                          \
	} while (0)

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t rs = 12345;
static uint32_t rnd(void)
{
	rs = rs * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(rs >> 33);
}

static int bench_gather(uint32_t n, uint32_t K)
{
	const uint32_t W = 224, H = 224, ib = K <= 256 ? 1 : 2;
	const size_t np = (size_t)(W / 2) * (H / 2), img = (size_t)W * H * 3;
	uint8_t *cb = (uint8_t *)malloc((size_t)K * 12), *idx = (uint8_t *)malloc(np * ib * n);
	for (size_t i = 0; i < (size_t)K * 12; i++)
		cb[i] = (uint8_t)rnd();
	for (size_t i = 0; i < np * n; i++) {
		uint32_t k = rnd() % K;
		idx[i * ib] = (uint8_t)k;
		if (ib == 2)
			idx[i * ib + 1] = (uint8_t)(k >> 8);
	}
	uint8_t *d_cb, *d_idx, *d_out;
	wcc_vq_image *d_desc;
	uint32_t *d_status;
	CK(cudaMalloc(&d_cb, (size_t)K * 12));
	CK(cudaMalloc(&d_idx, np * ib * n));
	CK(cudaMalloc(&d_out, img * n));
	CK(cudaMalloc(&d_desc, sizeof(wcc_vq_image) * n));
	CK(cudaMalloc(&d_status, 4));
	CK(cudaMemcpy(d_cb, cb, (size_t)K * 12, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(d_idx, idx, np * ib * n, cudaMemcpyHostToDevice));
	wcc_vq_image *desc = (wcc_vq_image *)calloc(n, sizeof *desc);
	for (uint32_t i = 0; i < n; i++) {
		desc[i].idx = d_idx + np * ib * i;
		desc[i].out = d_out + img * i;
		desc[i].codebook = d_cb;
		desc[i].entries = K;
		desc[i].w = W;
		desc[i].h = H;
		desc[i].ph = 2;
		desc[i].pw = 2;
		desc[i].index_bytes = (uint8_t)ib;
	}
	CK(cudaMemcpy(d_desc, desc, sizeof *desc * n, cudaMemcpyHostToDevice));
	CK(cudaMemset(d_status, 0, 4));
	cudaEvent_t e0, e1;
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	CK((cudaError_t)wcc_vq_launch_gather(d_desc, n, (uint32_t)np, d_status, 0)); /* warm-up */
	CK(cudaDeviceSynchronize());
	const int reps = 20;
	CK(cudaEventRecord(e0));
	for (int r = 0; r < reps; r++)
		CK((cudaError_t)wcc_vq_launch_gather(d_desc, n, (uint32_t)np, d_status, 0));
	CK(cudaEventRecord(e1));
	CK(cudaEventSynchronize(e1));
	float ms;
	CK(cudaEventElapsedTime(&ms, e0, e1));
	double ips = (double)n * reps / (ms * 1e-3);
	printf("gather K=%u (%u-byte indices): %u images 224x224 per launch, %.3f ms/launch, "
	       "%.0f images/s, %.1f GB/s written\n", K, ib, n, ms / reps, ips, ips * img / 1e9);
	/* Bit-exact against the CPU gather, every image. */
	uint8_t *gpu = (uint8_t *)malloc(img * n), *ref = (uint8_t *)malloc(img);
	uint32_t st;
	CK(cudaMemcpy(gpu, d_out, img * n, cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(&st, d_status, 4, cudaMemcpyDeviceToHost));
	size_t bad = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (wc_qvq_gather(cb, K, 2, 2, 3, idx + np * ib * i, ib, W, H, ref) != WC_OK)
			bad++;
		else if (memcmp(ref, gpu + img * i, img) != 0)
			bad++;
	}
	printf("gather K=%u: %s (%zu of %u images differ from the CPU, status %u)\n", K,
	       bad || st ? "MISMATCH" : "bit-exact with the CPU", bad, n, st);
	/* Odd sizes through the same kernel. */
	uint32_t ow = 37, oh = 23, ogw = 19, ogh = 12;
	for (uint32_t i = 0; i < ogw * ogh * ib; i++)
		idx[i] = ib == 2 && (i & 1) ? (uint8_t)((rnd() % K) >> 8) : (uint8_t)(rnd() % (K < 256 ? K : 256));
	CK(cudaMemcpy(d_idx, idx, ogw * ogh * ib, cudaMemcpyHostToDevice));
	desc[0].w = ow;
	desc[0].h = oh;
	CK(cudaMemcpy(d_desc, desc, sizeof *desc, cudaMemcpyHostToDevice));
	CK(cudaMemset(d_out, 0, (size_t)ow * oh * 3));
	CK((cudaError_t)wcc_vq_launch_gather(d_desc, 1, ogw * ogh, d_status, 0));
	CK(cudaMemcpy(gpu, d_out, (size_t)ow * oh * 3, cudaMemcpyDeviceToHost));
	int odd_ok = wc_qvq_gather(cb, K, 2, 2, 3, idx, ib, ow, oh, ref) == WC_OK &&
		     memcmp(ref, gpu, (size_t)ow * oh * 3) == 0;
	printf("gather K=%u odd 37x23: %s\n", K, odd_ok ? "bit-exact with the CPU" : "MISMATCH");
	cudaFree(d_cb); cudaFree(d_idx); cudaFree(d_out); cudaFree(d_desc); cudaFree(d_status);
	free(cb); free(idx); free(desc); free(gpu); free(ref);
	return bad || st || !odd_ok;
}

typedef wc_err (*decode_jobs_fn)(wc_tile_job *, size_t, void *const *, int);

static int bench_archive(const char *path, const char *plugin, int copies, int repeat)
{
	void *so = dlopen(plugin, RTLD_NOW);
	if (!so) {
		fprintf(stderr, "dlopen %s: %s\n", plugin, dlerror());
		return 1;
	}
	decode_jobs_fn decode_jobs = (decode_jobs_fn)dlsym(so, "wcodec_cuda_decode_jobs");
	if (!decode_jobs) {
		fprintf(stderr, "no wcodec_cuda_decode_jobs in %s\n", plugin);
		return 1;
	}
	wc_qvq *q;
	if (wc_qvq_open(path, &q) != WC_OK) {
		fprintf(stderr, "%s: %s\n", path, wc_last_detail());
		return 1;
	}
	uint32_t nt0 = wc_qvq_ntiles(q), ni0 = wc_qvq_nimages(q);
	/* The archive's tiles `copies` times over, each copy to its own device
	 * addresses: a batch as large as a data loader's. */
	uint32_t nt = nt0 * (uint32_t)copies, ni = ni0 * (uint32_t)copies;
	wc_tile_job *jobs = (wc_tile_job *)calloc(nt, sizeof *jobs);
	wc_tile_job *shadow = (wc_tile_job *)calloc(nt, sizeof *shadow);
	uint8_t **payload = (uint8_t **)calloc(nt0, sizeof *payload);
	size_t idx_total = 0, rgb_total = 0;
	for (uint32_t t = 0; t < nt; t++) {
		const wc_qvq_tile *tl = wc_qvq_tile_at(q, t % nt0);
		if (t < nt0) {
			payload[t] = (uint8_t *)malloc(tl->csize);
			if (wc_qvq_read_payload(q, t, payload[t]) != WC_OK) {
				fprintf(stderr, "tile %u: %s\n", t, wc_last_detail());
				return 1;
			}
		}
		wc_qvq_describe_job(q, t % nt0, &jobs[t]);
		jobs[t].payload = payload[t % nt0];
		jobs[t].payload_size = tl->csize;
		jobs[t].out_size = tl->dsize;
		idx_total += (((size_t)tl->nindices * wc_qvq_job_of(&jobs[t])->index_bytes + 15) & ~(size_t)15);
		rgb_total += ((size_t)tl->dsize + 15) & ~(size_t)15;
	}
	uint8_t *d_idx, *d_rgb;
	uint32_t *d_status;
	CK(cudaMalloc(&d_idx, idx_total));
	CK(cudaMalloc(&d_rgb, rgb_total));
	CK(cudaMalloc(&d_status, 4 * nt));
	uint8_t **dev_idx = (uint8_t **)calloc(nt, sizeof *dev_idx);
	size_t *rgb_off = (size_t *)calloc(nt, sizeof *rgb_off);
	wcc_vq_image *desc = (wcc_vq_image *)calloc(ni, sizeof *desc);
	wcc_vq_image *d_desc;
	CK(cudaMalloc(&d_desc, sizeof *desc * ni));
	uint32_t cbk;
	const uint8_t *cb = wc_qvq_codebook(q, &cbk);
	const wc_qvq_header *h = wc_qvq_header_of(q);
	size_t cbbytes = (size_t)cbk * h->patch_h * h->patch_w * 3;
	uint8_t *d_cb;
	CK(cudaMalloc(&d_cb, cbbytes));
	CK(cudaMemcpy(d_cb, cb, cbbytes, cudaMemcpyHostToDevice));
	size_t io = 0, ro = 0, nd = 0;
	uint32_t maxp = 0;
	for (uint32_t t = 0; t < nt; t++) {
		const wc_qvq_tile *tl = wc_qvq_tile_at(q, t % nt0);
		shadow[t] = jobs[t];
		shadow[t].kind = WC_JOB_PLANES;
		shadow[t].out_size = tl->nindices * wc_qvq_job_of(&jobs[t])->index_bytes;
		dev_idx[t] = d_idx + io;
		rgb_off[t] = ro;
		size_t po = 0, oo = 0;
		for (uint32_t i = 0; i < tl->nimages; i++) {
			const wc_qvq_image *im = wc_qvq_image_at(q, tl->first_image + i);
			uint64_t np = wc_qvq_patches(im->width, im->height, h->patch_w, h->patch_h);
			wcc_vq_image *d = &desc[nd++];
			d->idx = dev_idx[t] + po * h->index_bytes;
			d->out = d_rgb + ro + oo;
			d->codebook = d_cb;
			d->entries = cbk;
			d->w = im->width;
			d->h = im->height;
			d->ph = h->patch_h;
			d->pw = h->patch_w;
			d->index_bytes = h->index_bytes;
			d->job = t;
			po += np;
			oo += (size_t)im->width * im->height * 3;
			if (np > maxp)
				maxp = (uint32_t)np;
		}
		io += ((size_t)shadow[t].out_size + 15) & ~(size_t)15;
		ro += ((size_t)tl->dsize + 15) & ~(size_t)15;
	}
	CK(cudaMemcpy(d_desc, desc, sizeof *desc * nd, cudaMemcpyHostToDevice));
	CK(cudaMemset(d_status, 0, 4 * nt));
	double best = 1e30;
	for (int r = 0; r < repeat; r++) {
		double t0 = now();
		if (decode_jobs(shadow, nt, (void *const *)dev_idx, 0) != WC_OK) {
			fprintf(stderr, "decode_jobs: %s\n", wc_last_detail());
			return 1;
		}
		CK((cudaError_t)wcc_vq_launch_gather(d_desc, (uint32_t)nd, maxp, d_status, 0));
		CK(cudaDeviceSynchronize());
		double dt = now() - t0;
		if (dt < best)
			best = dt;
	}
	for (uint32_t t = 0; t < nt; t++)
		if (shadow[t].status != WC_OK) {
			fprintf(stderr, "tile %u: index decode status %d\n", t, shadow[t].status);
			return 1;
		}
	printf("archive %s x%d: %u images, %u tiles: full GPU decode (payload upload, rANS, gather) "
	       "%.3f ms, %.0f images/s (best of %d)\n", path, copies, ni, nt, best * 1e3, ni / best, repeat);
	/* Bit-exact with the CPU decode, every tile. */
	uint8_t *gpu = (uint8_t *)malloc(rgb_total), *ref = NULL;
	CK(cudaMemcpy(gpu, d_rgb, rgb_total, cudaMemcpyDeviceToHost));
	uint32_t bad = 0;
	for (uint32_t t = 0; t < nt; t++) {
		const wc_qvq_tile *tl = wc_qvq_tile_at(q, t % nt0);
		ref = (uint8_t *)realloc(ref, tl->dsize);
		if (wc_qvq_decode_tile(q, t % nt0, ref) != WC_OK || memcmp(ref, gpu + rgb_off[t], tl->dsize))
			bad++;
	}
	printf("archive: %s (%u of %u tiles differ)\n", bad ? "MISMATCH" : "bit-exact with the CPU",
	       bad, nt);
	return bad != 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "gather") == 0) {
		uint32_t n = argc > 2 ? (uint32_t)atoi(argv[2]) : 16384;
		uint32_t K = argc > 3 ? (uint32_t)atoi(argv[3]) : 256;
		return bench_gather(n, K);
	}
	if (argc >= 4 && strcmp(argv[1], "archive") == 0)
		return bench_archive(argv[2], argv[3], argc > 4 ? atoi(argv[4]) : 1,
				     argc > 5 ? atoi(argv[5]) : 5);
	fprintf(stderr, "usage: vq_bench gather [N] [K] | vq_bench archive Y.qvq PLUGIN.so [COPIES [REPEAT]]\n");
	return 2;
}
