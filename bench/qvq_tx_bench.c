/*
 * qvq_tx_bench.c - the size and quality of the transform mode's streams
 * (src/qvq/qvq_dct.h, src/qvq/qvq_tx.h) on real images, coded as an
 * archive would code them: every image's coefficients at a step, in tiles
 * of consecutive images, each plane of each tile coded by the tile codec
 * with one frequency table per plane learnt over the whole set, escaped
 * values as raw 16-bit values. Everything is decoded back and compared.
 *
 *   qvq_tx_bench [-t IMAGES_PER_TILE] [-c CHUNK_SYMBOLS] [-s STEP]... IMAGE...
 *
 * STEP: the luma step in eighths (chroma 1.5 times it); default 64 96 128.
 * Prints per step the bytes (plane payloads + escapes + tables), bits per
 * pixel, PSNR over all pixels and the escapes per image. The JPEG figures
 * on the same images: bench/image_codec_study.py --dump DIR (docs/BENCHMARKS.md,
 * "A transform mode against JPEG (study)").
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/tile_codec.h"
#include "images/image_io.h"
#include "qvq/qvq_dct.h"
#include "qvq/qvq_tx.h"

static uint32_t CHUNK = 16384u; /* rANS chunk, symbols (-c) */

typedef struct tile {
	uint32_t first, count;
	uint8_t *plane[QVQ_TX_PLANES];
	size_t len[QVQ_TX_PLANES];
	uint8_t *esc;
	size_t nesc;
} tile;

static int die(const char *what)
{
	fprintf(stderr, "qvq_tx_bench: %s: %s\n", what, wc_last_detail());
	return 1;
}

static int run_step(wc_image *im, int n, uint32_t per_tile, uint32_t sl)
{
	const uint32_t sc = sl * 3 / 2;
	const int ntiles = (n + (int)per_tile - 1) / (int)per_tile;
	tile *t = calloc((size_t)ntiles, sizeof *t);
	uint64_t hist[QVQ_TX_PLANES][256];
	memset(hist, 0, sizeof hist);
	size_t scratch_max = 0, coef_max = 0, px = 0;
	for (int i = 0; i < n; i++) {
		qvq_dct_geom g;
		qvq_dct_geometry(im[i].width, im[i].height, &g);
		size_t s = qvq_dct_scratch_bytes(im[i].width, im[i].height);
		scratch_max = s > scratch_max ? s : scratch_max;
		coef_max = g.blocks * 64 > coef_max ? g.blocks * 64 : coef_max;
		px += (size_t)im[i].width * im[i].height;
	}
	void *scr = malloc(scratch_max);
	int16_t *coef = malloc(coef_max * sizeof *coef);
	uint8_t *rgb = malloc(coef_max * 3);
	for (int k = 0; k < ntiles; k++) {
		t[k].first = (uint32_t)k * per_tile;
		t[k].count = (uint32_t)(n - (int)t[k].first < (int)per_tile ? n - (int)t[k].first : (int)per_tile);
		size_t total = 0;
		for (uint32_t i = t[k].first; i < t[k].first + t[k].count; i++) {
			size_t c[QVQ_TX_PLANES];
			qvq_tx_plane_counts(im[i].width, im[i].height, c);
			for (unsigned p = 0; p < QVQ_TX_PLANES; p++) {
				t[k].len[p] += c[p];
				total += c[p];
			}
		}
		for (unsigned p = 0; p < QVQ_TX_PLANES; p++)
			t[k].plane[p] = malloc(t[k].len[p] + 1);
		t[k].esc = malloc(2 * total + 2);
		size_t pos[QVQ_TX_PLANES] = { 0 };
		for (uint32_t i = t[k].first; i < t[k].first + t[k].count; i++) {
			if (qvq_dct_encode(im[i].rgb, im[i].width, im[i].height, sl, sc, coef, scr) != WC_OK)
				return die("encode");
			qvq_tx_to_symbols(coef, im[i].width, im[i].height, t[k].plane, pos, t[k].esc, &t[k].nesc);
		}
		for (unsigned p = 0; p < QVQ_TX_PLANES; p++)
			for (size_t j = 0; j < t[k].len[p]; j++)
				hist[p][t[k].plane[p][j]]++;
	}
	wc_freqtab tabs[QVQ_TX_PLANES];
	wc_plane_plan plan[QVQ_TX_PLANES];
	size_t bytes = 0, nesc = 0;
	for (unsigned p = 0; p < QVQ_TX_PLANES; p++) {
		plan[p] = (wc_plane_plan){ NULL, WC_NO_TABLE, 0 };
		memset(&tabs[p], 0, sizeof tabs[p]);
		if (wc_freq_normalize(hist[p], &tabs[p]) == WC_OK) {
			plan[p] = (wc_plane_plan){ &tabs[p], p, 0 };
			bytes += 512;
		}
	}
	const wc_layout l = { WC_LAYOUT_BYTES, 1, 1 };
	double se = 0;
	for (int k = 0; k < ntiles; k++) {
		uint8_t *dec[QVQ_TX_PLANES];
		for (unsigned p = 0; p < QVQ_TX_PLANES; p++) {
			size_t cap = wc_tile_encode_bound(l, t[k].len[p], CHUNK), len;
			uint8_t *payload = malloc(cap);
			dec[p] = malloc(t[k].len[p] + 1);
			if (wc_tile_encode(l, t[k].plane[p], t[k].len[p], &plan[p], CHUNK, payload, cap, &len, NULL) != WC_OK ||
			    wc_tile_decode(l, payload, len, tabs, QVQ_TX_PLANES, CHUNK, dec[p], t[k].len[p]) != WC_OK)
				return die("tile codec");
			bytes += len;
			free(payload);
		}
		bytes += 2 * t[k].nesc;
		nesc += t[k].nesc;
		size_t pos[QVQ_TX_PLANES] = { 0 }, epos = 0;
		for (uint32_t i = t[k].first; i < t[k].first + t[k].count; i++) {
			if (qvq_tx_from_symbols((const uint8_t *const *)dec, pos, t[k].esc, t[k].nesc, &epos, im[i].width,
						im[i].height, coef) != WC_OK ||
			    qvq_dct_decode(coef, im[i].width, im[i].height, sl, sc, rgb, scr) != WC_OK)
				return die("decode");
			for (size_t j = 0; j < (size_t)im[i].width * im[i].height * 3; j++)
				se += ((double)rgb[j] - im[i].rgb[j]) * ((double)rgb[j] - im[i].rgb[j]);
		}
		for (unsigned p = 0; p < QVQ_TX_PLANES; p++) {
			free(dec[p]);
			free(t[k].plane[p]);
		}
		free(t[k].esc);
	}
	printf("| %u (%.3f) | %zu | %.3f | %.2f | %.1f |\n", sl, sl / 8.0, bytes, 8.0 * bytes / px,
	       10 * log10(255.0 * 255.0 * 3 * px / se), (double)nesc / n);
	free(t);
	free(scr);
	free(coef);
	free(rgb);
	return 0;
}

