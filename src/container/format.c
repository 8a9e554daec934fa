/* format.c - encoding and validating the fixed header, table section and tile index. */
#include "container/format.h"

#include <stdio.h>
#include <string.h>

/* Byte offsets of the header fields (docs/FORMAT.md 1.1). */
enum {
	H_MAGIC = 0, H_VERSION = 8, H_FLAGS = 12, H_HEADER_SIZE = 16, H_TILE_SIZE = 20,
	H_CHUNK = 24, H_NTENSORS = 28, H_NTILES = 32, H_NTABLES = 36, H_VSIZE = 40,
	H_PREFIX_OFF = 48, H_PREFIX_LEN = 56, H_PAYLOAD_OFF = 64, H_PAYLOAD_LEN = 72,
	H_TABLES_OFF = 80, H_TABLES_LEN = 88, H_INDEX_OFF = 96, H_INDEX_LEN = 104,
	H_META_OFF = 112, H_META_LEN = 120, H_FILE_SIZE = 128, H_DICTS_OFF = 136, H_DICTS_LEN = 144,
	H_CHECK = WC_HEADER_HASH_OFF,
};

void wc_header_encode(const wc_file_header *h, uint8_t out[WC_HEADER_BYTES])
{
	memset(out, 0, WC_HEADER_BYTES);
	memcpy(out + H_MAGIC, WC_MAGIC, 8);
	wc_put_u32(out + H_VERSION, h->version);
	wc_put_u32(out + H_FLAGS, h->flags);
	wc_put_u32(out + H_HEADER_SIZE, h->header_size);
	wc_put_u32(out + H_TILE_SIZE, h->tile_size);
	wc_put_u32(out + H_CHUNK, h->chunk_symbols);
	wc_put_u32(out + H_NTENSORS, h->ntensors);
	wc_put_u32(out + H_NTILES, h->ntiles);
	wc_put_u32(out + H_NTABLES, h->ntables);
	wc_put_u64(out + H_VSIZE, h->virtual_size);
	wc_put_u64(out + H_PREFIX_OFF, h->prefix_off);
	wc_put_u64(out + H_PREFIX_LEN, h->prefix_len);
	wc_put_u64(out + H_PAYLOAD_OFF, h->payload_off);
	wc_put_u64(out + H_PAYLOAD_LEN, h->payload_len);
	wc_put_u64(out + H_TABLES_OFF, h->tables_off);
	wc_put_u64(out + H_TABLES_LEN, h->tables_len);
	wc_put_u64(out + H_INDEX_OFF, h->index_off);
	wc_put_u64(out + H_INDEX_LEN, h->index_len);
	wc_put_u64(out + H_META_OFF, h->meta_off);
	wc_put_u64(out + H_META_LEN, h->meta_len);
	wc_put_u64(out + H_FILE_SIZE, h->file_size);
	wc_put_u64(out + H_DICTS_OFF, h->dicts_off);
	wc_put_u64(out + H_DICTS_LEN, h->dicts_len);
	wc_put_u64(out + H_CHECK, h->check);
}

#define BAD(...) wc_fail(WC_E_FORMAT, "wcodec header: " __VA_ARGS__)

