/* fuzz_wcodec.c - fuzz target for the .wcodec reader (container/container.h).
 *
 * The input is a .wcodec file, with one convenience: its metadata section
 * may hold the content itself (the tensor table, or the JSON of versions 1
 * and 2) instead of the zstd frame of it, and is then compressed here, so a
 * fuzzer's edits reach the metadata parser. Before the
 * file is opened its checksums are made right again (each tile's payload
 * chash and the header's check): a mutated file then fails the reader's
 * validation, not just a checksum, which test_container already covers.
 *
 * Properties checked (abort() on a violation):
 * - a file that wc_container_open accepts, wc_container_open_tiles does too;
 * - wc_container_open either fails or gives a container that keeps the
 *   promises container.h makes: tensors within the virtual file, tiles
 *   within their tensor, in order, with sizes under the tile size;
 * - every tile then reads and decodes or fails with WC_E_CORRUPT (the
 *   decoded checksum is not fixed, so decoding runs to the end);
 * - wc_container_pread of the whole virtual file succeeds exactly when
 *   every tile decoded, and then gives the tiles' bytes after the prefix. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "container/container.h"
#include "container/format.h"
#include "core/hash.h"
#include "fuzz/fuzz_target.h"
#include "wcodec_resign.h"

#define FUZZ_MAX_INPUT (4u << 20)

static void fail(const char *what)
{
	fprintf(stderr, "fuzz_wcodec: %s\n", what);
	abort();
}

/* in -> a file image with compressed metadata and right checksums, or NULL
 * when the header does not decode (the reader's header checks then run on
 * the input as it is). */
static uint8_t *rebuild(const uint8_t *in, size_t size, size_t *out_size)
{
	wc_file_header h;
	if (size < WC_HEADER_BYTES || wc_header_decode(in, size, &h) != WC_OK)
		return NULL;
	const uint8_t *meta = in + h.meta_off;
	size_t mlen = (size_t)h.meta_len, cap = mlen, n = (size_t)h.meta_off;
	int plain = mlen < 4 || memcmp(meta, "\x28\xb5\x2f\xfd", 4) != 0;
	if (plain)
		cap = ZSTD_compressBound(mlen);
	uint8_t *f = malloc(n + cap);
	if (!f)
		fail("out of memory");
	memcpy(f, in, n);
	if (plain) {
		size_t z = ZSTD_compress(f + n, cap, meta, mlen, 1);
		if (ZSTD_isError(z))
			fail("zstd");
		mlen = z;
	} else {
		memcpy(f + n, meta, mlen);
	}
	h.meta_len = mlen;
	h.file_size = n + mlen;
	/* chash of every payload the index places inside the file. */
	for (uint32_t i = 0; i < h.ntiles && (uint64_t)(i + 1) * WC_INDEX_ENTRY_BYTES <= h.index_len; i++) {
		uint8_t *e = f + h.index_off + (size_t)i * WC_INDEX_ENTRY_BYTES;
		wc_tile_info t;
		wc_index_entry_decode(e, &t);
		if (t.coff <= h.file_size && t.csize <= h.file_size - t.coff) {
			t.chash = wc_xxh3_64(f + t.coff, t.csize);
			wc_index_entry_encode(&t, e);
		}
	}
	wc_header_encode(&h, f);
	tu_wcodec_fix_check(f, &h);
	*out_size = (size_t)h.file_size;
	return f;
}

