/* qvq_cli.c - wcodec pack-images / unpack / info / verify for .qvq archives. */
#include "qvq/qvq_cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "qvq/qvq.h"
#include "qvq/qvq_files.h"
#include "qvq/qvq_format.h"
#include "qvq/qvq_pack.h"

static int fail(const char *what, wc_err e)
{
	const char *d = wc_last_detail();
	fprintf(stderr, "wcodec: %s: %s%s%s\n", what, wc_strerror(e), *d ? ": " : "", d);
	return 1;
}

/* ---- progress bar (only on a terminal) ---------------------------------- */

struct bar {
	int tty;
	const char *stage;
	int last_pct;
};

static void bar_update(void *ctx, const char *stage, uint64_t done, uint64_t total)
{
	struct bar *b = ctx;
	if (!b->tty)
		return;
	int pct = total ? (int)(100 * done / total) : 100;
	if (b->stage == stage && pct == b->last_pct)
		return;
	if (b->stage && b->stage != stage)
		fputc('\n', stderr);
	b->stage = stage;
	b->last_pct = pct;
	char fill[31];
	int nf = pct * 30 / 100;
	memset(fill, '#', (size_t)nf);
	memset(fill + nf, '.', (size_t)(30 - nf));
	fill[30] = 0;
	fprintf(stderr, "\r%-7s [%s] %3d%% (%" PRIu64 "/%" PRIu64 ")", stage, fill, pct, done, total);
	fflush(stderr);
}

static int parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v > max)
		return -1;
	*out = v;
	return 0;
}

static void pack_usage(FILE *f)
{
	fprintf(f,
		"usage: wcodec pack-images DIR OUT.qvq [--size WxH] [--codebook K] [--seed N]\n"
		"                          [--threads N] [--tile-size BYTES] [--iterations N]\n"
		"  Vector-quantize every PNG/JPEG/PPM under DIR into an image archive.\n"
		"  --size WxH       resize the shorter side and centre-crop to WxH\n"
		"  --codebook K     codebook entries, 1..65536 (default 256)\n"
		"  --seed N         k-means sampling/seeding seed (default 0)\n"
		"  --threads N      encoder threads (default: online CPUs)\n"
		"  --tile-size B    decoded bytes per tile (default 1048576)\n"
		"  --iterations N   Lloyd iterations at most (default 10)\n");
}

int wc_qvq_cmd_pack_images(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"size", required_argument, NULL, 's'},
		{"codebook", required_argument, NULL, 'k'},
		{"seed", required_argument, NULL, 'S'},
		{"threads", required_argument, NULL, 't'},
		{"tile-size", required_argument, NULL, 'T'},
		{"iterations", required_argument, NULL, 'i'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	wc_qvq_pack_opts o = {0};
	uint64_t v;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 's': {
			unsigned w, h;
			char x;
			if (sscanf(optarg, "%u%c%u", &w, &x, &h) != 3 || (x != 'x' && x != 'X') ||
			    !w || !h || w > WC_QVQ_MAX_SIDE || h > WC_QVQ_MAX_SIDE) {
				fprintf(stderr, "wcodec: pack-images: --size wants WxH with sides "
					"1..%u, got \"%s\"\n", WC_QVQ_MAX_SIDE, optarg);
				return 2;
			}
			o.width = w;
			o.height = h;
			break;
		}
		case 'k':
			if (parse_u64(optarg, WC_QVQ_MAX_ENTRIES, &v) || !v) {
				fprintf(stderr, "wcodec: pack-images: --codebook wants 1..%u\n",
					WC_QVQ_MAX_ENTRIES);
				return 2;
			}
			o.entries = (uint32_t)v;
			break;
		case 'S':
			if (parse_u64(optarg, UINT64_MAX, &v)) {
				fprintf(stderr, "wcodec: pack-images: bad --seed \"%s\"\n", optarg);
				return 2;
			}
			o.seed = v;
			break;
		case 't':
			if (parse_u64(optarg, 1024, &v)) {
				fprintf(stderr, "wcodec: pack-images: --threads wants 0..1024\n");
				return 2;
			}
			o.threads = (unsigned)v;
			break;
		case 'T':
			if (parse_u64(optarg, WC_QVQ_MAX_TILE_BYTES, &v) || v < 4096) {
				fprintf(stderr, "wcodec: pack-images: --tile-size wants 4096..%u\n",
					WC_QVQ_MAX_TILE_BYTES);
				return 2;
			}
			o.tile_bytes = (uint32_t)v;
			break;
		case 'i':
			if (parse_u64(optarg, 1000, &v) || !v) {
				fprintf(stderr, "wcodec: pack-images: --iterations wants 1..1000\n");
				return 2;
			}
			o.iterations = (uint32_t)v;
			break;
		case 'h':
			pack_usage(stdout);
			return 0;
		default:
			pack_usage(stderr);
			return 2;
		}
	}
	if (argc - optind != 2) {
		pack_usage(stderr);
		return 2;
	}
	struct bar b = {isatty(2), NULL, -1};
	o.progress = bar_update;
	o.progress_ctx = &b;
	wc_qvq_pack_stats st;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	wc_err e = wc_qvq_pack_dir(argv[optind], argv[optind + 1], &o, &st);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (b.tty && b.stage)
		fputc('\n', stderr);
	if (e)
		return fail("pack-images", e);
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
	printf("%s: %u images, %" PRIu64 " pixels, codebook %u x 2x2x3, %u tiles, %u labels\n",
	       argv[optind + 1], st.nimages, st.pixels, st.entries, st.ntiles, st.nlabels);
	printf("  %" PRIu64 " bytes, %.3f bits/pixel, PSNR %.2f dB (MSE %.3f), %.1f s\n",
	       st.file_bytes, st.bits_per_pixel, st.psnr_db, st.mse, secs);
	return 0;
}

