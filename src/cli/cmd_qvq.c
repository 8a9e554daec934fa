/* cmd_qvq.c - unpack / info / verify of .qvq archives for the wcodec CLI. */
#include "cli/cmd_qvq.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/backend.h"
#include "qvq/qvq.h"
#include "qvq/qvq_files.h"

/* mkdir -p of the directories of rel under root (rel is a validated shown
 * name: no "..", no absolute path), following no symbolic link that is
 * already there (cli_mkdir_here). */
static wc_err make_parents(const char *root, const char *rel)
{
	char *p;
	if (asprintf(&p, "%s/%s", root, rel) < 0)
		return wc_fail(WC_E_NOMEM, "out of memory");
	wc_err e = WC_OK;
	for (char *s = p + strlen(root) + 1; !e && (s = strchr(s, '/')); s++) {
		*s = 0;
		e = cli_mkdir_here(p, 0777);
		*s = '/';
	}
	free(p);
	return e;
}

/* Write file f of q to path through the temporary-file helper. */
static int write_file(const wc_qvq *q, uint32_t f, const char *path, const wc_qvq_tile_getter *g,
		      uint8_t **buf, size_t *cap)
{
	cli_tmpfile t;
	wc_err e = cli_tmp_create(&t, path);
	if (e)
		return cli_error(e, path);
	uint64_t size = wc_qvq_file_size(q, f);
	for (uint64_t off = 0; off < size;) {
		size_t want = size - off < (16u << 20) ? (size_t)(size - off) : (16u << 20);
		if (*cap < want) {
			uint8_t *nb = realloc(*buf, want);
			if (!nb) {
				cli_tmp_abort(&t);
				return cli_error(wc_fail(WC_E_NOMEM, "no memory"), path);
			}
			*buf = nb;
			*cap = want;
		}
		size_t got;
		if ((e = wc_qvq_file_read(q, f, *buf, want, off, g, &got))) {
			cli_tmp_abort(&t);
			return cli_error(e, path);
		}
		for (size_t w = 0; w < got;) {
			ssize_t r = write(t.fd, *buf + w, got - w);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0) {
				e = wc_fail(WC_E_IO, "write %s: %s", t.tmp, strerror(errno));
				cli_tmp_abort(&t);
				return cli_error(e, path);
			}
			w += (size_t)r;
		}
		off += got;
	}
	if ((e = cli_tmp_commit(&t)))
		return cli_error(e, path);
	return CLI_OK;
}

int qvq_cli_unpack(const char *in, const char *out, const cli_decode_opts *o)
{
	wc_qvq *q;
	wc_err e = wc_qvq_open(in, &q);
	if (e)
		return cli_error(e, in);
	if (mkdir(out, 0777) != 0 && errno != EEXIST) {
		fprintf(stderr, "wcodec: unpack: %s: %s\n", out, strerror(errno));
		wc_qvq_release(q);
		return CLI_FAIL;
	}
	wc_qvq_memo memo;
	wc_qvq_tile_getter g;
	wc_qvq_memo_init(&memo, q, &g);
	cli_progress prog;
	cli_progress_init(&prog, "unpacking", o->quiet);
	uint8_t *buf = NULL;
	size_t cap = 0;
	int rc = CLI_OK;
	uint32_t nf = wc_qvq_nfiles(q);
	for (uint32_t f = 0; f < nf && rc == CLI_OK; f++) {
		const char *name = wc_qvq_file_name(q, f);
		char *path = NULL;
		if ((e = make_parents(out, name)) || asprintf(&path, "%s/%s", out, name) < 0) {
			rc = cli_error(e ? e : wc_fail(WC_E_NOMEM, "out of memory"), "unpack");
			break;
		}
		rc = write_file(q, f, path, &g, &buf, &cap);
		free(path);
		cli_progress_update(&prog, f + 1, nf);
	}
	cli_progress_done(&prog);
	if (rc == CLI_OK && !o->quiet)
		printf("%s: %u files written under %s\n", in, nf, out);
	free(buf);
	wc_qvq_memo_free(&memo);
	wc_qvq_release(q);
	return rc;
}

/* The archive's pixels, over all its images. */
static uint64_t total_pixels(const wc_qvq *q)
{
	uint64_t pixels = 0;
	for (uint32_t i = 0; i < wc_qvq_nimages(q); i++)
		pixels += (uint64_t)wc_qvq_image_at(q, i)->width * wc_qvq_image_at(q, i)->height;
	return pixels;
}