wc_err wc_header_decode(const uint8_t in[WC_HEADER_BYTES], uint64_t file_size, wc_file_header *h)
{
	if (memcmp(in + H_MAGIC, WC_MAGIC, 8) != 0)
		return BAD("bad magic (not a .wcodec file, or mangled by a text-mode transfer)");
	h->version = wc_get_u32(in + H_VERSION);
	h->flags = wc_get_u32(in + H_FLAGS);
	h->header_size = wc_get_u32(in + H_HEADER_SIZE);
	h->tile_size = wc_get_u32(in + H_TILE_SIZE);
	h->chunk_symbols = wc_get_u32(in + H_CHUNK);
	h->ntensors = wc_get_u32(in + H_NTENSORS);
	h->ntiles = wc_get_u32(in + H_NTILES);
	h->ntables = wc_get_u32(in + H_NTABLES);
	h->virtual_size = wc_get_u64(in + H_VSIZE);
	h->prefix_off = wc_get_u64(in + H_PREFIX_OFF);
	h->prefix_len = wc_get_u64(in + H_PREFIX_LEN);
	h->payload_off = wc_get_u64(in + H_PAYLOAD_OFF);
	h->payload_len = wc_get_u64(in + H_PAYLOAD_LEN);
	h->tables_off = wc_get_u64(in + H_TABLES_OFF);
	h->tables_len = wc_get_u64(in + H_TABLES_LEN);
	h->index_off = wc_get_u64(in + H_INDEX_OFF);
	h->index_len = wc_get_u64(in + H_INDEX_LEN);
	h->meta_off = wc_get_u64(in + H_META_OFF);
	h->meta_len = wc_get_u64(in + H_META_LEN);
	h->file_size = wc_get_u64(in + H_FILE_SIZE);
	h->dicts_off = wc_get_u64(in + H_DICTS_OFF);
	h->dicts_len = wc_get_u64(in + H_DICTS_LEN);
	h->check = wc_get_u64(in + H_CHECK);

	if (h->version > WC_FORMAT_VERSION)
		return wc_fail(WC_E_UNSUPPORTED, "wcodec header: format version %u is newer than this reader (%u)",
			       h->version, WC_FORMAT_VERSION);
	if (h->version < 1)
		return BAD("format version %u is not valid", h->version);
	if (h->flags & ~WC_KNOWN_FLAGS)
		return wc_fail(WC_E_UNSUPPORTED, "wcodec header: unknown flags 0x%x", h->flags & ~WC_KNOWN_FLAGS);
	if (h->header_size != WC_HEADER_BYTES)
		return BAD("header size %u != %u", h->header_size, WC_HEADER_BYTES);
	/* Without WC_FLAG_DICTS, bytes [136, 152) are reserved (0): the
	 * dictionary section is empty. With it, the section is not. */
	if (!(h->flags & WC_FLAG_DICTS) && (h->dicts_off || h->dicts_len))
		return BAD("reserved bytes [136, 152) are not zero");
	if ((h->flags & WC_FLAG_DICTS) && (h->dicts_len == 0 || h->dicts_len > WC_LIMIT_DICT_BYTES))
		return wc_fail(WC_E_RANGE, "wcodec header: dictionary section of %llu bytes outside [1, %llu]",
			       (unsigned long long)h->dicts_len, (unsigned long long)WC_LIMIT_DICT_BYTES);
	if (h->file_size != file_size)
		return BAD("file size is %llu bytes but the header says %llu (truncated or extended file)",
			   (unsigned long long)file_size, (unsigned long long)h->file_size);
	if (h->tile_size < WC_TILE_SIZE_MIN || h->tile_size > WC_TILE_SIZE_MAX || h->tile_size % 8)
		return wc_fail(WC_E_RANGE, "wcodec header: tile size %u outside [%u, %u] or not a multiple of 8",
			       h->tile_size, WC_TILE_SIZE_MIN, WC_TILE_SIZE_MAX);
	if (h->chunk_symbols < WC_RANS_CHUNK_MIN || h->chunk_symbols > WC_RANS_CHUNK_MAX ||
	    h->chunk_symbols % WC_RANS_LANES)
		return wc_fail(WC_E_RANGE, "wcodec header: chunk of %u symbols outside [%u, %u] or not a multiple of 32",
			       h->chunk_symbols, WC_RANS_CHUNK_MIN, WC_RANS_CHUNK_MAX);
	if (h->ntensors > WC_LIMIT_TENSORS)
		return wc_fail(WC_E_RANGE, "wcodec header: %u tensors exceed the limit of %u", h->ntensors,
			       WC_LIMIT_TENSORS);
	if (h->ntiles > WC_LIMIT_TILES)
		return wc_fail(WC_E_RANGE, "wcodec header: %u tiles exceed the limit of %u", h->ntiles, WC_LIMIT_TILES);
	if (h->ntables > WC_LIMIT_TABLES || h->ntables > (uint64_t)h->ntensors * WC_MAX_PLANES)
		return wc_fail(WC_E_RANGE, "wcodec header: %u frequency tables exceed the limit", h->ntables);
	if (h->virtual_size >= WC_LIMIT_VIRTUAL_SIZE)
		return wc_fail(WC_E_RANGE, "wcodec header: virtual size %llu exceeds 2^62",
			       (unsigned long long)h->virtual_size);
	if (h->prefix_len < 10 || h->prefix_len > WC_LIMIT_PREFIX_BYTES)
		return wc_fail(WC_E_RANGE, "wcodec header: prefix of %llu bytes outside [10, %u]",
			       (unsigned long long)h->prefix_len, WC_LIMIT_PREFIX_BYTES);
	/* Every tensor is a member of the prefix's JSON header, at least
	 * WC_PREFIX_BYTES_PER_TENSOR bytes of it: so the tensor count, which
	 * sizes the metadata and the tensor table, is bounded by bytes that are
	 * in the file, not by a number in its header alone. */
	if ((uint64_t)h->ntensors * WC_PREFIX_BYTES_PER_TENSOR > h->prefix_len)
		return wc_fail(WC_E_RANGE, "wcodec header: %u tensors cannot be listed in a %llu-byte safetensors "
			       "header (each takes at least %u bytes)", h->ntensors, (unsigned long long)h->prefix_len,
			       WC_PREFIX_BYTES_PER_TENSOR);
	if (h->meta_len < 2 || h->meta_len > WC_LIMIT_META_BYTES)
		return wc_fail(WC_E_RANGE, "wcodec header: metadata of %llu bytes outside [2, %u]",
			       (unsigned long long)h->meta_len, WC_LIMIT_META_BYTES);
	if (h->index_len != (uint64_t)h->ntiles * WC_INDEX_ENTRY_BYTES)
		return BAD("index of %llu bytes for %u tiles", (unsigned long long)h->index_len, h->ntiles);
	if (h->tables_len < (uint64_t)h->ntables * WC_TABLE_BITMAP_BYTES ||
	    h->tables_len > (uint64_t)h->ntables * (WC_TABLE_BITMAP_BYTES + 512))
		return BAD("table section of %llu bytes for %u tables", (unsigned long long)h->tables_len, h->ntables);
	if (h->prefix_len > h->virtual_size)
		return BAD("prefix of %llu bytes is longer than the virtual file (%llu)",
			   (unsigned long long)h->prefix_len, (unsigned long long)h->virtual_size);
	/* Sections are contiguous in a fixed order; every length is bounded
	 * above, and payload_len by the file size, so no sum below overflows. */
	if (h->payload_len > file_size)
		return BAD("payload section of %llu bytes is larger than the file", (unsigned long long)h->payload_len);
	if (h->prefix_off != WC_HEADER_BYTES)
		return BAD("prefix at offset %llu, expected %u", (unsigned long long)h->prefix_off, WC_HEADER_BYTES);
	if (h->payload_off != h->prefix_off + h->prefix_len)
		return BAD("payload section at %llu, expected %llu", (unsigned long long)h->payload_off,
			   (unsigned long long)(h->prefix_off + h->prefix_len));
	if (h->tables_off != h->payload_off + h->payload_len)
		return BAD("table section at %llu, expected %llu", (unsigned long long)h->tables_off,
			   (unsigned long long)(h->payload_off + h->payload_len));
	uint64_t after_tables = h->tables_off + h->tables_len;
	if ((h->flags & WC_FLAG_DICTS) && h->dicts_off != after_tables)
		return BAD("dictionary section at %llu, expected %llu", (unsigned long long)h->dicts_off,
			   (unsigned long long)after_tables);
	if (h->index_off != after_tables + h->dicts_len)
		return BAD("tile index at %llu, expected %llu", (unsigned long long)h->index_off,
			   (unsigned long long)(after_tables + h->dicts_len));
	if (h->meta_off != h->index_off + h->index_len)
		return BAD("metadata at %llu, expected %llu", (unsigned long long)h->meta_off,
			   (unsigned long long)(h->index_off + h->index_len));
	if (h->meta_off + h->meta_len != file_size)
		return BAD("sections end at %llu but the file has %llu bytes",
			   (unsigned long long)(h->meta_off + h->meta_len), (unsigned long long)file_size);
	return WC_OK;
}

