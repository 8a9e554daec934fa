/* qvq_format.c - the fixed header of .qvq archives (docs/FORMAT.md 6.1). */
#include "qvq/qvq_format.h"

#include <stdio.h>
#include <string.h>

#include "codec/rans.h"
#include "core/hash.h"

/* Field offsets in the 192-byte header. */
enum {
	O_MAGIC = 0, O_VERSION = 8, O_HSIZE = 12, O_PATCH_H = 16, O_PATCH_W = 17,
	O_CHANNELS = 18, O_INDEX_BYTES = 19, O_ENTRIES = 20, O_NIMAGES = 24,
	O_NTILES = 28, O_CHUNK = 32, O_NTABLES = 36, O_FILE_SIZE = 40,
	O_META_OFF = 48, O_META_LEN = 56, O_STRINGS_LEN = 60, O_CODEBOOK_OFF = 64,
	O_TABLES_OFF = 72, O_IMAGES_OFF = 80, O_TILES_OFF = 88, O_STRINGS_OFF = 96,
	O_META_HASH = 104, O_CODEBOOK_HASH = 112, O_TABLES_HASH = 120,
	O_IMAGES_HASH = 128, O_TILES_HASH = 136, O_STRINGS_HASH = 144,
	O_MODE = 152, O_STEP_LUMA = 154, O_STEP_CHROMA = 156, O_RESERVED = 158,
	O_HEADER_HASH = 184
};

void wc_qvq_header_write(const wc_qvq_header *h, uint8_t out[WC_QVQ_HEADER_BYTES])
{
	memset(out, 0, WC_QVQ_HEADER_BYTES);
	memcpy(out + O_MAGIC, WC_QVQ_MAGIC, 8);
	wc_put_u32(out + O_VERSION, h->version);
	wc_put_u32(out + O_HSIZE, h->header_size);
	out[O_PATCH_H] = h->patch_h;
	out[O_PATCH_W] = h->patch_w;
	out[O_CHANNELS] = h->channels;
	out[O_INDEX_BYTES] = h->index_bytes;
	wc_put_u32(out + O_ENTRIES, h->entries);
	wc_put_u32(out + O_NIMAGES, h->nimages);
	wc_put_u32(out + O_NTILES, h->ntiles);
	wc_put_u32(out + O_CHUNK, h->chunk_symbols);
	wc_put_u32(out + O_NTABLES, h->ntables);
	wc_put_u64(out + O_FILE_SIZE, h->file_size);
	wc_put_u64(out + O_META_OFF, h->meta_off);
	wc_put_u32(out + O_META_LEN, h->meta_len);
	wc_put_u32(out + O_STRINGS_LEN, h->strings_len);
	wc_put_u64(out + O_CODEBOOK_OFF, h->codebook_off);
	wc_put_u64(out + O_TABLES_OFF, h->tables_off);
	wc_put_u64(out + O_IMAGES_OFF, h->images_off);
	wc_put_u64(out + O_TILES_OFF, h->tiles_off);
	wc_put_u64(out + O_STRINGS_OFF, h->strings_off);
	wc_put_u64(out + O_META_HASH, h->meta_hash);
	wc_put_u64(out + O_CODEBOOK_HASH, h->codebook_hash);
	wc_put_u64(out + O_TABLES_HASH, h->tables_hash);
	wc_put_u64(out + O_IMAGES_HASH, h->images_hash);
	wc_put_u64(out + O_TILES_HASH, h->tiles_hash);
	wc_put_u64(out + O_STRINGS_HASH, h->strings_hash);
	out[O_MODE] = h->mode;
	wc_put_u16(out + O_STEP_LUMA, h->step_luma);
	wc_put_u16(out + O_STEP_CHROMA, h->step_chroma);
	wc_put_u64(out + O_HEADER_HASH, wc_xxh3_64(out, O_HEADER_HASH));
}

/* Check that section [off, off + len) lies inside [header_size, file_size). */
static wc_err check_section(const char *what, uint64_t off, uint64_t len, uint64_t hsize,
			    uint64_t file_size)
{
	if (off < hsize || off > file_size || len > file_size - off)
		return wc_fail(WC_E_FORMAT,
			       "qvq: %s section [%llu, +%llu) outside the file (%llu bytes)", what,
			       (unsigned long long)off, (unsigned long long)len,
			       (unsigned long long)file_size);
	return WC_OK;
}

