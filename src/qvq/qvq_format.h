/*
 * qvq_format.h - on-disk layout of .qvq image archives and the limits every
 * reader enforces. docs/FORMAT.md section 6 is normative; this header
 * restates it in C. All integers are little-endian.
 *
 * File: fixed header (192 bytes) | tile payloads | JSON metadata | codebook
 *       | frequency tables | image table | tile table | string pool.
 * Section order after the header is informative; a reader uses the offsets.
 */
#ifndef WC_QVQ_FORMAT_H
#define WC_QVQ_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "core/le.h"
#include "core/wc_error.h"

#define WC_QVQ_MAGIC "WCQVQ\r\n\032" /* 8 bytes */
#define WC_QVQ_VERSION 2u     /* the newest version a reader knows */
#define WC_QVQ_VERSION_VQ 1u  /* what writers of codebook archives write */
#define WC_QVQ_MODE_VQ 0u     /* codebook of patches, one index a patch (6.3) */
#define WC_QVQ_MODE_DCT 1u    /* 8x8 DCT of YCbCr 4:2:0, coded coefficients (6.8); version 2 */
#define WC_QVQ_HEADER_BYTES 192u
#define WC_QVQ_IMAGE_RECORD 24u  /* bytes per image table entry */
#define WC_QVQ_TILE_RECORD 48u   /* bytes per tile table entry */
#define WC_QVQ_FREQTAB_BYTES 512u /* u16 freq[256] */
#define WC_QVQ_NO_LABEL 0xFFFFFFFFu

/* Reader limits (docs/FORMAT.md 6.7). */
#define WC_QVQ_MAX_ENTRIES 65536u        /* codebook entries K */
#define WC_QVQ_MAX_PATCH 16u             /* patch_h, patch_w */
#define WC_QVQ_MAX_IMAGES (1u << 24)
#define WC_QVQ_MAX_SIDE 16384u           /* width, height */
#define WC_QVQ_MAX_IMAGE_BYTES (64u << 20) /* width * height * channels */
#define WC_QVQ_MAX_TILE_BYTES (64u << 20)  /* decoded bytes of a tile */
#define WC_QVQ_MAX_META (64u << 20)      /* JSON metadata bytes */
#define WC_QVQ_MAX_STRINGS (1u << 30)    /* string pool bytes */
#define WC_QVQ_MAX_NAME 4096u            /* bytes of one image name */
#define WC_QVQ_MAX_COMPONENT 255u        /* bytes of one of its components, shown (NAME_MAX) */
#define WC_QVQ_MAX_LABELS 65536u
#define WC_QVQ_MAX_TABLES 2u             /* codebook mode */
#define WC_QVQ_MAX_TABLES_DCT 8u         /* transform mode: one a plane */
#define WC_QVQ_MAX_STEP 2047u            /* quantisation step, eighths (qvq_dct.h) */

/* The fixed header, decoded. */
typedef struct wc_qvq_header {
	uint32_t version;
	uint32_t header_size;
	uint8_t mode;           /* WC_QVQ_MODE_*: 0 in version 1 */
	uint16_t step_luma, step_chroma; /* transform mode: eighths, 1..2047; else 0 */
	uint8_t patch_h, patch_w, channels, index_bytes;
	uint32_t entries;       /* codebook entries K */
	uint32_t nimages, ntiles;
	uint32_t chunk_symbols; /* rANS chunk size of the tile payloads */
	uint32_t ntables;       /* frequency tables */
	uint64_t file_size;
	uint64_t meta_off;    uint32_t meta_len;
	uint64_t codebook_off; /* entries * patch_h * patch_w * channels bytes */
	uint64_t tables_off;   /* ntables * 512 bytes */
	uint64_t images_off;   /* nimages * 24 bytes */
	uint64_t tiles_off;    /* ntiles * 48 bytes */
	uint64_t strings_off; uint32_t strings_len;
	uint64_t meta_hash, codebook_hash, tables_hash, images_hash, tiles_hash, strings_hash;
} wc_qvq_header;

/* Serialize h into 192 bytes, computing the header hash. */
void wc_qvq_header_write(const wc_qvq_header *h, uint8_t out[WC_QVQ_HEADER_BYTES]);

/* Parse and check the fixed header: magic, version, header hash, every
 * field within the limits above and every section inside
 * [header_size, file_size) where file_size is the size of the file on disk.
 * Transform mode (version 2, mode 1): patch 8x8, entries 0, index_bytes 0,
 * steps 1..2047, up to 8 tables. Errors: WC_E_FORMAT, WC_E_CORRUPT (header
 * hash), WC_E_UNSUPPORTED (version, mode, patch shape, channels other than
 * 3), WC_E_RANGE. */
wc_err wc_qvq_header_parse(const uint8_t in[WC_QVQ_HEADER_BYTES], uint64_t file_size,
			   wc_qvq_header *h);

#endif /* WC_QVQ_FORMAT_H */