size_t wc_table_encoded_size(const wc_freqtab *t)
{
	size_t n = WC_TABLE_BITMAP_BYTES;
	for (int s = 0; s < 256; s++)
		n += t->freq[s] ? 2 : 0;
	return n;
}

size_t wc_table_encode(const wc_freqtab *t, uint8_t *out)
{
	memset(out, 0, WC_TABLE_BITMAP_BYTES);
	size_t n = WC_TABLE_BITMAP_BYTES;
	for (int s = 0; s < 256; s++) {
		if (!t->freq[s])
			continue;
		out[s >> 3] |= (uint8_t)(1u << (s & 7));
		wc_put_u16(out + n, t->freq[s]);
		n += 2;
	}
	return n;
}

wc_err wc_tables_decode(const uint8_t *in, size_t len, uint32_t n, wc_freqtab *out)
{
	size_t pos = 0;
	for (uint32_t k = 0; k < n; k++) {
		if (len - pos < WC_TABLE_BITMAP_BYTES)
			return wc_fail(WC_E_FORMAT, "frequency table %u: section ends inside its bitmap", k);
		const uint8_t *bitmap = in + pos;
		pos += WC_TABLE_BITMAP_BYTES;
		memset(out[k].freq, 0, sizeof out[k].freq);
		for (int s = 0; s < 256; s++) {
			if (!(bitmap[s >> 3] & (1u << (s & 7))))
				continue;
			if (len - pos < 2)
				return wc_fail(WC_E_FORMAT, "frequency table %u: section ends inside its frequencies", k);
			uint16_t f = wc_get_u16(in + pos);
			pos += 2;
			if (f == 0)
				return wc_fail(WC_E_FORMAT, "frequency table %u: symbol %d marked present with frequency 0",
					       k, s);
			out[k].freq[s] = f;
		}
		wc_err e = wc_freq_validate(&out[k]);
		if (e) {
			char why[256];
			snprintf(why, sizeof why, "%s", wc_last_detail());
			return wc_fail(e, "frequency table %u: %s", k, why);
		}
	}
	if (pos != len)
		return wc_fail(WC_E_FORMAT, "frequency table section has %zu bytes after the last table", len - pos);
	return WC_OK;
}

