/*
 * le.h - little-endian loads and stores of the on-disk formats (.wcodec and
 * .qvq store every integer little-endian, docs/FORMAT.md). Byte by byte, so
 * they are correct on any host and at any alignment; compilers turn them
 * into single moves on little-endian machines.
 */
#ifndef WC_LE_H
#define WC_LE_H

#include <stdint.h>

static inline void wc_put_u16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline void wc_put_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}
static inline void wc_put_u64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t wc_get_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t wc_get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t wc_get_u64(const uint8_t *p)
{
	return (uint64_t)wc_get_u32(p) | (uint64_t)wc_get_u32(p + 4) << 32;
}

#endif /* WC_LE_H */
