/*
 * qvq_bench.c - CPU decode throughput of a .qvq archive on ONE thread (not a
 * test; contrib/bench/bench-qvq.sh runs it, docs/BENCHMARKS.md ("Image archives") records
 * it). Payloads are read into memory first; then every tile is decoded
 * (codebook mode: tile codec + codebook gather; transform mode: rANS,
 * inverse DCT, colour; both with the dhash check, wc_decode_job_cpu)
 * REPEAT times, and in the codebook mode the gather alone is timed on
 * already-decoded indices.
 *
 * usage: qvq_bench ARCHIVE.qvq [REPEAT [RING_MIB]]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/tile_codec.h"
#include "core/clock.h"
#include "engine/backend.h"
#include "qvq/qvq.h"

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: qvq_bench ARCHIVE.qvq [REPEAT [RING_MIB]]\n");
		return 2;
	}
	int repeat = argc > 2 ? atoi(argv[2]) : 3;
	/* RING_MIB: decode into a ring of tile buffers this large, as the
	 * daemon's cache does, so the output is cold memory (0: one buffer). */
	size_t ring_mib = argc > 3 ? (size_t)atoi(argv[3]) : 0;
	wc_qvq *q;
	if (wc_qvq_open(argv[1], &q) != WC_OK) {
		fprintf(stderr, "%s: %s\n", argv[1], wc_last_detail());
		return 1;
	}
	uint32_t nt = wc_qvq_ntiles(q), ni = wc_qvq_nimages(q);
	uint8_t **pay = calloc(nt, sizeof *pay);
	uint32_t maxd = 0, maxi = 0;
	uint64_t bytes = 0;
	for (uint32_t t = 0; t < nt; t++) {
		const wc_qvq_tile *tl = wc_qvq_tile_at(q, t);
		pay[t] = malloc(tl->csize);
		if (!pay[t] || wc_qvq_read_payload(q, t, pay[t]) != WC_OK) {
			fprintf(stderr, "tile %u: %s\n", t, wc_last_detail());
			return 1;
		}
		maxd = tl->dsize > maxd ? tl->dsize : maxd;
		maxi = tl->nindices > maxi ? tl->nindices : maxi;
		bytes += tl->dsize;
	}
	size_t nring = ring_mib ? ring_mib * 1048576 / maxd + 1 : 1;
	uint8_t *out = malloc(maxd * nring);
	if (!out) {
		fprintf(stderr, "qvq_bench: no memory for %zu tile buffers\n", nring);
		return 1;
	}
	memset(out, 1, maxd * nring);
	size_t slot = 0;
	double best = 1e30;
	for (int r = 0; r < repeat; r++) {
		double t0 = wc_mono_s();
		for (uint32_t t = 0; t < nt; t++) {
			const wc_qvq_tile *tl = wc_qvq_tile_at(q, t);
			wc_tile_job job;
			memset(&job, 0, sizeof job);
			wc_qvq_describe_job(q, t, &job);
			job.payload = pay[t];
			job.payload_size = tl->csize;
			job.out = out + (slot++ % nring) * maxd;
			job.out_size = tl->dsize;
			if (wc_decode_job_cpu(&job) != WC_OK) {
				fprintf(stderr, "tile %u: %s\n", t, wc_last_detail());
				return 1;
			}
		}
		double dt = wc_mono_s() - t0;
		best = dt < best ? dt : best;
	}
	const wc_qvq_header *h = wc_qvq_header_of(q);
	printf("cpu decode (1 thread, %s + XXH3 check): %u images, %.1f MB, %.3f s, %.0f images/s, %.0f MB/s\n",
	       h->mode == WC_QVQ_MODE_DCT ? "transform" : "tile codec + gather", ni, bytes / 1e6, best, ni / best,
	       bytes / best / 1e6);
	if (h->mode == WC_QVQ_MODE_DCT) {
		for (uint32_t t = 0; t < nt; t++)
			free(pay[t]);
		free(pay);
		free(out);
		wc_qvq_release(q);
		return 0;
	}
	/* Gather alone: indices decoded once per tile, then gathered. */
	uint8_t *idx = malloc((size_t)maxi * h->index_bytes + 1);
	uint32_t K;
	const uint8_t *cb = wc_qvq_codebook(q, &K);
	wc_freqtab const *tabs = NULL;
	double gsum = 0;
	for (uint32_t t = 0; t < nt; t++) {
		const wc_qvq_tile *tl = wc_qvq_tile_at(q, t);
		wc_tile_job job;
		memset(&job, 0, sizeof job);
		wc_qvq_describe_job(q, t, &job);
		tabs = job.tables;
		if (wc_tile_decode(job.layout, pay[t], tl->csize, tabs, job.ntables, job.chunk_symbols,
				   idx, (size_t)tl->nindices * h->index_bytes) != WC_OK) {
			fprintf(stderr, "tile %u: %s\n", t, wc_last_detail());
			return 1;
		}
		double t0 = wc_mono_s();
		for (int r = 0; r < repeat; r++) {
			const uint8_t *ip = idx;
			uint8_t *op = out + (slot++ % nring) * maxd;
			for (uint32_t i = 0; i < tl->nimages; i++) {
				const wc_qvq_image *im = wc_qvq_image_at(q, tl->first_image + i);
				wc_qvq_gather(cb, K, h->patch_h, h->patch_w, 3, ip, h->index_bytes,
					      im->width, im->height, op);
				ip += wc_qvq_patches(im->width, im->height, h->patch_w, h->patch_h) *
				      h->index_bytes;
				op += (size_t)im->width * im->height * 3;
			}
		}
		gsum += (wc_mono_s() - t0) / repeat;
	}
	printf("cpu gather only (1 thread): %.3f s, %.0f images/s, %.0f MB/s\n", gsum, ni / gsum,
	       bytes / gsum / 1e6);
	for (uint32_t t = 0; t < nt; t++)
		free(pay[t]);
	free(pay);
	free(out);
	free(idx);
	wc_qvq_release(q);
	return 0;
}