void wc_index_entry_encode(const wc_tile_info *t, uint8_t out[WC_INDEX_ENTRY_BYTES])
{
	wc_put_u64(out + 0, t->voff);
	wc_put_u64(out + 8, t->coff);
	wc_put_u32(out + 16, t->csize);
	wc_put_u32(out + 20, t->dsize);
	wc_put_u32(out + 24, t->tensor);
	wc_put_u32(out + 28, t->flags);
	wc_put_u64(out + 32, t->chash);
	wc_put_u64(out + 40, t->dhash);
}

void wc_index_entry_decode(const uint8_t in[WC_INDEX_ENTRY_BYTES], wc_tile_info *t)
{
	t->voff = wc_get_u64(in + 0);
	t->coff = wc_get_u64(in + 8);
	t->csize = wc_get_u32(in + 16);
	t->dsize = wc_get_u32(in + 20);
	t->tensor = wc_get_u32(in + 24);
	t->flags = wc_get_u32(in + 28);
	t->chash = wc_get_u64(in + 32);
	t->dhash = wc_get_u64(in + 40);
}

/* The tensor table's layout codes (docs/FORMAT.md 1.3.1), in code order. */
static const char *const tt_layouts[WC_TT_LAYOUT_DICT] = {"bytes", "shuffle2", "shuffle4", "shuffle8", "bf16", "f32"};

uint8_t wc_tt_layout_code(wc_layout l)
{
	const char *name = wc_layout_name(l);
	for (uint8_t k = 0; k < WC_TT_LAYOUT_DICT; k++)
		if (strcmp(name, tt_layouts[k]) == 0)
			return k;
	return WC_TT_LAYOUT_DICT;
}

int wc_tt_layout_of(uint8_t code, wc_layout *out)
{
	return code < WC_TT_LAYOUT_DICT ? wc_layout_parse(tt_layouts[code], out) : -1;
}