/* The promises of container.h about an opened container. */
static void check_tables(const wc_container *c)
{
	uint64_t vsize = wc_container_virtual_size(c);
	size_t plen = 0;
	wc_container_prefix(c, &plen);
	uint32_t nt = wc_container_ntensors(c), ntiles = wc_container_ntiles(c);
	uint32_t tsize = wc_container_tile_size(c);
	for (uint32_t i = 0; i < nt; i++) {
		const wc_tensor_info *ti = wc_container_tensor(c, i);
		if (ti->begin < plen || ti->begin > ti->end || ti->end > vsize)
			fail("tensor outside the virtual file");
		if (ti->first_tile > ntiles || ti->ntiles > ntiles - ti->first_tile)
			fail("tensor's tiles outside the index");
		if (ti->shared) { /* in the one tile of the tensors before it */
			const wc_tile_info *t = wc_container_tile(c, ti->first_tile);
			if (ti->ntiles != 1 || t->voff > ti->begin || ti->end > t->voff + t->dsize)
				fail("shared tensor outside its tile");
			continue;
		}
		uint64_t at = ti->begin;
		for (uint32_t k = ti->first_tile; k < ti->first_tile + ti->ntiles; k++) {
			const wc_tile_info *t = wc_container_tile(c, k);
			if (t->tensor != i || t->voff != at || t->dsize > tsize || t->dsize % ti->layout.elem_size)
				fail("tile not where its tensor says");
			at += t->dsize;
		}
		/* the head of a shared tile: its one tile runs on over the next tensors */
		const int head = ti->ntiles == 1 && i + 1 < nt && wc_container_tensor(c, i + 1)->shared;
		if (head ? at <= ti->end : at != ti->end)
			fail("tiles do not cover their tensor");
		uint32_t found;
		if (wc_container_find_tensor(c, ti->name, &found) != WC_OK ||
		    strcmp(wc_container_tensor(c, found)->name, ti->name))
			fail("tensor not found by its name");
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > FUZZ_MAX_INPUT)
		return 0;
	size_t fsize = size;
	uint8_t *img = rebuild(data, size, &fsize);
	char path[64];
	int fd = fuzz_memfd(img ? img : data, fsize, path);
	free(img);
	wc_container *c = NULL;
	wc_err oe = wc_container_open(path, &c);
	if (getenv("FUZZ_VERBOSE"))
		fprintf(stderr, "fuzz_wcodec: open: %s\n", oe ? wc_last_detail() : "ok");
	/* Without names the checks are a subset: whatever opens with them
	 * opens without, with the same tiles. */
	wc_container *bare = NULL;
	if (wc_container_open_tiles(path, &bare) != WC_OK && oe == WC_OK)
		fail("opens with names but not without");
	if (bare && oe == WC_OK && wc_container_ntiles(bare) != wc_container_ntiles(c))
		fail("the tiles differ without names");
	wc_container_release(bare);
	if (oe == WC_OK) {
		check_tables(c);
		uint32_t ntiles = wc_container_ntiles(c), tsize = wc_container_tile_size(c);
		uint64_t vsize = wc_container_virtual_size(c);
		size_t plen = 0;
		const uint8_t *prefix = wc_container_prefix(c, &plen);
		uint8_t *payload = malloc(fsize + 1), *out = malloc(tsize + 1);
		uint8_t *whole = vsize <= (64u << 20) ? malloc(vsize + 1) : NULL;
		if (!payload || !out)
			fail("out of memory");
		if (whole) {
			memset(whole, 0, vsize + 1);
			memcpy(whole, prefix, plen);
		}
		int all_ok = 1;
		for (uint32_t i = 0; i < ntiles; i++) {
			const wc_tile_info *t = wc_container_tile(c, i);
			wc_err e = t->csize <= fsize ? wc_container_read_payload(c, i, payload) : WC_E_IO;
			if (e == WC_OK)
				e = wc_container_decode_tile(c, i, payload, out);
			if (e != WC_OK && e != WC_E_CORRUPT && e != WC_E_IO)
				fail("a tile failed with an unexpected error");
			if (e != WC_OK)
				all_ok = 0;
			else if (whole)
				memcpy(whole + t->voff, out, t->dsize);
		}
		if (whole) {
			uint8_t *got = malloc(vsize + 1);
			if (!got)
				fail("out of memory");
			wc_err e = wc_container_pread(c, got, (size_t)vsize, 0);
			if ((e == WC_OK) != all_ok)
				fail("pread and the tile decodes disagree");
			if (e == WC_OK && memcmp(got, whole, (size_t)vsize))
				fail("pread gave other bytes than the tiles");
			free(got);
		}
		free(whole);
		free(payload);
		free(out);
		wc_container_release(c);
	}
	close(fd);
	return 0;
}
