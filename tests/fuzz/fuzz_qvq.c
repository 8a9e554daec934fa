/* fuzz_qvq.c - fuzz target for the .qvq reader (qvq/qvq.h, qvq/qvq_files.h).
 *
 * The input is a .qvq archive. Before it is opened its checksums are made
 * right again (the header hash, every section hash, each tile's payload
 * chash), so a mutated archive meets the reader's validation rather than a
 * checksum, which test_qvq already covers.
 *
 * Properties checked (abort() on a violation):
 * - wc_qvq_open either fails or gives an archive whose shown names cannot
 *   leave its directory (no absolute path, no "." or ".." component, no
 *   empty component) and whose files have the sizes qvq_files.h gives;
 * - every tile decodes or fails with WC_E_CORRUPT (the decoded checksum is
 *   not fixed, so decoding runs to the end);
 * - every file reads whole, or fails as its tile did: a PPM file starts with
 *   its "P6" header, and its bytes after the header are the tile's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "fuzz/fuzz_target.h"
#include "qvq/qvq.h"
#include "qvq/qvq_files.h"
#include "qvq/qvq_format.h"

#define FUZZ_MAX_INPUT (4u << 20)
#define HEADER_HASH_OFF 184u /* docs/FORMAT.md 6.1: the header's own XXH3-64 */

static void fail(const char *what)
{
	fprintf(stderr, "fuzz_qvq: %s\n", what);
	abort();
}

static void rehash(uint8_t *f, uint64_t off, uint64_t len, uint64_t *hash)
{
	*hash = wc_xxh3_64(f + off, (size_t)len);
}

/* A copy of in with every checksum right, as far as the header allows. */
static uint8_t *rebuild(const uint8_t *in, size_t size)
{
	uint8_t *f = malloc(size ? size : 1);
	if (!f)
		fail("out of memory");
	memcpy(f, in, size);
	if (size < WC_QVQ_HEADER_BYTES)
		return f;
	wc_put_u64(f + HEADER_HASH_OFF, wc_xxh3_64(f, HEADER_HASH_OFF));
	wc_qvq_header h;
	if (wc_qvq_header_parse(f, size, &h) != WC_OK)
		return f;
	for (uint32_t t = 0; t < h.ntiles; t++) {
		uint8_t *r = f + h.tiles_off + (size_t)t * WC_QVQ_TILE_RECORD;
		uint64_t coff = wc_get_u64(r);
		uint32_t csize = wc_get_u32(r + 8);
		if (coff <= size && csize <= size - coff)
			wc_put_u64(r + 32, wc_xxh3_64(f + coff, csize));
	}
	uint64_t cb = (uint64_t)h.entries * h.patch_h * h.patch_w * h.channels;
	rehash(f, h.meta_off, h.meta_len, &h.meta_hash);
	rehash(f, h.codebook_off, cb, &h.codebook_hash);
	rehash(f, h.tables_off, (uint64_t)h.ntables * WC_QVQ_FREQTAB_BYTES, &h.tables_hash);
	rehash(f, h.images_off, (uint64_t)h.nimages * WC_QVQ_IMAGE_RECORD, &h.images_hash);
	rehash(f, h.tiles_off, (uint64_t)h.ntiles * WC_QVQ_TILE_RECORD, &h.tiles_hash);
	rehash(f, h.strings_off, h.strings_len, &h.strings_hash);
	wc_qvq_header_write(&h, f);
	return f;
}

static void check_name(const char *name)
{
	if (!name || !*name || name[0] == '/')
		fail("empty or absolute name");
	for (const char *p = name; *p;) {
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			fail("a name has an empty, \".\" or \"..\" component");
		p += n + (e != NULL);
		if (e && !*p)
			fail("a name ends in '/'");
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > FUZZ_MAX_INPUT)
		return 0;
	uint8_t *img = rebuild(data, size);
	char path[64];
	int fd = fuzz_memfd(img, size, path);
	free(img);
	wc_qvq *q = NULL;
	wc_err oe = wc_qvq_open(path, &q);
	if (getenv("FUZZ_VERBOSE"))
		fprintf(stderr, "fuzz_qvq: open: %s\n", oe ? wc_last_detail() : "ok");
	if (oe == WC_OK) {
		uint32_t ntiles = wc_qvq_ntiles(q), nimages = wc_qvq_nimages(q);
		uint8_t *ok = calloc(ntiles ? ntiles : 1, 1);
		for (uint32_t t = 0; t < ntiles; t++) {
			const wc_qvq_tile *tl = wc_qvq_tile_at(q, t);
			uint8_t *out = malloc(tl->dsize ? tl->dsize : 1);
			if (!out || !ok)
				fail("out of memory");
			wc_err e = wc_qvq_decode_tile(q, t, out);
			if (e != WC_OK && e != WC_E_CORRUPT && e != WC_E_IO)
				fail("a tile failed with an unexpected error");
			ok[t] = e == WC_OK;
			free(out);
		}
		wc_qvq_memo memo;
		wc_qvq_tile_getter getter;
		wc_qvq_memo_init(&memo, q, &getter);
		for (uint32_t f = 0; f < wc_qvq_nfiles(q); f++) {
			check_name(wc_qvq_file_name(q, f));
			uint64_t fsize = wc_qvq_file_size(q, f);
			if (fsize > (256u << 20))
				continue;
			uint8_t *buf = malloc(fsize + 1);
			size_t got = 0;
			if (!buf)
				fail("out of memory");
			wc_err e = wc_qvq_file_read(q, f, buf, fsize + 1, 0, &getter, &got);
			if (e == WC_OK && got != fsize)
				fail("a file read gave other than its size");
			if (f < nimages) {
				const wc_qvq_image *im = wc_qvq_image_at(q, f);
				if ((e == WC_OK) != (ok[im->tile] != 0))
					fail("an image read and its tile decode disagree");
				if (e == WC_OK && memcmp(buf, "P6\n", 3))
					fail("an image file does not start with P6");
				char ppm[64];
				wc_qvq_file_layout lay;
				const wc_qvq_tile *tl = wc_qvq_tile_at(q, im->tile);
				uint8_t *tile = e == WC_OK ? malloc(tl->dsize) : NULL;
				if (tile && (wc_qvq_file_layout_of(q, f, ppm, &lay) != WC_OK ||
					     wc_qvq_decode_tile(q, im->tile, tile) != WC_OK ||
					     lay.prefix_len + lay.data_len != fsize ||
					     memcmp(buf + lay.prefix_len, tile + im->tile_off, (size_t)lay.data_len)))
					fail("an image file's pixels are not its tile's");
				free(tile);
			} else if (e != WC_OK && e != WC_E_CORRUPT && e != WC_E_IO) {
				fail("a file failed with an unexpected error");
			}
			free(buf);
		}
		wc_qvq_memo_free(&memo);
		free(ok);
		wc_qvq_release(q);
	}
	close(fd);
	return 0;
}
