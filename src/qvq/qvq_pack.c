/* qvq_pack.c - directory of images -> .qvq archive (see qvq_pack.h). */
#include "config.h"
#include "qvq/qvq_pack.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/atomic_file.h"
#include "core/limits.h"
#include "images/image_io.h"
#include "qvq/kmeans.h"
#include "qvq/qvq.h"
#include "qvq/qvq_dct_rate.h"
#include "qvq/qvq_pack_tx.h"
#include "qvq/qvq_parallel.h"
#include "qvq/qvq_writer.h"

#define PATCH 2u
#define DIM (PATCH * PATCH * 3u)
#define MAX_DEPTH 64

typedef struct name_list {
	char **v;
	size_t n, cap;
} name_list;

static int is_image_name(const char *n)
{
	const char *dot = strrchr(n, '.');
	if (!dot)
		return 0;
	static const char *const ext[] = {".png", ".jpg", ".jpeg", ".ppm", ".pgm"};
	for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++)
		if (strcasecmp(dot, ext[i]) == 0)
			return 1;
	return 0;
}

/* A directory's identity, to tell a symlink loop from deep nesting. */
typedef struct dir_id {
	dev_t dev;
	ino_t ino;
} dir_id;

/* Collect the image files under root/rel (symlinks followed) into out.
 * anc[0..depth] are the identities of root/rel and its ancestors: a
 * directory that is one of them (a symlink back up the tree) is skipped
 * with a warning, as find -L does, instead of being walked until the depth
 * limit fails the whole pack. */