/* mkdir -p of the directories of rel under root. */
static int make_parents(const char *root, const char *rel)
{
	char *p;
	if (asprintf(&p, "%s/%s", root, rel) < 0)
		return -1;
	size_t rootlen = strlen(root) + 1;
	for (char *s = p + rootlen; (s = strchr(s, '/')); s++) {
		*s = 0;
		if (mkdir(p, 0777) != 0 && errno != EEXIST) {
			free(p);
			return -1;
		}
		*s = '/';
	}
	free(p);
	return 0;
}

int wc_qvq_cmd_unpack(const char *archive, const char *dir)
{
	wc_qvq *q;
	wc_err e = wc_qvq_open(archive, &q);
	if (e)
		return fail(archive, e);
	if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
		fprintf(stderr, "wcodec: unpack: %s: %s\n", dir, strerror(errno));
		wc_qvq_release(q);
		return 1;
	}
	wc_qvq_memo memo;
	wc_qvq_tile_getter g;
	wc_qvq_memo_init(&memo, q, &g);
	int rc = 0;
	uint8_t *buf = NULL;
	size_t cap = 0;
	uint32_t nf = wc_qvq_nfiles(q);
	for (uint32_t f = 0; f < nf && !rc; f++) {
		const char *name = wc_qvq_file_name(q, f);
		uint64_t size = wc_qvq_file_size(q, f);
		char *path = NULL;
		if (make_parents(dir, name) != 0 || asprintf(&path, "%s/%s", dir, name) < 0) {
			fprintf(stderr, "wcodec: unpack: %s/%s: %s\n", dir, name, strerror(errno));
			rc = 1;
			break;
		}
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
		if (fd < 0) {
			fprintf(stderr, "wcodec: unpack: %s: %s\n", path, strerror(errno));
			free(path);
			rc = 1;
			break;
		}
		/* Copy in pieces of at most 16 MiB (images.npy may be large). */
		for (uint64_t off = 0; off < size && !rc;) {
			size_t want = size - off < (16u << 20) ? (size_t)(size - off) : (16u << 20);
			if (cap < want) {
				uint8_t *nb = realloc(buf, want);
				if (!nb) { rc = fail("unpack", wc_fail(WC_E_NOMEM, "no memory")); break; }
				buf = nb;
				cap = want;
			}
			size_t got;
			if ((e = wc_qvq_file_read(q, f, buf, want, off, &g, &got))) {
				rc = fail(path, e);
				break;
			}
			if (got != want || write(fd, buf, got) != (ssize_t)got) {
				fprintf(stderr, "wcodec: unpack: %s: short write\n", path);
				rc = 1;
			}
			off += got;
		}
		if (close(fd) != 0 && !rc) {
			fprintf(stderr, "wcodec: unpack: %s: %s\n", path, strerror(errno));
			rc = 1;
		}
		free(path);
	}
	if (!rc)
		printf("%s: %u files written under %s\n", archive, nf, dir);
	free(buf);
	wc_qvq_memo_free(&memo);
	wc_qvq_release(q);
	return rc;
}

