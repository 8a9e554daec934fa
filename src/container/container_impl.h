/* container_impl.h - the open container's state, shared by the files that
 * make up the reader (reader.c: open, index, tiles; metadata.c: the
 * tensor table; metadata_json.c: the JSON metadata of versions 1 and 2).
 * Not installed. */
#ifndef WC_CONTAINER_IMPL_H
#define WC_CONTAINER_IMPL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "container/container.h"
#include "container/format.h"
#include "container/safetensors.h"
#include "source/source.h"

struct wc_container {
	wc_tile_source src; /* first: wc_container_source() hands out &src */
	atomic_uint refs;
	wc_source *src_bytes; /* where the file's bytes come from (source.h) */
	char *name; /* for messages (wc_container_set_name); the path opened by default */
	wc_file_header h;
	uint8_t *prefix;
	wc_tensor_info *tensors;
	uint32_t *by_name; /* tensor indices sorted by name */
	wc_tile_info *tiles;
	wc_freqtab *tables;
	uint8_t *dicts;       /* the dictionary section (h.dicts_len bytes), or NULL */
	uint64_t dict_cursor; /* while parsing: where the next tensor's dictionary must start */
	struct wc_lossy_job *lossy_jobs; /* per tile, for lossy tensors' tiles (lossy_job.h); or NULL */
	uint32_t tile_cursor; /* while parsing: the next tensor's first tile */
};

/* Read the metadata section (meta_len bytes: one zstd frame) of any
 * version (docs/FORMAT.md 1.3) into c->tensors, checking every tensor
 * against the header and the tensors before it (byte ranges, layouts,
 * dictionaries, tiles, shared tiles, tables). With names (and always for
 * versions 1 and 2) the prefix is parsed as a safetensors header and must
 * list the same tensors, whose names, dtypes and shapes the container
 * keeps; without, they stay NULL. Errors: WC_E_FORMAT, WC_E_RANGE,
 * WC_E_NOMEM, with a reason. */
wc_err wc_container_read_tensors(wc_container *c, const uint8_t *meta, size_t meta_len, int names);

/* Versions 1 and 2 (metadata_json.c): the JSON metadata (len bytes) into
 * c->tensors; st is the prefix's header, whose tensors must be the same. */
wc_err wc_meta_read_json(wc_container *c, const char *json, size_t len, const wc_st_header *st);

/* The rules every version shares (metadata.c), applied to tensor i as it is
 * read; each returns WC_E_FORMAT with a reason naming the tensor.
 * wc_meta_dict: t (its plain_layout set) has layout "dict" with k entries
 * at offset off of the dictionary section, directly after the previous
 * dict tensor's, strictly ascending; sets layout, dict and dict_entries.
 * wc_meta_place: t (its byte range and layout set) is a whole number of
 * elements and holds tiles [first, first + count), the next ones, or with
 * shared the previous tensor's only tile (docs/FORMAT.md 1.6); sets
 * first_tile, ntiles and shared.
 * wc_meta_plane: plane p's table (UINT64_MAX: none) is below ntables and
 * its entropy in [0, 8]; fills t->planes[p] (and t->plain_entropy[p]
 * unless t is dict). */
wc_err wc_meta_dict(wc_container *c, uint32_t i, wc_tensor_info *t, uint64_t off, uint64_t k);
wc_err wc_meta_place(wc_container *c, uint32_t i, wc_tensor_info *t, int shared, uint64_t first, uint64_t count);
wc_err wc_meta_plane(const wc_container *c, uint32_t i, wc_tensor_info *t, unsigned p, uint64_t table,
		     double entropy, uint64_t coded);

#endif /* WC_CONTAINER_IMPL_H */