int main(int argc, char **argv)
{
	uint32_t per_tile = 64, steps[32], nsteps = 0;
	int a = 1;
	for (; a < argc && argv[a][0] == '-'; a++) {
		if (!strcmp(argv[a], "-t") && a + 1 < argc)
			per_tile = (uint32_t)atoi(argv[++a]);
		else if (!strcmp(argv[a], "-c") && a + 1 < argc)
			CHUNK = (uint32_t)atoi(argv[++a]);
		else if (!strcmp(argv[a], "-s") && a + 1 < argc && nsteps < 32)
			steps[nsteps++] = (uint32_t)atoi(argv[++a]);
		else
			return fprintf(stderr, "usage: qvq_tx_bench [-t IMAGES_PER_TILE] [-c CHUNK_SYMBOLS] [-s STEP]... IMAGE...\n"), 2;
	}
	if (!nsteps)
		steps[0] = 64, steps[1] = 96, steps[2] = 128, nsteps = 3;
	const int n = argc - a;
	if (n < 1 || per_tile < 1)
		return fprintf(stderr, "qvq_tx_bench: no images\n"), 2;
	wc_image *im = calloc((size_t)n, sizeof *im);
	for (int i = 0; i < n; i++)
		if (wc_image_load(argv[a + i], &im[i]) != WC_OK)
			return die(argv[a + i]);
	printf("%d images, %u a tile, rANS chunks of %u symbols\n| luma step (units) | bytes | bits/pixel | PSNR (dB) | escapes/image |\n"
	       "|---:|---:|---:|---:|---:|\n", n, per_tile, CHUNK);
	for (uint32_t s = 0; s < nsteps; s++)
		if (run_step(im, n, per_tile, steps[s]))
			return 1;
	for (int i = 0; i < n; i++)
		wc_image_free(&im[i]);
	free(im);
	return 0;
}
