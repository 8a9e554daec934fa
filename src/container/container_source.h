/* container_source.h - opening a container over a source already open
 * (source/source.h), for readers that opened it to look at its first bytes
 * (the checkpoint loader, the mount of a bucket): an object store is then
 * asked for its size once. Not installed: sources are not part of the public API. */
#ifndef WC_CONTAINER_SOURCE_H
#define WC_CONTAINER_SOURCE_H

#include "container/container.h"
#include "source/source.h"

/* wc_container_open over src, which the container takes (closed on
 * failure too); its name is the source's. Errors: those of
 * wc_container_open. */
wc_err wc_container_open_source(wc_source *src, wc_container **out);

/* wc_container_open_tiles over src (the mount's objects of a store), which
 * the container takes (closed on failure too). Errors: those of
 * wc_container_open. */
wc_err wc_container_open_tiles_source(wc_source *src, wc_container **out);

/* wc_container_peek of src: its fixed header read with one
 * wc_source_read (a ranged GET from a store). src stays the caller's.
 * Errors: those of wc_container_peek. */
wc_err wc_container_peek_source(wc_source *src, wc_container_summary *out);

#endif /* WC_CONTAINER_SOURCE_H */