int wc_qvq_cmd_info(const char *archive)
{
	wc_qvq *q;
	wc_err e = wc_qvq_open(archive, &q);
	if (e)
		return fail(archive, e);
	const wc_qvq_header *h = wc_qvq_header_of(q);
	uint64_t pixels = 0, payload = 0;
	for (uint32_t i = 0; i < h->nimages; i++)
		pixels += (uint64_t)wc_qvq_image_at(q, i)->width * wc_qvq_image_at(q, i)->height;
	for (uint32_t t = 0; t < h->ntiles; t++)
		payload += wc_qvq_tile_at(q, t)->csize;
	uint32_t nlabels;
	wc_qvq_labels(q, &nlabels);
	printf("%s: qvq image archive, format version %u\n", archive, h->version);
	printf("  images:   %u (%" PRIu64 " pixels)", h->nimages, pixels);
	const wc_qvq_image *im0 = wc_qvq_image_at(q, 0);
	int uniform = wc_qvq_nfiles(q) > h->nimages && strcmp(wc_qvq_file_name(q, h->nimages),
							      "images.npy") == 0;
	if (uniform)
		printf(", all %ux%u", im0->width, im0->height);
	printf("\n  codebook: %u entries of %ux%ux%u, %u-byte indices\n", h->entries, h->patch_h,
	       h->patch_w, h->channels, h->index_bytes);
	printf("  tiles:    %u, payloads %" PRIu64 " bytes, rANS chunk %u symbols, %u tables\n",
	       h->ntiles, payload, h->chunk_symbols, h->ntables);
	printf("  file:     %" PRIu64 " bytes, %.3f bits/pixel\n", h->file_size,
	       pixels ? 8.0 * (double)h->file_size / (double)pixels : 0.0);
	printf("  labels:   %u\n", nlabels);
	printf("  metadata: %s\n", wc_qvq_metadata(q));
	wc_qvq_release(q);
	return 0;
}

int wc_qvq_cmd_verify(const char *archive)
{
	wc_qvq *q;
	wc_err e = wc_qvq_open(archive, &q);
	if (e)
		return fail(archive, e);
	uint8_t *buf = NULL;
	size_t cap = 0;
	uint32_t bad = 0, nt = wc_qvq_ntiles(q);
	for (uint32_t t = 0; t < nt; t++) {
		const wc_qvq_tile *tl = wc_qvq_tile_at(q, t);
		if (cap < tl->dsize) {
			uint8_t *nb = realloc(buf, tl->dsize);
			if (!nb) {
				free(buf);
				wc_qvq_release(q);
				return fail("verify", wc_fail(WC_E_NOMEM, "no memory"));
			}
			buf = nb;
			cap = tl->dsize;
		}
		if ((e = wc_qvq_decode_tile(q, t, buf))) {
			fail(archive, e);
			bad++;
		}
	}
	free(buf);
	if (bad)
		fprintf(stderr, "wcodec: verify: %s: %u of %u tiles damaged\n", archive, bad, nt);
	else
		printf("%s: OK (%u images, %u tiles decoded, every checksum matches)\n", archive,
		       wc_qvq_nimages(q), nt);
	wc_qvq_release(q);
	return bad ? 1 : 0;
}

int wc_qvq_is_archive(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		char head[8];
		ssize_t n = read(fd, head, sizeof head);
		close(fd);
		if (n == 8)
			return memcmp(head, WC_QVQ_MAGIC, 8) == 0;
	}
	size_t l = strlen(path);
	return l > 4 && strcmp(path + l - 4, ".qvq") == 0;
}
