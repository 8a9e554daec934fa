/*
 * loader.h - reading tensors of a checkpoint file straight into a caller's
 * memory: the library half of model loaders (the Python package `wcodec`,
 * contrib/examples). The CUDA plugin's wcodec_cuda_load() (cuda/wcodec_cuda.h)
 * is the GPU half and takes the same files and ranges.
 *
 * A wc_tensor_file is either kind of checkpoint, told apart by its first
 * bytes: a .wcodec container (docs/FORMAT.md) or a plain safetensors file
 * (github.com/huggingface/safetensors, "Format"). Both present the same
 * view: the safetensors header (JSON) and a data section whose byte ranges
 * [begin, end) the header gives per tensor. Reading a range of a .wcodec file
 * decodes only the tiles it touches; every payload's chash and every decoded
 * tile's dhash is checked, so a damaged file is an error, never wrong bytes.
 * A plain file is read as it is (it has no checksums).
 */
#ifndef WC_LOADER_H
#define WC_LOADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "container/container.h"
#include "core/wc_error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct wc_tensor_file wc_tensor_file;

/* Open the checkpoint at `path`: a .wcodec container (by its magic) or a
 * safetensors file (anything else), whatever its name. Validates the whole
 * header and index (wc_container_open; for safetensors the parser of
 * src/container/safetensors.h: offsets, sizes, no holes or overlaps, the
 * data section's size against the file's). Thread-safe to use once open.
 * Errors: WC_E_IO, WC_E_FORMAT, WC_E_CORRUPT, WC_E_RANGE, WC_E_UNSUPPORTED,
 * WC_E_NOMEM, with the reason (naming the file) in wc_last_detail(). */
wc_err wc_tensor_file_open(const char *path, wc_tensor_file **out);
void wc_tensor_file_close(wc_tensor_file *f);

/* The same view of a container already open (it takes a reference of its
 * own, released by wc_tensor_file_close); `path` names it in reasons.
 * Errors: WC_E_NOMEM. */
wc_err wc_tensor_file_of_container(wc_container *c, const char *path, wc_tensor_file **out);

/* The objects of an S3-compatible store under "s3://BUCKET/PREFIX" (what a
 * checkpoint directory is there; wc_tensor_file_open takes each object's
 * "s3://BUCKET/KEY"): fn(ctx, key, size in bytes) for each, in key order,
 * every page of the listing (ListObjectsV2); fn returning nonzero stops it.
 * Configuration and errors as for s3:// files (wcodec(1), OBJECT STORES):
 * WC_E_INVAL (not an s3:// address), WC_E_UNSUPPORTED (a build without
 * s3:// sources), WC_E_IO, WC_E_FORMAT (not a listing). */
wc_err wc_object_list(const char *prefix_uri, int (*fn)(void *ctx, const char *key, uint64_t size), void *ctx);

/* The safetensors JSON header exactly as in the (original) file, *len bytes
 * (padding spaces included), not NUL-terminated. Valid while f is open. */
const char *wc_tensor_file_header(const wc_tensor_file *f, size_t *len);

/* The path the file was opened by (for messages). */
const char *wc_tensor_file_path(const wc_tensor_file *f);

/* Whether f is read from an object store (s3://): every read waits on a
 * request's latency rather than a disk or a CPU, so a loader keeps more
 * reads in flight and reads consecutive tiles' payloads at once
 * (wc_container_read_payloads) rather than one request a tile. */
bool wc_tensor_file_remote(const wc_tensor_file *f);

/* Bytes of the data section (the sum of the tensors' byte sizes). */
uint64_t wc_tensor_file_data_size(const wc_tensor_file *f);

/* The container of a .wcodec file (borrowed: valid while f is open), or
 * NULL for a plain safetensors file. */
wc_container *wc_tensor_file_container(const wc_tensor_file *f);

/* Read len bytes at offset off of a plain file's data section into dst,
 * from its source (a local file, or an object store), thread-safe.
 * Errors: WC_E_INVAL (a .wcodec file, whose bytes are decoded: see
 * wc_load_host), WC_E_RANGE, WC_E_IO naming the file. */
wc_err wc_tensor_file_read_data(const wc_tensor_file *f, void *dst, size_t len, uint64_t off);

/* The smallest range [*span_off, *span_off + *span_len) of whole tiles that
 * covers the data-section bytes [off, off + len) of f (for a plain file, the
 * range itself): what wcodec_cuda_load() can decode into device memory, whose
 * ranges must start and end on tile boundaries. Errors: WC_E_RANGE (past the
 * data section). */
wc_err wc_tensor_file_tile_span(const wc_tensor_file *f, uint64_t off, uint64_t len, uint64_t *span_off,
				uint64_t *span_len);

/* The tiles first..last (inclusive) of a .wcodec file that hold its
 * data-section bytes [off, off + len), len > 0, checked to lie in the data
 * section. Errors: WC_E_RANGE, WC_E_INVAL (a plain file, or len 0). */
wc_err wc_tensor_file_tiles(const wc_tensor_file *f, uint64_t off, uint64_t len, uint32_t *first,
			    uint32_t *last);

