/* qvq_gather.h - the vector paths of the 2x2 RGB codebook gather
 * (qvq_decode.c); not part of the public API. */
#ifndef WC_QVQ_GATHER_H
#define WC_QVQ_GATHER_H

#include <stddef.h>
#include <stdint.h>

#include "core/le.h"

/* Index g of a patch row of ib-byte (1 or 2) little-endian indices. */
static inline __attribute__((always_inline)) uint32_t wc_qvq_index_at(const uint8_t *row, uint32_t ib,
								      size_t g)
{
	return ib == 1 ? row[g] : wc_get_u16(row + 2 * g);
}

/* One patch row of a 2x2x3 image, both of its image rows present: patches
 * 0.. of `row` (ib-byte little-endian indices, each < entries, checked by
 * the caller) written as 6 bytes each to image rows r0 and r1, sixteen at a
 * time while all sixteen lie inside the image (below `full`, the number of
 * patches with both columns inside). cb: entries x 12 bytes. Returns how
 * many patches it wrote (a multiple of 16); the caller does the rest. Call
 * only when wc_cpu_features() has WC_CPU_AVX512VBMI (elsewhere it writes
 * none and returns 0). Never reads past cb's last entry nor writes past
 * patch `full` - 1. */
size_t wc_qvq_gather_pairs_avx512(const uint8_t *cb, uint32_t entries, const uint8_t *row, uint32_t ib,
				  size_t full, uint8_t *r0, uint8_t *r1);

/* Tests: 1 keeps the gather scalar on any CPU; 0 (the default) uses the
 * CPU's best path. */
extern int wc_qvq_gather_scalar_only;

#endif /* WC_QVQ_GATHER_H */
