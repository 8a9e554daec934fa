/* container_impl.h - the open container's state, shared by the files that
 * make up the reader (reader.c: open, index, tiles; metadata.c: the
 * metadata and the prefix). Not installed. */
#ifndef WC_CONTAINER_IMPL_H
#define WC_CONTAINER_IMPL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "container/container.h"
#include "container/format.h"
#include "container/safetensors.h"

struct wc_container {
	wc_tile_source src; /* first: wc_container_source() hands out &src */
	atomic_uint refs;
	int fd;
	wc_file_header h;
	uint8_t *prefix;
	wc_tensor_info *tensors;
	uint32_t *by_name; /* tensor indices sorted by name */
	wc_tile_info *tiles;
	wc_freqtab *tables;
	uint8_t *dicts;       /* the dictionary section (h.dicts_len bytes), or NULL */
	uint64_t dict_cursor; /* while parsing: where the next tensor's dictionary must start */
};

/* Parse the metadata section (one zstd frame of JSON, frame_len bytes)
 * into c->tensors, checking every tensor against the header and the ones
 * before it (byte ranges, tiles, layouts, dictionaries, shared tiles).
 * Errors: WC_E_FORMAT, WC_E_RANGE, WC_E_NOMEM, with a reason. */
wc_err wc_container_parse_metadata(wc_container *c, const uint8_t *frame, size_t frame_len);

/* The prefix parsed as a safetensors header: wc_container_parse_prefix
 * fills st (or err and why) and may run on a thread of its own while the
 * metadata is parsed (a header of thousands of tensors: 21 of the 79 ms an
 * 8,317-tensor file took to open); the caller frees st. */
typedef struct wc_prefix_parse {
	const wc_container *c;
	wc_st_header *st;
	wc_err err;
	char why[400];
} wc_prefix_parse;

void *wc_container_parse_prefix(void *arg);

/* The prefix must be the safetensors header of the tensors listed in the
 * metadata: same names, dtypes, shapes and byte ranges, in the same
 * order. Errors: WC_E_FORMAT naming the first difference. */
wc_err wc_container_check_prefix(wc_container *c, wc_prefix_parse *pp);

#endif /* WC_CONTAINER_IMPL_H */
