/*
 * format.h - the on-disk pieces of a .wcodec file (docs/FORMAT.md section 1):
 * the fixed header, the sparse frequency-table section and the binary tile
 * index, with their little-endian encoders and validating decoders. Shared
 * by the reader (reader.c) and the writer (writer.c). Internal to the library.
 */
#ifndef WC_CONTAINER_FORMAT_H
#define WC_CONTAINER_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "codec/rans.h"
#include "container/container.h"
#include "core/le.h"
#include "core/wc_error.h"

#define WC_HEADER_BYTES 160u     /* fixed header, version 1 */
#define WC_HEADER_HASH_OFF 152u  /* u64 XXH3-64 check at the end of the header */
#define WC_INDEX_ENTRY_BYTES 48u /* one wc_tile_info */
#define WC_TABLE_BITMAP_BYTES 32u

/* Limits a reader enforces (docs/FORMAT.md section 5). */
#define WC_LIMIT_TENSORS (1u << 20)
#define WC_LIMIT_TILES (1u << 24)
#define WC_LIMIT_TABLES (1u << 23)
#define WC_LIMIT_META_BYTES (256u << 20)      /* the zstd frame */
#define WC_LIMIT_META_JSON_BYTES (512u << 20) /* the JSON inside it (versions 1 and 2) */
#define WC_LIMIT_PREFIX_BYTES (8u + (100u << 20))
#define WC_LIMIT_NAME_BYTES 4096u
#define WC_LIMIT_DTYPE_BYTES 32u
#define WC_LIMIT_NDIM 64u
#define WC_LIMIT_VIRTUAL_SIZE (1ull << 62)
#define WC_LIMIT_DICT_BYTES (1ull << 30)      /* the dictionary section */
/* The shortest member a tensor can be in a safetensors header,
 * `"":{"dtype":"U8","shape":[],"data_offsets":[0,0]}`, is 49 bytes; with
 * its separator, at least 40 is a bound with room. */
#define WC_PREFIX_BYTES_PER_TENSOR 40u

/* Header flags (docs/FORMAT.md 1.2). A reader that does not know a flag
 * rejects the file (WC_E_UNSUPPORTED), so a file using dictionaries is
 * refused cleanly by version-1 readers that predate them. */
#define WC_FLAG_DICTS 1u /* a dictionary section exists (some tensor has layout "dict") */
#define WC_KNOWN_FLAGS WC_FLAG_DICTS

/* The version-3 tensor table (docs/FORMAT.md 1.3.1): per tensor a 12-byte
 * head (layout code, flags, the dict values' layout code, reserved, u64
 * byte count), with layout "dict" 4 bytes of entry count and 4 per plain
 * plane, then 16 bytes per coded plane. */
#define WC_TT_HEAD_BYTES 12u
#define WC_TT_PLANE_BYTES 16u
#define WC_TT_LAYOUT_DICT 6u
#define WC_TT_LAYOUT_INT8 7u /* lossy: int8 codes, a scale per channel (docs/FORMAT.md 2.2) */
#define WC_TT_LAYOUT_INT4 8u /* lossy: int4 codes, a scale per group of a channel */
#define WC_LOSSY_GROUP_MAX 32768u
#define WC_TT_INT8_BYTES 24u /* its fields after the head */
#define WC_TT_SHARED 1u     /* flags bit 0 */
#define WC_TT_NO_TABLE 0xffffffffu
/* The most bytes a record takes: 8 coded planes (a dict record is smaller). */
#define WC_TT_RECORD_MAX (WC_TT_HEAD_BYTES + 8u * WC_TT_PLANE_BYTES)

/* A layout's code in the tensor table: 0 bytes, 1 shuffle2, 2 shuffle4,
 * 3 shuffle8, 4 bf16, 5 f32, WC_TT_LAYOUT_DICT for a dict layout. */
uint8_t wc_tt_layout_code(wc_layout l);
/* The layout of a code below WC_TT_LAYOUT_DICT; -1 for any other code. */
int wc_tt_layout_of(uint8_t code, wc_layout *out);

/* The fixed header, decoded. Section order in the file is fixed:
 * header, prefix, payloads, tables, dictionaries (only with WC_FLAG_DICTS),
 * index, metadata (a zstd frame: the tensor table), contiguous. */
typedef struct wc_file_header {
	uint32_t version, flags, header_size;
	uint32_t tile_size, chunk_symbols;
	uint32_t ntensors, ntiles, ntables;
	uint64_t virtual_size;
	uint64_t prefix_off, prefix_len;
	uint64_t payload_off, payload_len;
	uint64_t tables_off, tables_len;
	uint64_t dicts_off, dicts_len; /* 0, 0 without WC_FLAG_DICTS */
	uint64_t index_off, index_len;
	uint64_t meta_off, meta_len;
	uint64_t file_size;
	uint64_t check; /* XXH3-64 of header[0..152) | prefix | tables | dicts | index | metadata */
} wc_file_header;

/* Encode h into WC_HEADER_BYTES bytes (magic included; h->check as given). */
void wc_header_encode(const wc_file_header *h, uint8_t out[WC_HEADER_BYTES]);

/* Decode and validate the fixed header of a file of file_size bytes: magic,
 * version, flags, limits, section layout, file size. Does not check the hash.
 * Errors: WC_E_FORMAT, WC_E_UNSUPPORTED (version/flags), WC_E_RANGE (limits). */
wc_err wc_header_decode(const uint8_t in[WC_HEADER_BYTES], uint64_t file_size, wc_file_header *h);

/* Bytes of the sparse encoding of table t: 32-byte bitmap + 2 per present symbol. */
size_t wc_table_encoded_size(const wc_freqtab *t);
/* Encode t at out (wc_table_encoded_size(t) bytes); returns the bytes written. */
size_t wc_table_encode(const wc_freqtab *t, uint8_t *out);
/* Decode exactly n tables from len bytes, validating each (wc_freq_validate).
 * Errors: WC_E_FORMAT with the table number. */
wc_err wc_tables_decode(const uint8_t *in, size_t len, uint32_t n, wc_freqtab *out);

void wc_index_entry_encode(const wc_tile_info *t, uint8_t out[WC_INDEX_ENTRY_BYTES]);
void wc_index_entry_decode(const uint8_t in[WC_INDEX_ENTRY_BYTES], wc_tile_info *t);

#endif /* WC_CONTAINER_FORMAT_H */
