/* tile_source.c - process-wide ids of tile sources (tile_source.h). */
#include "engine/tile_source.h"

#include <stdatomic.h>

static atomic_uint_fast64_t next_id = 1;

uint64_t wc_tile_source_new_id(void)
{
	return atomic_fetch_add(&next_id, 1);
}