static wc_err scan(const char *root, const char *rel, int depth, dir_id *anc, name_list *out)
{
	if (depth > MAX_DEPTH)
		return wc_fail(WC_E_INVAL, "%s/%s: directories nested deeper than %d", root, rel,
			       MAX_DEPTH);
	char *path;
	if (asprintf(&path, "%s%s%s", root, *rel ? "/" : "", rel) < 0)
		return wc_fail(WC_E_NOMEM, "no memory");
	DIR *d = opendir(path);
	if (!d) {
		wc_err e = wc_fail(WC_E_IO, "%s: %s", path, strerror(errno));
		free(path);
		return e;
	}
	wc_err e = WC_OK;
	struct dirent *de;
	while (!e && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue; /* ".", "..", dotfiles */
		char *child, *full;
		if (asprintf(&child, "%s%s%s", rel, *rel ? "/" : "", de->d_name) < 0) {
			e = wc_fail(WC_E_NOMEM, "no memory");
			break;
		}
		if (asprintf(&full, "%s/%s", path, de->d_name) < 0) {
			free(child);
			e = wc_fail(WC_E_NOMEM, "no memory");
			break;
		}
		struct stat st;
		if (stat(full, &st) != 0) {
			wc_log(WC_LOG_WARN, "pack-images: skipping %s: %s", full, strerror(errno));
			free(child);
		} else if (S_ISDIR(st.st_mode)) {
			int loop = 0;
			for (int a = 0; a <= depth && !loop; a++)
				loop = anc[a].dev == st.st_dev && anc[a].ino == st.st_ino;
			if (loop) {
				wc_log(WC_LOG_WARN, "pack-images: skipping %s: it leads back to a "
				       "directory above it (a symlink loop)", full);
			} else {
				anc[depth + 1] = (dir_id){ st.st_dev, st.st_ino };
				e = scan(root, child, depth + 1, anc, out);
			}
			free(child);
		} else if (S_ISREG(st.st_mode) && is_image_name(de->d_name)) {
			if (out->n == out->cap) {
				size_t nc = out->cap ? 2 * out->cap : 256;
				char **nv = realloc(out->v, nc * sizeof *nv);
				if (!nv) {
					free(child);
					free(full);
					e = wc_fail(WC_E_NOMEM, "no memory");
					break;
				}
				out->v = nv;
				out->cap = nc;
			}
			out->v[out->n++] = child;
		} else {
			free(child);
		}
		free(full);
	}
	closedir(d);
	free(path);
	return e;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

typedef struct load_ctx {
	const char *root;
	char **names;
	wc_image *img;
	wc_err *err;
	char (*why)[600];
	uint32_t w, h;
} load_ctx;

static void load_slice(void *p, unsigned slice, size_t begin, size_t end)
{
	(void)slice;
	load_ctx *c = p;
	for (size_t i = begin; i < end; i++) {
		char *full;
		if (asprintf(&full, "%s/%s", c->root, c->names[i]) < 0) {
			c->err[i] = WC_E_NOMEM;
			snprintf(c->why[i], sizeof c->why[i], "no memory");
			continue;
		}
		wc_image src;
		/* Without --size an image must fit the archive as it is: refuse a
		 * larger one from its header, before decoding it (a small file
		 * can claim hundreds of MB of pixels, and loads run in parallel). */
		wc_err e = wc_image_load_max(full, c->w ? WC_IMAGE_MAX_PIXELS
						       : WC_QVQ_MAX_IMAGE_BYTES / 3, &src);
		if (e == WC_E_RANGE && !c->w) {
			char why[sizeof c->why[0] - 32];
			snprintf(why, sizeof why, "%s", wc_last_detail());
			e = wc_fail(e, "%s; use --size", why);
		}
		if (!e && c->w) {
			e = wc_image_resize_crop(&src, c->w, c->h, &c->img[i]);
			wc_image_free(&src);
		} else if (!e) {
			c->img[i] = src;
		}
		if (!e && (c->img[i].width > WC_QVQ_MAX_SIDE || c->img[i].height > WC_QVQ_MAX_SIDE ||
			   (uint64_t)c->img[i].width * c->img[i].height * 3 > WC_QVQ_MAX_IMAGE_BYTES))
			e = wc_fail(WC_E_RANGE, "%s: %ux%u is beyond the archive limits (sides <= %u, "
				    "%u bytes); use --size", full, c->img[i].width,
				    c->img[i].height, WC_QVQ_MAX_SIDE, WC_QVQ_MAX_IMAGE_BYTES);
		c->err[i] = e;
		if (e)
			snprintf(c->why[i], sizeof c->why[i], "%s", wc_last_detail());
		free(full);
	}
}

/* Patches of one image, row-major over the patch grid; a patch reaching
 * past the right or bottom edge repeats the last column or row (edge
 * padding, docs/FORMAT.md 6.5). */
static void extract_patches(const wc_image *im, uint8_t *out)
{
	uint32_t gw = (im->width + PATCH - 1) / PATCH, gh = (im->height + PATCH - 1) / PATCH;
	for (uint32_t gy = 0; gy < gh; gy++)
		for (uint32_t gx = 0; gx < gw; gx++)
			for (uint32_t dy = 0; dy < PATCH; dy++)
				for (uint32_t dx = 0; dx < PATCH; dx++) {
					uint32_t y = gy * PATCH + dy, x = gx * PATCH + dx;
					if (y >= im->height) y = im->height - 1;
					if (x >= im->width) x = im->width - 1;
					memcpy(out, im->rgb + ((size_t)y * im->width + x) * 3, 3);
					out += 3;
				}
}

/* The encoder's reconstruction: each patch's codebook entry written back
 * into the pixels it covers (computed in patch space, independently of the
 * decoder's gather). */
static void reconstruct(const uint8_t *cb, const uint16_t *idx, uint32_t w, uint32_t h,
			uint8_t *out)
{
	uint32_t gw = (w + PATCH - 1) / PATCH, gh = (h + PATCH - 1) / PATCH;
	for (uint32_t gy = 0; gy < gh; gy++)
		for (uint32_t gx = 0; gx < gw; gx++) {
			const uint8_t *p = cb + (size_t)idx[(size_t)gy * gw + gx] * DIM;
			for (uint32_t dy = 0; dy < PATCH; dy++)
				for (uint32_t dx = 0; dx < PATCH; dx++) {
					uint32_t y = gy * PATCH + dy, x = gx * PATCH + dx;
					if (y < h && x < w)
						memcpy(out + ((size_t)y * w + x) * 3,
						       p + (dy * PATCH + dx) * 3, 3);
				}
		}
}

static void kmeans_progress(void *ctx, int stage, uint64_t done, uint64_t total)
{
	const wc_qvq_pack_opts *o = ctx;
	o->progress(o->progress_ctx, stage == 0 ? "seed" : "train", done, total);
}

static void write_progress(void *ctx, uint64_t done, uint64_t total)
{
	const wc_qvq_pack_opts *o = ctx;
	o->progress(o->progress_ctx, "write", done, total);
}

void wc_qvq_pack_stats_free(wc_qvq_pack_stats *s)
{
	for (uint32_t i = 0; s->recon && i < s->nimages; i++)
		free(s->recon[i]);
	for (uint32_t i = 0; s->names && i < s->nimages; i++)
		free(s->names[i]);
	free(s->recon);
	free(s->names);
	free(s->dims);
	s->recon = NULL;
	s->names = NULL;
	s->dims = NULL;
}

/* Fail before the work, not after it (reading a large image set and
 * training its codebook take hours): the archive's temporary file must be
 * creatable beside `out`, as wc_qvq_write will make it. */
static wc_err probe_output(const char *out)
{
	wc_atomic_file f;
	wc_err e = wc_atomic_create(&f, out);
	if (e)
		return wc_fail_context(e, "qvq");
	wc_atomic_abort(&f);
	return WC_OK;
}

/* The codebook mode: patches, k-means codebook (*got entries), one index a
 * patch, and the reconstruction's PSNR over the true pixels into st. */
static wc_err encode_vq(const wc_image *img, size_t n, char **names, const wc_qvq_pack_opts *o, uint32_t K,
			unsigned threads, uint64_t pixels, uint8_t **codebook_out, uint16_t **idx_out,
			uint32_t *got, wc_qvq_pack_stats *st)
{
	/* Patches of every image, back to back. */
	uint64_t npatch = 0;
	for (size_t i = 0; i < n; i++)
		npatch += wc_qvq_patches(img[i].width, img[i].height, PATCH, PATCH);
	wc_err e = WC_OK;
	uint8_t *patches = malloc(npatch * DIM), *codebook = malloc((size_t)K * DIM);
	uint16_t *idx = malloc(npatch * sizeof *idx);
	*codebook_out = codebook;
	*idx_out = idx;
	if (!patches || !idx || !codebook) {
		e = wc_fail(WC_E_NOMEM, "no memory for %llu patches", (unsigned long long)npatch);
		goto out;
	}
	uint64_t pos = 0;
	for (size_t i = 0; i < n; i++) {
		extract_patches(&img[i], patches + pos * DIM);
		pos += wc_qvq_patches(img[i].width, img[i].height, PATCH, PATCH);
	}

	/* Codebook and assignment. */
	wc_kmeans_opts ko = {.k = K, .dim = DIM, .seed = o->seed, .threads = threads,
			     .iterations = o->iterations,
			     .progress = o->progress ? kmeans_progress : NULL,
			     .progress_ctx = (void *)o,
			     .nearest = o->nearest, .nearest_ctx = o->nearest_ctx};
	if ((e = wc_kmeans_train(patches, npatch, &ko, codebook, got)))
		goto out;
	if (o->progress)
		o->progress(o->progress_ctx, "assign", 0, 1);
	if ((e = wc_kmeans_assign_opts(codebook, *got, patches, npatch, &ko, idx, NULL)))
		goto out;
	if (o->progress)
		o->progress(o->progress_ctx, "assign", 1, 1);

	/* PSNR over the true pixels (padding excluded). */
	double se = 0;
	if (o->keep_recon) {
		st->recon = calloc(n, sizeof *st->recon);
		st->names = calloc(n, sizeof *st->names);
		st->nimages = (uint32_t)n;
		if (!st->recon || !st->names) {
			e = wc_fail(WC_E_NOMEM, "no memory");
			goto out;
		}
	}
	pos = 0;
	for (size_t i = 0; i < n; i++) {
		size_t bytes = (size_t)img[i].width * img[i].height * 3;
		uint8_t *rec = malloc(bytes);
		if (!rec) {
			e = wc_fail(WC_E_NOMEM, "no memory");
			goto out;
		}
		reconstruct(codebook, idx + pos, img[i].width, img[i].height, rec);
		uint64_t s = 0;
		for (size_t j = 0; j < bytes; j++) {
			int d = (int)rec[j] - (int)img[i].rgb[j];
			s += (uint64_t)(d * d);
		}
		se += (double)s;
		pos += wc_qvq_patches(img[i].width, img[i].height, PATCH, PATCH);
		if (o->keep_recon) {
			st->recon[i] = rec;
			st->names[i] = strdup(names[i]);
		} else {
			free(rec);
		}
	}
	st->nimages = (uint32_t)n;
	st->mse = se / ((double)pixels * 3);
	st->psnr_db = st->mse > 0 ? 10 * log10(255.0 * 255.0 / st->mse) : INFINITY;
out:
	free(patches);
	return e;
}

wc_err wc_qvq_pack_dir(const char *dir, const char *out, const wc_qvq_pack_opts *o,
		       wc_qvq_pack_stats *st)
{
	memset(st, 0, sizeof *st);
	uint32_t K = o->entries ? o->entries : 256;
	if (K > WC_QVQ_MAX_ENTRIES)
		return wc_fail(WC_E_INVAL, "codebook of %u entries (1..%u)", K, WC_QVQ_MAX_ENTRIES);
	if ((o->width == 0) != (o->height == 0))
		return wc_fail(WC_E_INVAL, "--size needs both a width and a height");
	if (o->width > WC_QVQ_MAX_SIDE || o->height > WC_QVQ_MAX_SIDE)
		return wc_fail(WC_E_INVAL, "--size %ux%u beyond %u", o->width, o->height,
			       WC_QVQ_MAX_SIDE);
	unsigned threads = o->threads ? o->threads : wc_cpu_count();
	name_list names = {0};
	dir_id anc[MAX_DEPTH + 2];
	struct stat rst;
	wc_err e = stat(dir, &rst) != 0 ? wc_fail(WC_E_IO, "%s: %s", dir, strerror(errno)) : WC_OK;
	if (!e)
		e = probe_output(out);
	if (!e) {
		anc[0] = (dir_id){ rst.st_dev, rst.st_ino };
		e = scan(dir, "", 0, anc, &names);
	}
	wc_image *img = NULL;
	wc_err *errs = NULL;
	char (*why)[600] = NULL;
	uint8_t *codebook = NULL;
	uint16_t *idx = NULL;
	uint32_t *dims = NULL, *labels = NULL;
	char **label_names = NULL;
	uint32_t nlabels = 0;
	json_t *meta = NULL;
	size_t n = names.n;
	if (e)
		goto out;
	if (n == 0) {
		e = wc_fail(WC_E_NOTFOUND, "%s: no .png, .jpg, .jpeg, .ppm or .pgm image found", dir);
		goto out;
	}
	if (n > WC_QVQ_MAX_IMAGES) {
		e = wc_fail(WC_E_RANGE, "%s: %zu images (limit %u)", dir, n, WC_QVQ_MAX_IMAGES);
		goto out;
	}
	qsort(names.v, n, sizeof *names.v, cmp_name);

	/* Decode (and resize) every image, in parallel, a batch at a time. */
	img = calloc(n, sizeof *img);
	errs = calloc(n, sizeof *errs);
	why = calloc(n, sizeof *why);
	dims = malloc(2 * n * sizeof *dims);
	if (!img || !errs || !why || !dims) {
		e = wc_fail(WC_E_NOMEM, "no memory for %zu images", n);
		goto out;
	}
	load_ctx lc = {dir, names.v, img, errs, why, o->width, o->height};
	for (size_t b = 0; b < n && !e; b += 64) {
		size_t cnt = n - b < 64 ? n - b : 64;
		load_ctx sub = lc;
		sub.names += b; sub.img += b; sub.err += b; sub.why += b;
		wc_qvq_parallel(threads < cnt ? threads : (unsigned)cnt, cnt, load_slice, &sub);
		for (size_t i = b; i < b + cnt && !e; i++) {
			if (!errs[i])
				continue;
			if (o->skip_unreadable && errs[i] != WC_E_NOMEM) {
				wc_log(WC_LOG_WARN, "pack-images: skipping %s", why[i]);
				st->skipped++;
			} else {
				e = wc_fail(errs[i], "%s", why[i]);
			}
		}
		if (o->progress)
			o->progress(o->progress_ctx, "load", b + cnt, n);
	}
	if (e)
		goto out;
	if (st->skipped) { /* drop the skipped images, keeping the order */
		size_t k = 0;
		for (size_t i = 0; i < n; i++) {
			if (errs[i]) {
				free(names.v[i]);
				continue;
			}
			names.v[k] = names.v[i];
			img[k] = img[i];
			k++;
		}
		names.n = n = k;
		if (n == 0) {
			e = wc_fail(WC_E_NOTFOUND, "%s: no image could be read (%llu skipped)", dir,
				    (unsigned long long)st->skipped);
			goto out;
		}
	}

	uint64_t pixels = 0;
	for (size_t i = 0; i < n; i++) {
		dims[2 * i] = img[i].width;
		dims[2 * i + 1] = img[i].height;
		pixels += (uint64_t)img[i].width * img[i].height;
	}
	uint32_t got = 0, step = 0;
	st->nimages = (uint32_t)n;
	if (o->mode == WC_QVQ_MODE_DCT)
		e = qvq_pack_tx_prepare(img, n, names.v, o, &step, st);
	else
		e = encode_vq(img, n, names.v, o, K, threads, pixels, &codebook, &idx, &got, st);
	if (e)
		goto out;

	/* Labels: the first directory, when every image has one. */
	int all_in_dirs = 1;
	for (size_t i = 0; i < n; i++)
		all_in_dirs &= strchr(names.v[i], '/') != NULL;
	if (all_in_dirs) {
		labels = malloc(n * sizeof *labels);
		label_names = calloc(n, sizeof *label_names);
		if (!labels || !label_names) {
			e = wc_fail(WC_E_NOMEM, "no memory");
			goto out;
		}
		/* Names are sorted, so equal first components are adjacent and
		 * label indices come out in sorted order. */
		for (size_t i = 0; i < n; i++) {
			size_t l = (size_t)(strchr(names.v[i], '/') - names.v[i]);
			if (!nlabels || strlen(label_names[nlabels - 1]) != l ||
			    memcmp(label_names[nlabels - 1], names.v[i], l) != 0) {
				if (!(label_names[nlabels] = strndup(names.v[i], l))) {
					e = wc_fail(WC_E_NOMEM, "no memory");
					goto out;
				}
				nlabels++;
			}
			labels[i] = nlabels - 1;
		}
	}

	if (o->mode == WC_QVQ_MODE_DCT)
		meta = json_pack("{s:s, s:{s:s, s:[i,i], s:o, s:o}, s:s}", "generator",
				 "wcodec pack-images " PACKAGE_VERSION, "transform", "method",
				 "8x8 DCT of YCbCr 4:2:0, steps in eighths", "steps", (int)step,
				 (int)qvq_dct_chroma_step(step), "quality",
				 o->quality ? json_integer(o->quality) : json_null(), "psnr_target",
				 o->psnr_db > 0 ? json_real(o->psnr_db) : json_null(), "padding", "edge");
	else
		meta = json_pack("{s:s, s:{s:i, s:i, s:[i,i,i], s:I, s:s}, s:s, s:f}",
				 "generator", "wcodec pack-images " PACKAGE_VERSION,
				 "codebook", "entries", (int)got, "requested", (int)K, "patch", 2, 2, 3,
				 "seed", (json_int_t)o->seed, "training", "k-means++ seeding, Lloyd iterations",
				 "padding", "edge", "psnr_db", isfinite(st->psnr_db) ? st->psnr_db : 999.0);
	if (!meta) {
		e = wc_fail(WC_E_NOMEM, "no memory for the metadata");
		goto out;
	}
	if (o->width)
		json_object_set_new(meta, "resize",
				    json_pack("{s:i, s:i, s:s}", "width", (int)o->width, "height",
					      (int)o->height, "method",
					      "shorter side, antialiased triangle filter, centre crop"));
	const uint8_t **rgb = o->mode == WC_QVQ_MODE_DCT ? malloc(n * sizeof *rgb) : NULL;
	if (o->mode == WC_QVQ_MODE_DCT && !rgb) {
		e = wc_fail(WC_E_NOMEM, "no memory");
		goto out;
	}
	for (size_t i = 0; rgb && i < n; i++)
		rgb[i] = img[i].rgb;
	wc_qvq_write_input wi = {
		.mode = o->mode == WC_QVQ_MODE_DCT ? WC_QVQ_MODE_DCT : WC_QVQ_MODE_VQ, .rgb = rgb,
		.step_luma = (uint16_t)step, .step_chroma = (uint16_t)qvq_dct_chroma_step(step),
		.entries = got, .patch_h = PATCH, .patch_w = PATCH, .codebook = codebook,
		.nimages = (uint32_t)n, .names = (const char *const *)names.v, .dims = dims,
		.labels = labels, .label_names = (const char *const *)label_names,
		.nlabels = nlabels, .indices = idx, .metadata = meta,
		.tile_bytes = o->tile_bytes, .chunk_symbols = o->chunk_symbols, .threads = threads,
		.progress = o->progress ? write_progress : NULL, .progress_ctx = (void *)o,
		.tmp_path = o->tmp_path,
	};
	wc_qvq_write_stats ws;
	e = wc_qvq_write(out, &wi, &ws);
	free(rgb);
	if (e)
		goto out;
	if (o->mode == WC_QVQ_MODE_DCT) { /* the archive's own decode, as readers will see it */
		st->mse = ws.sq_err / ((double)pixels * 3);
		st->psnr_db = st->mse > 0 ? 10 * log10(255.0 * 255.0 / st->mse) : INFINITY;
	}
	st->entries = got;
	st->nlabels = nlabels;
	st->ntiles = ws.ntiles;
	st->pixels = pixels;
	st->file_bytes = ws.file_bytes;
	st->bits_per_pixel = 8.0 * (double)ws.file_bytes / (double)pixels;
	if (o->keep_recon) {
		st->dims = dims;
		dims = NULL;
	}
out:
	if (e && o->keep_recon)
		wc_qvq_pack_stats_free(st);
	for (size_t i = 0; img && i < n; i++)
		wc_image_free(&img[i]);
	for (size_t i = 0; i < names.n; i++)
		free(names.v[i]);
	for (uint32_t l = 0; l < nlabels; l++)
		free(label_names[l]);
	free(label_names);
	free(labels);
	free(names.v);
	free(img);
	free(errs);
	free(why);
	free(idx);
	free(codebook);
	free(dims);
	json_decref(meta);
	return e;
}