wc_err wc_qvq_header_parse(const uint8_t in[WC_QVQ_HEADER_BYTES], uint64_t file_size,
			   wc_qvq_header *h)
{
	if (memcmp(in, WC_QVQ_MAGIC, 8) != 0)
		return wc_fail(WC_E_FORMAT, "qvq: bad magic (not a .qvq archive)");
	memset(h, 0, sizeof *h);
	h->version = wc_get_u32(in + O_VERSION);
	if (h->version < 1 || h->version > WC_QVQ_VERSION)
		return wc_fail(WC_E_UNSUPPORTED, "qvq: format version %u (this reader knows 1..%u)",
			       h->version, WC_QVQ_VERSION);
	if (wc_xxh3_64(in, O_HEADER_HASH) != wc_get_u64(in + O_HEADER_HASH))
		return wc_fail(WC_E_CORRUPT, "qvq: header checksum mismatch");
	h->header_size = wc_get_u32(in + O_HSIZE);
	if (h->header_size != WC_QVQ_HEADER_BYTES)
		return wc_fail(WC_E_FORMAT, "qvq: header_size %u, expected %u", h->header_size,
			       WC_QVQ_HEADER_BYTES);
	/* Version 1 has no mode: its bytes from O_MODE on are reserved. */
	for (unsigned i = h->version == 1 ? O_MODE : O_RESERVED; i < O_HEADER_HASH; i++)
		if (in[i] != 0 && i != O_MODE + 1)
			return wc_fail(WC_E_FORMAT, "qvq: reserved header byte %u is not 0", i);
	if (in[O_MODE + 1] != 0)
		return wc_fail(WC_E_FORMAT, "qvq: reserved header byte %u is not 0", O_MODE + 1);
	h->mode = in[O_MODE];
	h->step_luma = wc_get_u16(in + O_STEP_LUMA);
	h->step_chroma = wc_get_u16(in + O_STEP_CHROMA);
	h->patch_h = in[O_PATCH_H];
	h->patch_w = in[O_PATCH_W];
	h->channels = in[O_CHANNELS];
	h->index_bytes = in[O_INDEX_BYTES];
	h->entries = wc_get_u32(in + O_ENTRIES);
	h->nimages = wc_get_u32(in + O_NIMAGES);
	h->ntiles = wc_get_u32(in + O_NTILES);
	h->chunk_symbols = wc_get_u32(in + O_CHUNK);
	h->ntables = wc_get_u32(in + O_NTABLES);
	h->file_size = wc_get_u64(in + O_FILE_SIZE);
	h->meta_off = wc_get_u64(in + O_META_OFF);
	h->meta_len = wc_get_u32(in + O_META_LEN);
	h->strings_len = wc_get_u32(in + O_STRINGS_LEN);
	h->codebook_off = wc_get_u64(in + O_CODEBOOK_OFF);
	h->tables_off = wc_get_u64(in + O_TABLES_OFF);
	h->images_off = wc_get_u64(in + O_IMAGES_OFF);
	h->tiles_off = wc_get_u64(in + O_TILES_OFF);
	h->strings_off = wc_get_u64(in + O_STRINGS_OFF);
	h->meta_hash = wc_get_u64(in + O_META_HASH);
	h->codebook_hash = wc_get_u64(in + O_CODEBOOK_HASH);
	h->tables_hash = wc_get_u64(in + O_TABLES_HASH);
	h->images_hash = wc_get_u64(in + O_IMAGES_HASH);
	h->tiles_hash = wc_get_u64(in + O_TILES_HASH);
	h->strings_hash = wc_get_u64(in + O_STRINGS_HASH);

	if (h->file_size != file_size)
		return wc_fail(WC_E_FORMAT, "qvq: header says %llu bytes, file has %llu (truncated?)",
			       (unsigned long long)h->file_size, (unsigned long long)file_size);
	if (h->channels != 3)
		return wc_fail(WC_E_UNSUPPORTED, "qvq: %u channels (only RGB, 3, is supported)",
			       h->channels);
	if (h->mode > WC_QVQ_MODE_DCT)
		return wc_fail(WC_E_UNSUPPORTED, "qvq: mode %u (this reader knows 0, codebook, and 1, "
			       "transform)", h->mode);
	if (h->mode == WC_QVQ_MODE_DCT) {
		if (h->patch_h != 8 || h->patch_w != 8 || h->entries != 0 || h->index_bytes != 0)
			return wc_fail(WC_E_FORMAT, "qvq: transform mode with patch %ux%u, %u entries, "
				       "%u-byte indices (8x8, 0, 0)", h->patch_h, h->patch_w, h->entries,
				       h->index_bytes);
		if (h->step_luma < 1 || h->step_luma > WC_QVQ_MAX_STEP || h->step_chroma < 1 ||
		    h->step_chroma > WC_QVQ_MAX_STEP)
			return wc_fail(WC_E_FORMAT, "qvq: quantisation steps %u, %u (1..%u eighths)",
				       h->step_luma, h->step_chroma, WC_QVQ_MAX_STEP);
	} else {
		if (h->step_luma || h->step_chroma)
			return wc_fail(WC_E_FORMAT, "qvq: codebook mode with quantisation steps");
		if (h->patch_h < 1 || h->patch_h > WC_QVQ_MAX_PATCH || h->patch_w < 1 ||
		    h->patch_w > WC_QVQ_MAX_PATCH)
			return wc_fail(WC_E_UNSUPPORTED, "qvq: patch %ux%u outside 1..%u", h->patch_h,
				       h->patch_w, WC_QVQ_MAX_PATCH);
		if (h->entries < 1 || h->entries > WC_QVQ_MAX_ENTRIES)
			return wc_fail(WC_E_RANGE, "qvq: %u codebook entries (limit 1..%u)", h->entries,
				       WC_QVQ_MAX_ENTRIES);
		if (h->index_bytes != (h->entries <= 256 ? 1 : 2))
			return wc_fail(WC_E_FORMAT, "qvq: index_bytes %u does not match %u entries",
				       h->index_bytes, h->entries);
	}
	if (h->nimages < 1 || h->nimages > WC_QVQ_MAX_IMAGES)
		return wc_fail(WC_E_RANGE, "qvq: %u images (limit 1..%u)", h->nimages,
			       WC_QVQ_MAX_IMAGES);
	if (h->ntiles < 1 || h->ntiles > h->nimages)
		return wc_fail(WC_E_FORMAT, "qvq: %u tiles for %u images", h->ntiles, h->nimages);
	if (h->chunk_symbols < WC_RANS_CHUNK_MIN || h->chunk_symbols > WC_RANS_CHUNK_MAX ||
	    h->chunk_symbols % 32 != 0)
		return wc_fail(WC_E_FORMAT, "qvq: chunk_symbols %u not a multiple of 32 in [%u, %u]",
			       h->chunk_symbols, WC_RANS_CHUNK_MIN, WC_RANS_CHUNK_MAX);
	const uint32_t max_tables = h->mode == WC_QVQ_MODE_DCT ? WC_QVQ_MAX_TABLES_DCT : WC_QVQ_MAX_TABLES;
	if (h->ntables > max_tables)
		return wc_fail(WC_E_RANGE, "qvq: %u frequency tables (limit %u)", h->ntables, max_tables);
	if (h->meta_len > WC_QVQ_MAX_META)
		return wc_fail(WC_E_RANGE, "qvq: metadata of %u bytes (limit %u)", h->meta_len,
			       WC_QVQ_MAX_META);
	if (h->strings_len > WC_QVQ_MAX_STRINGS)
		return wc_fail(WC_E_RANGE, "qvq: string pool of %u bytes (limit %u)",
			       h->strings_len, WC_QVQ_MAX_STRINGS);
	uint64_t hs = h->header_size;
	uint64_t cb = (uint64_t)h->entries * h->patch_h * h->patch_w * h->channels;
	wc_err e;
	if ((e = check_section("metadata", h->meta_off, h->meta_len, hs, file_size)) ||
	    (e = check_section("codebook", h->codebook_off, cb, hs, file_size)) ||
	    (e = check_section("frequency tables", h->tables_off,
			       (uint64_t)h->ntables * WC_QVQ_FREQTAB_BYTES, hs, file_size)) ||
	    (e = check_section("image table", h->images_off,
			       (uint64_t)h->nimages * WC_QVQ_IMAGE_RECORD, hs, file_size)) ||
	    (e = check_section("tile table", h->tiles_off,
			       (uint64_t)h->ntiles * WC_QVQ_TILE_RECORD, hs, file_size)) ||
	    (e = check_section("string pool", h->strings_off, h->strings_len, hs, file_size)))
		return e;
	return WC_OK;
}

