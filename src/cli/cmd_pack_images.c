/* cmd_pack_images.c - `wcodec pack-images`: a directory of images into a
 * vector-quantized .qvq archive (src/qvq/qvq_pack.h). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/clock.h"
#include "engine/backend.h"
#include "cli/cmd_qvq.h"
#include "codec/rans.h"
#include "qvq/qvq_format.h"
#include "qvq/qvq_pack.h"

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: wcodec pack-images [OPTIONS] DIR [OUT.qvq | OUTDIR]\n\n"
		"Pack every PNG, JPEG and PPM/PGM image under DIR (recursively) into an image\n"
		"archive, in one of two modes:\n"
		"  codebook   (default) a k-means codebook of 2x2 RGB patches, one index a patch:\n"
		"             the fastest to decode, and the largest at a given quality;\n"
		"  transform  8x8 DCT of YCbCr 4:2:0 with entropy-coded coefficients: smaller\n"
		"             than JPEG at JPEG's quality (--quality, --psnr choose it).\n"
		"When every image lies in a subdirectory, that directory is its label. Prints the\n"
		"PSNR of the archive's images against the (resized) input. Without OUT, DIR packs\n"
		"to DIR.qvq beside it; into OUTDIR/DIR.qvq when OUT is a directory.\n\n"
		"  -s, --size WxH        resize the shorter side to fit, then centre-crop to WxH\n"
		"  -m, --mode MODE       codebook or transform (default codebook; --quality and\n"
		"                        --psnr mean transform)\n"
		"  -Q, --quality Q       transform mode at quality 1..100 on JPEG's (libjpeg's)\n"
		"                        scale: about JPEG's PSNR at the same Q on photographs\n"
		"                        (default 90)\n"
		"      --psnr DB         transform mode, the smallest archive whose PSNR over\n"
		"                        every pixel of every image is at least DB\n"
		"  -k, --codebook K      codebook entries, 1..65536 (default 256; > 256: 2-byte indices)\n"
		"      --seed N          k-means sampling and seeding seed (default 0)\n"
		"  -j, --threads N       encoder threads (default: the usable CPUs)\n"
		"  -b, --backend NAME    k-means' nearest-entry search: auto (the GPU if usable,\n"
		"                        else the CPU), cpu, cuda; the archive is the same\n"
		"      --tile-size B     decoded bytes per tile, K/M suffixes (default 1M)\n"
		"  -c, --chunk N         rANS chunk in symbols, a multiple of 32 (default 16384):\n"
		"                        shorter chunks decode sooner on a GPU, longer ones\n"
		"                        save 128 bytes each\n"
		"      --iterations N    Lloyd iterations at most (default 10)\n"
		"  -f, --force           overwrite an existing OUT.qvq\n"
		"      --skip-unreadable leave out, with a warning, images that cannot be read\n"
		"                        or decoded (corrupt, truncated, unsupported) instead\n"
		"                        of stopping at the first\n"
		"  -q, --quiet           no progress bar\n"
		"  -h, --help            this help\n");
}

typedef struct bar {
	cli_progress p;
	const char *stage;
	int quiet;
} bar;

static void on_progress(void *ctx, const char *stage, uint64_t done, uint64_t total)
{
	bar *b = ctx;
	if (b->stage != stage) {
		if (b->stage)
			cli_progress_done(&b->p);
		cli_progress_init(&b->p, stage, b->quiet);
		b->stage = stage;
	}
	cli_progress_update(&b->p, done, total);
}

/* k-means' nearest-entry search on the backend, until it fails once: then
 * WC_E_UNSUPPORTED, so that the CPU searches for the rest of the pack with
 * one warning, not one per call. */
typedef wc_err (*nearest_fn)(int gpu, const uint8_t *codebook, uint32_t k, uint32_t dim, const uint8_t *points,
			     uint64_t n, uint16_t *out);
typedef struct gpu_search {
	nearest_fn fn; /* the plugin's wcodec_cuda_vq_nearest (cuda/wcodec_cuda.h) */
	int gpu;
	int failed;
} gpu_search;

static wc_err backend_nearest(void *ctx, const uint8_t *codebook, uint32_t k, uint32_t dim,
			      const uint8_t *points, uint64_t n, uint16_t *out)
{
	gpu_search *g = ctx;
	if (g->failed)
		return WC_E_UNSUPPORTED;
	wc_err e = g->fn(g->gpu, codebook, k, dim, points, n, out);
	g->failed = e != WC_OK && e != WC_E_UNSUPPORTED;
	return e;
}