/* Where the tiles first..last (inclusive) of a .wcodec file lie: their
 * decoded bytes [*data_off, *data_off + *data_len) in the data section, and
 * their payloads [*payload_off, *payload_off + *payload_len) in the file
 * (consecutive tiles' payloads are consecutive, docs/FORMAT.md 1.4). For
 * loaders that split or exchange packed bytes. Any pointer may be NULL.
 * Errors: WC_E_INVAL (a plain file), WC_E_RANGE (first > last, last past
 * the tiles). */
wc_err wc_tensor_file_tile_extent(const wc_tensor_file *f, uint32_t first, uint32_t last, uint64_t *data_off,
				  uint64_t *data_len, uint64_t *payload_off, uint64_t *payload_len);

/* Read the payloads of tiles first..last of a .wcodec file into dst
 * (payload_len bytes of wc_tensor_file_tile_extent, laid out as in the file),
 * one positioned read a tile, and check each tile's chash.
 * Errors: those of wc_tensor_file_tile_extent, WC_E_IO, WC_E_CORRUPT (the
 * reason names the file, the tensor and the tile). */
wc_err wc_tensor_file_read_payloads(const wc_tensor_file *f, uint32_t first, uint32_t last, void *dst);

/* One read: `length` bytes at byte `offset` of the data section of
 * files[file] into dst (host memory for wc_load_host, device memory for
 * wcodec_cuda_load). Ranges may lie anywhere; several may share a file.
 * Destinations must not overlap. */
typedef struct wc_load_range {
	uint32_t file;
	uint32_t reserved; /* 0 */
	uint64_t offset;   /* bytes, relative to the data section */
	uint64_t length;   /* bytes */
	void *dst;
} wc_load_range;

/* Read ranges[0..n) of files[] into host memory, on every online CPU (a
 * process-wide pool of one thread per CPU, the calling thread among them,
 * started on first use): each tile is read, checked and decoded straight
 * into its range's dst by one thread, a tile only partly inside a range
 * through a one-tile buffer; plain files are read in 8 MiB preads.
 * Memory beyond the destinations: about two tiles (payload and decoded) per
 * thread at a time. Returns when every byte is in place or on the first
 * failure (then the destinations hold anything).
 * Errors: WC_E_INVAL (a file index past nfiles, reserved not 0, NULL dst
 * with a length), WC_E_RANGE (a range past its data section), WC_E_IO,
 * WC_E_CORRUPT (a payload or decoded checksum; the reason names the file,
 * the tensor and the tile), WC_E_NOMEM. Thread-safe. */
wc_err wc_load_host(wc_tensor_file *const *files, size_t nfiles, const wc_load_range *ranges, size_t n);

/* Payloads already in host memory: those of tiles first_tile..last_tile of
 * files[file], laid out as wc_tensor_file_read_payloads writes them (from
 * another rank of a distributed load, say). */
typedef struct wc_payload_run {
	uint32_t file;
	uint32_t first_tile;
	uint32_t last_tile; /* inclusive */
	uint32_t reserved;  /* 0 */
	const void *bytes;
} wc_payload_run;

/* The payload of tile `tile` of files[file] in runs[0..nruns) (the first
 * run holding it), or NULL. The runs must have passed wc_load_host_payloads'
 * checks (wcodec_cuda_load_payloads makes the same). */
const void *wc_payload_run_find(wc_tensor_file *const *files, const wc_payload_run *runs, size_t nruns,
				uint32_t file, uint32_t tile);

/* Check runs[0..nruns) against files[0..nfiles): each names a .wcodec file
 * and tiles it has, reserved 0, bytes not NULL. Errors: WC_E_INVAL naming
 * the run. */
wc_err wc_payload_runs_check(wc_tensor_file *const *files, size_t nfiles, const wc_payload_run *runs, size_t nruns);

/* wc_load_host with the payloads taken from runs[0..nruns) instead of the
 * files: every tile the ranges touch must lie in a run, and is checked
 * against its chash before it is decoded (then its dhash, as always), so
 * bytes that came from elsewhere never decode into wrong ones. Runs may
 * overlap (the first holding a tile is used). Plain files' ranges are read
 * from the files. Memory and threads as wc_load_host. Errors: those of
 * wc_load_host; WC_E_INVAL (a run of a plain file or past its file's
 * tiles, reserved not 0, a tile in no run, naming it). */
wc_err wc_load_host_payloads(wc_tensor_file *const *files, size_t nfiles, const wc_payload_run *runs, size_t nruns,
			     const wc_load_range *ranges, size_t n);

/* Check range i of ranges against files[0..nfiles): the argument errors of
 * wc_load_host and wcodec_cuda_load (WC_E_INVAL, WC_E_RANGE), with a reason
 * naming the range or the file. */
wc_err wc_load_range_check(wc_tensor_file *const *files, size_t nfiles, const wc_load_range *ranges, size_t i);

#ifdef __cplusplus
}
#endif

#endif /* WC_LOADER_H */
