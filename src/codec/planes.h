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
 *
 * Elements are little-endian, as safetensors stores them.
 */
#ifndef WC_PLANES_H
#define WC_PLANES_H

#include <stddef.h>
#include <stdint.h>

#define WC_MAX_PLANES 8

typedef enum wc_layout_kind {
	WC_LAYOUT_BYTES = 0,
	WC_LAYOUT_SHUFFLE = 1,
	WC_LAYOUT_BF16 = 2,
	WC_LAYOUT_F32 = 3,
} wc_layout_kind;

typedef struct wc_layout {
	uint8_t kind;      /* wc_layout_kind */
	uint8_t elem_size; /* bytes per element: 1, 2, 4 or 8 */
	uint8_t nplanes;   /* planes per element; each plane has one byte per element */
} wc_layout;

/* Layout for a safetensors dtype name ("BF16", "F32", ...). Unknown names
 * get BYTES (elem_size 1), so every dtype packs losslessly. */
wc_layout wc_layout_for_dtype(const char *dtype);

/* Name of a layout for reports and the JSON metadata: "bytes", "shuffle2",
 * "shuffle4", "shuffle8", "bf16", "f32". */
const char *wc_layout_name(wc_layout l);

/* Parse wc_layout_name()'s output; returns 0 on success, -1 if unknown. */
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

#endif /* WC_PLANES_H */
