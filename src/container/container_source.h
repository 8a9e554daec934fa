/* container_source.h - opening a container over a source already open
 * (source/source.h), for readers that opened it to look at its first bytes
 * (the checkpoint loader): an object store is then asked for its size
 * once. Not installed: sources are not part of the public API. */
#ifndef WC_CONTAINER_SOURCE_H
#define WC_CONTAINER_SOURCE_H

#include "container/container.h"
#include "source/source.h"

/* wc_container_open over src, which the container takes (closed on
 * failure too); its name is the source's. Errors: those of
 * wc_container_open. */
wc_err wc_container_open_source(wc_source *src, wc_container **out);

#endif /* WC_CONTAINER_SOURCE_H */