int qvq_cli_sizes(const char *path, uint64_t *decoded, uint64_t *stored)
{
	wc_qvq *q;
	wc_err e = wc_qvq_open(path, &q);
	if (e)
		return cli_error(e, path);
	const wc_qvq_header *h = wc_qvq_header_of(q);
	*decoded = total_pixels(q) * h->channels;
	*stored = h->file_size;
	wc_qvq_release(q);
	return CLI_OK;
}

int qvq_cli_info(const char *path, int json)
{
	wc_qvq *q;
	wc_err e = wc_qvq_open(path, &q);
	if (e)
		return cli_error(e, path);
	const wc_qvq_header *h = wc_qvq_header_of(q);
	const uint64_t pixels = total_pixels(q);
	uint64_t payload = 0;
	for (uint32_t t = 0; t < h->ntiles; t++)
		payload += wc_qvq_tile_at(q, t)->csize;
	uint32_t nlabels;
	wc_qvq_labels(q, &nlabels);
	const wc_qvq_image *im0 = wc_qvq_image_at(q, 0);
	int uniform = wc_qvq_nfiles(q) > h->nimages &&
		      strcmp(wc_qvq_file_name(q, h->nimages), "images.npy") == 0;
	double bpp = pixels ? 8.0 * (double)h->file_size / (double)pixels : 0.0;
	if (json) {
		json_t *meta = json_loads(wc_qvq_metadata(q), 0, NULL);
		json_t *o = json_pack("{s:s, s:s, s:i, s:i, s:I, s:{s:i, s:[i,i,i], s:i}, s:i, s:I, s:I, s:f, s:i, s:o}",
				      "file", path, "format", "qvq", "version", (int)h->version,
				      "images", (int)h->nimages, "pixels", (json_int_t)pixels,
				      "codebook", "entries", (int)h->entries, "patch", (int)h->patch_h,
				      (int)h->patch_w, (int)h->channels, "index_bytes", (int)h->index_bytes,
				      "tiles", (int)h->ntiles, "payload_bytes", (json_int_t)payload,
				      "file_bytes", (json_int_t)h->file_size, "bits_per_pixel", bpp,
				      "labels", (int)nlabels, "metadata", meta ? meta : json_null());
		if (o && (json_object_set_new(o, "decoded_bytes", json_integer((json_int_t)(pixels * h->channels))) ||
			  json_object_set_new(o, "ratio", json_real(cli_ratio(pixels * h->channels, h->file_size))))) {
			json_decref(o);
			o = NULL;
		}
		if (o)
			json_object_set_new(o, "mode", json_string(h->mode == WC_QVQ_MODE_DCT ? "transform" : "codebook"));
		if (o && h->mode == WC_QVQ_MODE_DCT)
			json_object_set_new(o, "steps", json_pack("[f,f]", h->step_luma / 8.0, h->step_chroma / 8.0));
		if (o && uniform)
			json_object_set_new(o, "size", json_pack("[i,i]", (int)im0->width, (int)im0->height));
		char *s = o ? json_dumps(o, JSON_INDENT(2)) : NULL;
		if (s)
			printf("%s\n", s);
		free(s);
		json_decref(o);
		wc_qvq_release(q);
		return s ? CLI_OK : cli_error(wc_fail(WC_E_NOMEM, "no memory"), path);
	}
	char hb[32];
	printf("%s: qvq image archive, format version %u\n", path, h->version);
	printf("  images:   %u (%" PRIu64 " pixels)", h->nimages, pixels);
	if (uniform)
		printf(", all %ux%u", im0->width, im0->height);
	if (h->mode == WC_QVQ_MODE_DCT)
		printf("\n  mode:     transform, 8x8 DCT of YCbCr 4:2:0, steps %.3f (luma) / %.3f (chroma)\n",
		       h->step_luma / 8.0, h->step_chroma / 8.0);
	else
		printf("\n  codebook: %u entries of %ux%ux%u, %u-byte indices\n", h->entries, h->patch_h,
		       h->patch_w, h->channels, h->index_bytes);
	printf("  tiles:    %u, payloads %" PRIu64 " bytes, rANS chunk %u symbols, %u tables\n",
	       h->ntiles, payload, h->chunk_symbols, h->ntables);
	printf("  file:     %s (%" PRIu64 " bytes), %.3f bits/pixel\n",
	       cli_human_bytes(h->file_size, hb), h->file_size, bpp);
	printf("  labels:   %u\n", nlabels);
	printf("  metadata: %s\n", wc_qvq_metadata(q));
	wc_qvq_release(q);
	return CLI_OK;
}