int cmd_pack_images(int argc, char **argv)
{
	static const struct option opts[] = {
		{"size", required_argument, NULL, 's'},
		{"codebook", required_argument, NULL, 'k'},
		{"mode", required_argument, NULL, 'm'},
		{"quality", required_argument, NULL, 'Q'},
		{"psnr", required_argument, NULL, 'P'},
		{"seed", required_argument, NULL, 'S'},
		{"threads", required_argument, NULL, 'j'},
		{"backend", required_argument, NULL, 'b'},
		{"tile-size", required_argument, NULL, 'T'},
		{"iterations", required_argument, NULL, 'i'},
		{"chunk", required_argument, NULL, 'c'},
		{"skip-unreadable", no_argument, NULL, 'U'},
		{"quiet", no_argument, NULL, 'q'},
		{"force", no_argument, NULL, 'f'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *cmd = "pack-images";
	wc_qvq_pack_opts o = {0};
	int quiet = 0, force = 0, c, mode = -1;
	uint64_t v;
	cli_decode_opts dopt = {.backend = "auto"}; /* -b, as the decoding commands take it */
	while ((c = getopt_long(argc, argv, "s:k:m:Q:j:b:c:qfh", opts, NULL)) != -1) {
		switch (c) {
		case 's': {
			unsigned w, h;
			char x, extra;
			if (sscanf(optarg, "%u%c%u%c", &w, &x, &h, &extra) != 3 || (x != 'x' && x != 'X') ||
			    !w || !h || w > WC_QVQ_MAX_SIDE || h > WC_QVQ_MAX_SIDE)
				return cli_usage_error(cmd, "--size wants WxH with sides 1..%u, not \"%s\"",
						       WC_QVQ_MAX_SIDE, optarg);
			o.width = w;
			o.height = h;
			break;
		}
		case 'k':
			if (wc_parse_size(optarg, WC_QVQ_MAX_ENTRIES, &v) || !v)
				return cli_usage_error(cmd, "--codebook wants 1..%u, not \"%s\"",
						       WC_QVQ_MAX_ENTRIES, optarg);
			o.entries = (uint32_t)v;
			break;
		case 'm':
			if (strcmp(optarg, "codebook") == 0)
				mode = WC_QVQ_MODE_VQ;
			else if (strcmp(optarg, "transform") == 0)
				mode = WC_QVQ_MODE_DCT;
			else
				return cli_usage_error(cmd, "--mode wants codebook or transform, not \"%s\"", optarg);
			break;
		case 'Q':
			if (wc_parse_size(optarg, 100, &v) || !v)
				return cli_usage_error(cmd, "--quality wants 1..100, not \"%s\"", optarg);
			o.quality = (int)v;
			break;
		case 'P': {
			char *end;
			errno = 0;
			double db = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(db > 0 && db < 99))
				return cli_usage_error(cmd, "--psnr wants decibels above 0 and below 99, not \"%s\"",
						       optarg);
			o.psnr_db = db;
			break;
		}
		case 'S':
			if (wc_parse_size(optarg, UINT64_MAX >> 1, &v))
				return cli_usage_error(cmd, "bad --seed \"%s\"", optarg);
			o.seed = v;
			break;
		case 'j':
			if (wc_parse_size(optarg, 1024, &v))
				return cli_usage_error(cmd, "--threads wants 0..1024, not \"%s\"", optarg);
			o.threads = (unsigned)v;
			break;
		case 'T':
			if (wc_parse_size(optarg, WC_QVQ_MAX_TILE_BYTES, &v) || v < 4096)
				return cli_usage_error(cmd, "--tile-size wants 4096..%u bytes, not \"%s\"",
						       WC_QVQ_MAX_TILE_BYTES, optarg);
			o.tile_bytes = (uint32_t)v;
			break;
		case 'i':
			if (wc_parse_size(optarg, 1000, &v) || !v)
				return cli_usage_error(cmd, "--iterations wants 1..1000, not \"%s\"", optarg);
			o.iterations = (uint32_t)v;
			break;
		case 'c':
			if (wc_parse_size(optarg, WC_RANS_CHUNK_MAX, &v) || v < WC_RANS_CHUNK_MIN || v % 32)
				return cli_usage_error(cmd, "--chunk wants a multiple of 32 from %u to %u, not \"%s\"",
						       WC_RANS_CHUNK_MIN, WC_RANS_CHUNK_MAX, optarg);
			o.chunk_symbols = (uint32_t)v;
			break;
		case 'U':
			o.skip_unreadable = 1;
			break;
		case 'b':
			if (cli_decode_opt(cmd, c, optarg, &dopt))
				return CLI_USAGE;
			break;
		case 'q':
			quiet = 1;
			break;
		case 'f':
			force = 1;
			break;
		case 'h':
			usage(stdout);
			return CLI_OK;
		default:
			usage(stderr);
			return CLI_USAGE;
		}
	}
	if (argc - optind < 1 || argc - optind > 2)
		return cli_usage_error(cmd, "wants DIR [OUT.qvq]");
	if (o.quality && o.psnr_db > 0)
		return cli_usage_error(cmd, "--quality or --psnr, not both");
	if (mode == WC_QVQ_MODE_VQ && (o.quality || o.psnr_db > 0))
		return cli_usage_error(cmd, "--quality and --psnr are the transform mode's");
	o.mode = mode == WC_QVQ_MODE_DCT || o.quality || o.psnr_db > 0 ? WC_QVQ_MODE_DCT : WC_QVQ_MODE_VQ;
	if (o.mode == WC_QVQ_MODE_DCT && o.entries)
		return cli_usage_error(cmd, "--codebook is the codebook mode's");
	const char *in = argv[optind], *out = optind + 1 < argc ? argv[optind + 1] : NULL;
	/* No OUT: DIR.qvq beside DIR; OUT a directory: OUT/DIR.qvq ("." and
	 * "/" give no name). */
	char *derived = NULL;
	if (!out || cli_is_dir(out)) {
		if (!(derived = cli_derive_output(in, "", ".qvq", out)))
			return cli_usage_error(cmd, "no archive name from '%s': name OUT.qvq", in);
		out = derived;
	}
	int ow = cli_check_overwrite(cmd, out, 0, force);
	if (ow >= 0) {
		free(derived);
		return ow;
	}
	/* The GPU, when there is one, searches k-means' nearest entries. */
	wc_backend *be = NULL;
	gpu_search gs = {0};
	if (strcmp(dopt.backend, "cpu") != 0 && o.mode == WC_QVQ_MODE_VQ) {
		wc_backend_opts bo = {.threads = o.threads};
		wc_err be_err = wc_backend_create(dopt.backend, &bo, &be);
		if (be_err) {
			free(derived);
			return cli_error(be_err, cmd);
		}
		if ((gs.fn = (nearest_fn)(uintptr_t)wc_backend_symbol(be, "wcodec_cuda_vq_nearest"))) {
			gs.gpu = bo.gpu;
			o.nearest = backend_nearest;
			o.nearest_ctx = &gs;
		} else { /* "auto" found no GPU: its CPU pool has nothing to do here */
			wc_backend_destroy(be);
			be = NULL;
		}
	}
	bar b = {.quiet = quiet};
	o.progress = on_progress;
	o.progress_ctx = &b;
	o.tmp_path = cli_tmp_watch_path; /* Ctrl-C removes a half-written archive */
	wc_qvq_pack_stats st;
	double t0 = wc_mono_s();
	wc_err e = wc_qvq_pack_dir(in, out, &o, &st);
	double secs = wc_mono_s() - t0;
	if (be)
		wc_backend_destroy(be);
	if (b.stage)
		cli_progress_done(&b.p);
	if (e) {
		free(derived);
		return cli_error(e, cmd);
	}
	char hb[32];
	if (o.mode == WC_QVQ_MODE_DCT)
		printf("%s: %u images, %" PRIu64 " pixels, transform, steps %.3f / %.3f, %u tiles, %u labels\n",
		       out, st.nimages, st.pixels, st.step_luma / 8.0, st.step_chroma / 8.0, st.ntiles, st.nlabels);
	else
		printf("%s: %u images, %" PRIu64 " pixels, codebook %u x 2x2x3, %u tiles, %u labels\n",
		       out, st.nimages, st.pixels, st.entries, st.ntiles, st.nlabels);
	free(derived);
	printf("  %s (%" PRIu64 " bytes), %.3f bits/pixel, PSNR %.2f dB (MSE %.3f), %.1f s\n",
	       cli_human_bytes(st.file_bytes, hb), st.file_bytes, st.bits_per_pixel, st.psnr_db,
	       st.mse, secs);
	if (st.skipped)
		printf("  %" PRIu64 " unreadable image%s left out (see the warnings above)\n", st.skipped,
		       st.skipped == 1 ? "" : "s");
	return CLI_OK;
}
