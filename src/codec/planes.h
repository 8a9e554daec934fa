/*
 * planes.h - splitting tensor elements into byte planes, and back.
 *
 * Floating-point bytes compress well only once the exponent bits are gathered
 * into a plane of their own (the approach of ZipNN, Hershcovitch et al.,
 * arXiv:2411.05239, and DFloat11, arXiv:2504.11651). The layouts, fixed by
 * docs/FORMAT.md "Plane layouts":
 *
 *   BF16  (2 planes) p0 = exponent   = (v >> 7) & 0xff
 *                    p1 = sign|mant7 = ((v >> 8) & 0x80) | (v & 0x7f)
 *   F32   (4 planes) p0 = exponent   = (u >> 23) & 0xff
 *                    r  = (u & 0x7fffff) | ((u >> 31) << 23)   (24 bits)
 *                    p1 = r & 0xff, p2 = (r >> 8) & 0xff, p3 = r >> 16
 *   SHUFFLE w (w = 2, 4 or 8 planes): plane k holds byte (w - 1 - k) of each
 *                    little-endian element (most significant byte first).
 *                    F16, I16, U16 -> w=2; I32, U32 -> w=4; F64, I64, U64, C64 -> w=8
 *   BYTES (1 plane)  the bytes as they are: BOOL, U8, I8, F8_*, and any dtype
 *                    the format does not name.
 *   DICT  (1 or 2)   a tensor with K <= 65536 distinct element values stores
 *                    them once, sorted (its dictionary), and each element as
 *                    its index into it: p0 = the index (K <= 256), or
 *                    p0 = index >> 8, p1 = index & 0xff (K <= 65536). Models
 *                    quantized to 8 or 16 bits and stored back as F32/F16/BF16
 *                    hold only that many values per tensor, which byte planes
 *                    cannot see. The planes need the dictionary, so
 *                    wc_planes_split/merge/histogram do not apply to DICT;
 *                    wc_dict_build/wc_dict_index/wc_dict_gather do.
 *
 * Elements are little-endian, as safetensors stores them.
 */
#ifndef WC_PLANES_H
#define WC_PLANES_H

#include <stddef.h>
#include <stdint.h>

#include "core/wc_error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WC_MAX_PLANES 8

typedef enum wc_layout_kind {
	WC_LAYOUT_BYTES = 0,
	WC_LAYOUT_SHUFFLE = 1,
	WC_LAYOUT_BF16 = 2,
	WC_LAYOUT_F32 = 3,
	WC_LAYOUT_DICT = 4, /* elem_size 1, 2, 4 or 8; nplanes 1 (K <= 256) or 2 */
} wc_layout_kind;

#define WC_DICT_MAX_ENTRIES 65536u

typedef struct wc_layout {
	uint8_t kind;      /* wc_layout_kind */
	uint8_t elem_size; /* bytes per element: 1, 2, 4 or 8 */
	uint8_t nplanes;   /* planes per element; each plane has one byte per element */
} wc_layout;

/* Layout for a safetensors dtype name ("BF16", "F32", ...). Unknown names
 * get BYTES (elem_size 1), so every dtype packs losslessly. */
wc_layout wc_layout_for_dtype(const char *dtype);

/* Name of a layout for reports and the JSON metadata: "bytes", "shuffle2",
 * "shuffle4", "shuffle8", "bf16", "f32", "dict" (any DICT layout). */
const char *wc_layout_name(wc_layout l);

/* Parse wc_layout_name()'s output; returns 0 on success, -1 if unknown.
 * "dict" is not parsed here (its planes depend on the dictionary): see
 * wc_layout_dict(). */
int wc_layout_parse(const char *name, wc_layout *out);

/* Split nelem elements (nelem * elem_size bytes at `in`) into l.nplanes
 * planes of nelem bytes each. */
void wc_planes_split(wc_layout l, const uint8_t *in, size_t nelem, uint8_t *const planes[]);

/* Inverse of wc_planes_split: merge planes back into nelem * elem_size bytes. */
void wc_planes_merge(wc_layout l, const uint8_t *const planes[], size_t nelem, uint8_t *out);

/* Add the byte counts of each plane of nelem elements (nelem * elem_size
 * bytes at `in`) to hist[p][0..255], p < l.nplanes, without storing the
 * planes: what the packer needs for wc_freq_normalize() and
 * wc_entropy_bits(). Call repeatedly to accumulate over a tensor. */
void wc_planes_histogram(wc_layout l, const uint8_t *in, size_t nelem, uint64_t hist[][256]);

/* ---- dictionary layout (docs/FORMAT.md 2.1) ------------------------------ */

/* The DICT layout of a tensor of elem_size-byte elements (1, 2, 4 or 8)
 * with `entries` dictionary entries (1..WC_DICT_MAX_ENTRIES): 1 index plane
 * if entries <= 256, else 2. */
wc_layout wc_layout_dict(unsigned elem_size, uint32_t entries);

/* The sorted distinct values of nelem elements of elem_size bytes (1, 2, 4
 * or 8) at `in`, compared as unsigned little-endian integers: writes them,
 * ascending, to dict (room for WC_DICT_MAX_ENTRIES * elem_size bytes) and
 * their number to *entries; if counts is not NULL, counts[k] (room for
 * WC_DICT_MAX_ENTRIES) = how many elements equal entry k, i.e. the histogram
 * of the indices. Stops early and returns WC_E_RANGE ("too many") as soon as
 * more than WC_DICT_MAX_ENTRIES distinct values are seen (cheap for tensors
 * of genuinely continuous values). Errors: WC_E_RANGE, WC_E_INVAL (elem_size,
 * nelem 0), WC_E_NOMEM. Memory: O(65536) (a value-indexed count table for
 * 1- and 2-byte elements, an open-addressing hash table otherwise). */
wc_err wc_dict_build(const uint8_t *in, size_t nelem, unsigned elem_size, uint8_t *dict, uint32_t *entries,
		     uint64_t *counts);

/* Nonzero if dict holds `entries` values of elem_size bytes strictly
 * ascending as unsigned little-endian integers (what a reader checks). */
int wc_dict_sorted(const uint8_t *dict, uint32_t entries, unsigned elem_size);

/* Map each of nelem elements at `in` to its index in dict (entries values,
 * strictly ascending; l = wc_layout_dict(elem_size, entries)) and write the
 * index planes planes[0..l.nplanes) (nelem bytes each). Errors: WC_E_INVAL
 * when an element is not in dict, WC_E_NOMEM. */
wc_err wc_dict_index(wc_layout l, const uint8_t *dict, uint32_t entries, const uint8_t *in, size_t nelem,
		     uint8_t *const planes[]);

/* Inverse of wc_dict_index: out[i] = dict[index of element i] for nelem
 * elements (nelem * l.elem_size bytes at out). Returns 0, or -1 if an index
 * is >= entries (then out is partly written): the caller reports the
 * corrupt tile. */
int wc_dict_gather(wc_layout l, const uint8_t *dict, uint32_t entries, const uint8_t *const planes[],
		   size_t nelem, uint8_t *out);

#ifdef __cplusplus
}
#endif

#endif /* WC_PLANES_H */
