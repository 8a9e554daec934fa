/* tile_source.c - process-wide ids of tile sources (tile_source.h). */
#include "engine/tile_source.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>

static atomic_uint_fast64_t next_id = 1;

uint64_t wc_tile_source_new_id(void)
{
	return atomic_fetch_add(&next_id, 1);
}

void wc_tile_source_name(const wc_tile_source *src, uint64_t id, uint32_t tile, char *buf, size_t cap)
{
	if (!cap)
		return;
	if (src && src->ops->name_tile)
		src->ops->name_tile(src, tile, buf, cap);
	else
		snprintf(buf, cap, "tile %" PRIu32 " of source %" PRIu64, tile, src ? src->id : id);
}
