/*
 * tile_source.h - what the tile cache decodes from: any file cut into tiles
 * (a .wcodec container, a .qvq image archive). The cache knows nothing else
 * about file formats.
 */
#ifndef WC_TILE_SOURCE_H
#define WC_TILE_SOURCE_H

#include <stdint.h>

#include "core/wc_error.h"
#include "engine/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct wc_tile_source wc_tile_source;

typedef struct wc_tile_source_ops {
	/* Number of tiles and decoded bytes of tile i. */
	uint32_t (*ntiles)(const wc_tile_source *src);
	uint32_t (*tile_dsize)(const wc_tile_source *src, uint32_t tile);
	/* Payload bytes of tile i, then read them into buf and check their hash.
	 * Errors: WC_E_IO, WC_E_CORRUPT (with a reason). */
	uint32_t (*tile_csize)(const wc_tile_source *src, uint32_t tile);
	wc_err (*read_payload)(const wc_tile_source *src, uint32_t tile, uint8_t *buf);
	/* Fill every field of *job except payload/payload_size/out/out_size/status,
	 * which the cache sets. */
	void (*describe_job)(const wc_tile_source *src, uint32_t tile, wc_tile_job *job);
	/* Reference counting of the object behind the source (the cache holds a
	 * reference while a decode of it is queued). */
	void (*retain)(wc_tile_source *src);
	void (*release)(wc_tile_source *src);
	/* Optional: tile's name for messages, such as "PATH: tensor 'x', tile
	 * 21", into buf (cap bytes, NUL-terminated), so a damaged tile is
	 * reported by file and tensor. */
	void (*name_tile)(const wc_tile_source *src, uint32_t tile, char *buf, size_t cap);
} wc_tile_source_ops;

struct wc_tile_source {
	const wc_tile_source_ops *ops;
	uint64_t id; /* unique per open instance, never reused in the process: cache key */
};

/* A new source id: unique in the process across every kind of source (the
 * cache keys entries by it), never 0, never reused. Thread-safe. */
uint64_t wc_tile_source_new_id(void);

/* Tile `tile`'s name for messages, into buf (cap bytes, NUL-terminated):
 * the source's name_tile, or "tile N of source ID" where the source has
 * none or src is NULL (id is then the source's id). */
void wc_tile_source_name(const wc_tile_source *src, uint64_t id, uint32_t tile, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* WC_TILE_SOURCE_H */