#define VERIFY_BATCH 64u

int qvq_cli_verify(const char *path, const cli_decode_opts *o)
{
	wc_qvq *q;
	wc_err e = wc_qvq_open(path, &q);
	if (e)
		return cli_error(e, path);
	wc_backend_opts bo = {.threads = o->threads};
	wc_backend *be;
	if ((e = wc_backend_create(o->backend ? o->backend : "auto", &bo, &be))) {
		wc_qvq_release(q);
		return cli_error(e, "verify");
	}
	uint32_t nt = wc_qvq_ntiles(q), bad = 0;
	uint32_t batch = be->max_batch ? be->max_batch : 16;
	if (batch > VERIFY_BATCH)
		batch = VERIFY_BATCH;
	wc_tile_job *jobs = calloc(batch, sizeof *jobs);
	uint8_t **pay = calloc(batch, sizeof *pay), **outb = calloc(batch, sizeof *outb);
	uint32_t *tile_of = calloc(batch, sizeof *tile_of);
	cli_progress prog;
	cli_progress_init(&prog, "verifying", o->quiet);
	if (!jobs || !pay || !outb || !tile_of) {
		e = wc_fail(WC_E_NOMEM, "no memory");
		goto out;
	}
	for (uint32_t first = 0; first < nt; first += batch) {
		uint32_t n = nt - first < batch ? nt - first : batch, nj = 0;
		for (uint32_t k = 0; k < n; k++) {
			uint32_t t = first + k;
			const wc_qvq_tile *tl = wc_qvq_tile_at(q, t);
			uint8_t *p = realloc(pay[nj], tl->csize), *d = realloc(outb[nj], tl->dsize);
			if (p)
				pay[nj] = p;
			if (d)
				outb[nj] = d;
			if (!p || !d) {
				e = wc_fail(WC_E_NOMEM, "no memory for tile %u", t);
				goto out;
			}
			if ((e = wc_qvq_read_payload(q, t, p))) {
				fprintf(stderr, "%s: damaged tile %u (images %u..%u): %s: %s\n", path, t,
					tl->first_image, tl->first_image + tl->nimages - 1,
					wc_strerror(e), wc_last_detail());
				bad++;
				e = WC_OK;
				continue;
			}
			wc_tile_job *j = &jobs[nj];
			memset(j, 0, sizeof *j);
			wc_qvq_describe_job(q, t, j);
			j->payload = p;
			j->payload_size = tl->csize;
			j->out = d;
			j->out_size = tl->dsize;
			tile_of[nj++] = t;
		}
		if (nj && (e = wc_backend_decode(be, jobs, nj)))
			goto out;
		for (uint32_t k = 0; k < nj; k++) {
			if (jobs[k].status == WC_OK)
				continue;
			uint32_t t = tile_of[k];
			const wc_qvq_tile *tl = wc_qvq_tile_at(q, t);
			/* The reason: decode again here (the backend's thread had it). */
			wc_err re = wc_qvq_decode_tile(q, t, outb[k]);
			fprintf(stderr, "%s: damaged tile %u (images %u..%u): %s: %s\n", path, t,
				tl->first_image, tl->first_image + tl->nimages - 1,
				wc_strerror(jobs[k].status),
				re ? wc_last_detail() : "the decode backend failed on it (the CPU did not)");
			bad++;
		}
		cli_progress_update(&prog, first + n, nt);
	}
out:
	cli_progress_done(&prog);
	for (uint32_t k = 0; pay && k < batch; k++)
		free(pay[k]);
	for (uint32_t k = 0; outb && k < batch; k++)
		free(outb[k]);
	free(pay);
	free(outb);
	free(jobs);
	free(tile_of);
	wc_backend_destroy(be);
	uint32_t ni = wc_qvq_nimages(q);
	uint64_t decoded = total_pixels(q) * wc_qvq_header_of(q)->channels, stored = wc_qvq_header_of(q)->file_size;
	wc_qvq_release(q);
	if (e)
		return cli_error(e, "verify");
	cli_verify_report(o, path, "qvq", decoded, stored, nt, bad, nt);
	if (bad) {
		fprintf(stderr, "%s: %u of %u tiles damaged\n", path, bad, nt);
		return CLI_FAIL;
	}
	if (!o->quiet)
		printf("%s: OK (%u images, %u tiles, every checksum matches)\n", path, ni, nt);
	return CLI_OK;
}
