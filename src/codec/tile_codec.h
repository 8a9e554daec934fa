/*
 * tile_codec.h - encoding and decoding one tile payload.
 *
 * A tile is a run of whole elements of one tensor (at most the file's tile
 * size in bytes). Its payload is self-describing given the tensor's layout
 * and the file's frequency tables; docs/FORMAT.md "Tile payload" is the
 * normative layout:
 *
 *   u8 nplanes, u8 reserved[3]
 *   nplanes x plane descriptor (12 bytes):
 *       u8 mode (WC_PLANE_RAW/CONST/RANS/ZSTD/PACK), u8 value (CONST
 *       byte, PACK bits per symbol),
 *       u16 reserved, u32 table (frequency table index, RANS only, else
 *       0xFFFFFFFF), u32 size (body bytes)
 *   bodies in plane order, each starting 4-byte aligned (zero padding)
 *
 * Each plane is coded by whichever mode is smallest (RAW or PACK unless an
 * entropy coder saves over 1/128); plane decoders are chosen through a table of functions
 * indexed by mode.
 */
#ifndef WC_TILE_CODEC_H
#define WC_TILE_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "codec/planes.h"
#include "codec/rans.h"
#include "core/wc_error.h"

#ifdef __cplusplus
extern "C" {
#endif

enum wc_plane_mode {
	WC_PLANE_RAW = 0,   /* body = the plane's bytes */
	WC_PLANE_CONST = 1, /* body empty; every byte equals `value` */
	WC_PLANE_RANS = 2,  /* body = rANS chunks (rans.h) with table `table` */
	WC_PLANE_ZSTD = 3,  /* body = one zstd frame of the plane (RFC 8878) */
	WC_PLANE_PACK = 4,  /* body = the symbols in `value` bits each (1, 2 or 4),
			     * 8 / value to a byte, lowest bits first */
	WC_PLANE_MODES
};

#define WC_TILE_HEADER_BYTES(nplanes) (4u + 12u * (nplanes))
#define WC_NO_TABLE 0xFFFFFFFFu

/* Per-plane encoding choices made by the container writer. */
typedef struct wc_plane_plan {
	const wc_freqtab *table; /* tensor-plane table, or NULL: never rANS */
	uint32_t table_id;       /* its index in the file's table array */
	int allow_zstd;          /* try zstd too (integer and byte layouts) */
} wc_plane_plan;

/* Upper bound of an encoded payload for nbytes of input. */
size_t wc_tile_encode_bound(wc_layout l, size_t nbytes, uint32_t chunk_symbols);

/* Encode nbytes (a multiple of l.elem_size) into a payload, choosing per
 * plane the smallest of CONST, PACK (every symbol below 16), RANS (if
 * plan[p].table), ZSTD (if allowed) and RAW, except that RANS or ZSTD must
 * be smaller than RAW or PACK by more than 1/128 of that size (near-random
 * planes stay RAW or PACK, which decode at memory speed).
 * plan has l.nplanes entries. Errors: WC_E_INVAL (bad size, symbol
 * missing from a table), WC_E_RANGE (cap too small), WC_E_NOMEM.
 * Optionally reports the bytes of each plane's body in plane_bytes. */
wc_err wc_tile_encode(wc_layout l, const uint8_t *data, size_t nbytes,
		      const wc_plane_plan *plan, uint32_t chunk_symbols,
		      uint8_t *out, size_t cap, size_t *out_len, uint64_t *plane_bytes);

/* wc_tile_encode for a WC_LAYOUT_DICT tensor (docs/FORMAT.md 2.1): each
 * element of data becomes its index in dict (`entries` values of
 * l.elem_size bytes, strictly ascending; l = wc_layout_dict(elem_size,
 * entries)), and the l.nplanes index planes are coded as wc_tile_encode
 * codes byte planes. Errors as wc_tile_encode; WC_E_INVAL also when an
 * element is not in dict. (wc_tile_encode refuses DICT layouts.) */
wc_err wc_tile_encode_dict(wc_layout l, const uint8_t *data, size_t nbytes, const uint8_t *dict,
			   uint32_t entries, const wc_plane_plan *plan, uint32_t chunk_symbols,
			   uint8_t *out, size_t cap, size_t *out_len, uint64_t *plane_bytes);

/* Decode a payload of payload_len bytes into exactly nbytes at out.
 * tables/ntables: the file's frequency tables (a RANS plane's table index is
 * checked against ntables). Validates every size and offset it reads.
 * Errors: WC_E_CORRUPT with a reason for any inconsistency (out may then
 * hold partial data); WC_E_NOMEM.
 * Thread-safe. Memory is per thread and kept between calls (freed at thread
 * exit): decoding tables for the last tables seen (16 KiB each), 2 KiB of
 * block scratch per plane, and for ZSTD planes n bytes per plane. The rANS
 * decoder uses AVX-512F or AVX2 when the CPU has them (checked at run time),
 * else portable scalar code. */
wc_err wc_tile_decode(wc_layout l, const uint8_t *payload, size_t payload_len,
		      const wc_freqtab *tables, uint32_t ntables, uint32_t chunk_symbols,
		      uint8_t *out, size_t nbytes);

/* wc_tile_decode for any layout: for WC_LAYOUT_DICT, dict holds the tensor's
 * dict_entries values (1..65536, l.elem_size bytes each, as the container
 * validated them) and l.nplanes must be wc_layout_dict()'s; the index planes
 * are decoded block by block and gathered, out[i] = dict[index[i]], while
 * still in L1. An index >= dict_entries is WC_E_CORRUPT. For other layouts
 * dict must be NULL (this is then wc_tile_decode). A DICT layout without a
 * dictionary, or a dictionary with another layout, is WC_E_CORRUPT. */
wc_err wc_tile_decode_dict(wc_layout l, const uint8_t *payload, size_t payload_len,
			   const wc_freqtab *tables, uint32_t ntables, uint32_t chunk_symbols,
			   const uint8_t *dict, uint32_t dict_entries, uint8_t *out, size_t nbytes);

/* wc_tile_decode_dict of one part of a tile, for decoding one tile on several
 * threads at once: the tile's chunks (chunk_symbols symbols of each plane,
 * or 16384 when no plane is rANS-coded) are cut into nparts runs of
 * consecutive chunks, and this decodes run `part` (0 <= part < nparts) into
 * its elements' bytes of out (nbytes, the whole tile's buffer); the parts
 * write disjoint bytes, and all nparts of them together write the tile as
 * wc_tile_decode_dict does. A part past the last chunk writes nothing. A
 * tile with a ZSTD plane decodes whole in part 0 (a zstd frame cannot be
 * entered in the middle); its other parts write nothing. Each part
 * validates the payload's header and every chunk it decodes, so a damaged
 * chunk fails the part holding it (WC_E_CORRUPT). Checks no hash: that is
 * the caller's, once every part is done. Errors as wc_tile_decode_dict;
 * WC_E_INVAL if part >= nparts. */
wc_err wc_tile_decode_part(wc_layout l, const uint8_t *payload, size_t payload_len,
			   const wc_freqtab *tables, uint32_t ntables, uint32_t chunk_symbols,
			   const uint8_t *dict, uint32_t dict_entries, uint8_t *out, size_t nbytes,
			   unsigned part, unsigned nparts);

/* Parsed view of a payload's plane descriptors, for backends that decode the
 * planes themselves (the CUDA plugin). body points into the payload. */
typedef struct wc_plane_view {
	uint8_t mode, value;
	uint32_t table;
	uint32_t size;
	const uint8_t *body;
} wc_plane_view;

/* Parse and validate the header of a payload for a tensor of layout l whose
 * tile decodes to nbytes: nplanes == l.nplanes, modes known, bodies in
 * bounds, RAW sizes == nbytes / elem_size, table < ntables for RANS.
 * Errors: WC_E_CORRUPT. */
wc_err wc_tile_parse(wc_layout l, const uint8_t *payload, size_t payload_len,
		     size_t nbytes, uint32_t ntables, wc_plane_view views[WC_MAX_PLANES]);

#ifdef __cplusplus
}
#endif

#endif /* WC_TILE_CODEC_H */
