/*
 * container.h - reading and writing .wcodec files (docs/FORMAT.md).
 *
 * A .wcodec file holds one safetensors file losslessly: the original header
 * bytes verbatim (the "prefix": 8-byte length + JSON header, padding
 * included), then every tensor's bytes cut into tiles that are coded
 * independently (tile_codec.h). The "virtual file" is the original
 * safetensors file: prefix followed by the data section.
 *
 * Readers validate every offset and size against the file size and the
 * limits in docs/FORMAT.md before use; a wc_container that opened
 * successfully never indexes outside its tables.
 */
#ifndef WC_CONTAINER_H
#define WC_CONTAINER_H

#include <stddef.h>
#include <stdint.h>

#include "codec/planes.h"
#include "codec/rans.h"
#include "core/wc_error.h"
#include "engine/tile_source.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WC_MAGIC "WCODEC\r\n" /* 8 bytes; \r\n catches text-mode mangling */
/* The format version this library writes, the newest it reads. Version 2
 * added shared tiles (docs/FORMAT.md 1.6); version 3 replaced the JSON
 * metadata by a binary tensor table that takes names, dtypes, shapes and
 * byte ranges from the prefix (1.3). Versions 1 and 2 are still read. */
#define WC_FORMAT_VERSION 3u
#define WC_FORMAT_VERSION_SHARED 2u
#define WC_FORMAT_VERSION_TABLE 3u
#define WC_TILE_SIZE_DEFAULT (1u << 20)  /* decoded bytes per tile */
#define WC_TILE_SIZE_MIN (4u << 10)
#define WC_TILE_SIZE_MAX (64u << 20)

typedef struct wc_tile_info {
	uint64_t voff;   /* offset of the tile's first byte in the virtual file */
	uint64_t coff;   /* offset of its payload in the .wcodec file */
	uint32_t csize;  /* payload bytes */
	uint32_t dsize;  /* decoded bytes (multiple of the tensor's elem_size) */
	uint32_t tensor; /* index into the tensor table */
	uint32_t flags;  /* reserved, 0 */
	uint64_t chash;  /* XXH3-64 (libxxhash, seed 0) of the payload */
	uint64_t dhash;  /* XXH3-64 (seed 0) of the decoded bytes */
} wc_tile_info;

typedef struct wc_plane_stats {
	double entropy_bits;  /* order-0 entropy of the tensor-plane, bits/symbol */
	uint64_t coded_bytes; /* bytes of this plane's bodies over all tiles */
	uint32_t table;       /* frequency table index, or WC_NO_TABLE */
} wc_plane_stats;

typedef struct wc_tensor_info {
	const char *name;
	const char *dtype;     /* safetensors dtype name, as in the header */
	uint32_t ndim;
	const uint64_t *shape; /* ndim entries */
	uint64_t begin, end;   /* byte range in the virtual file */
	wc_layout layout;
	uint32_t first_tile, ntiles;
	wc_plane_stats planes[WC_MAX_PLANES]; /* layout.nplanes: the planes coded in the tiles */
	/* Layout "dict" (docs/FORMAT.md 2.1): the tensor's sorted distinct
	 * values, dict_entries (1..65536) of layout.elem_size bytes, validated
	 * at open (count, strictly ascending, within the checksummed dictionary
	 * section); NULL and 0 for other layouts. Valid while the container lives. */
	const uint8_t *dict;
	uint32_t dict_entries;
	/* The byte-plane layout section 2 gives the dtype (= layout unless
	 * dict) and the order-0 entropy of its planes in bits per symbol (=
	 * planes[].entropy_bits unless dict; 0 when a dict tensor's metadata
	 * does not record them): the bound without a dictionary. */
	wc_layout plain_layout;
	double plain_entropy[WC_MAX_PLANES];
	/* Layouts "int8" and "int4" (lossy, docs/FORMAT.md 2.2): the tensor's
	 * bytes are decoded from codes of lossy bits (one byte plane: `layout`
	 * is "bytes") and scales per output channel (lossy_group 0) or per
	 * group of lossy_group of a channel's elements, the output channels
	 * being the first axis (lossy_axis 0) or the last (1); elements of
	 * plain_layout.elem_size bytes, dtype F32, BF16 or F16. lossy_scales:
	 * lossy_nscales host floats, valid while the container lives. The errors against the
	 * original (informative, measured when packing): SNR in dB (999: exact),
	 * largest and mean absolute error, relative Frobenius norm of the error.
	 * lossy is 0 and the rest 0 for lossless tensors. */
	int lossy; /* 0, or the bits of its codes: 8 or 4 */
	uint8_t lossy_axis;
	uint32_t lossy_channels, lossy_group;
	uint64_t lossy_nscales;
	const float *lossy_scales;
	double lossy_snr_db, lossy_max_abs_err, lossy_mean_abs_err, lossy_rel_frobenius;
	/* Nonzero when the tensor's bytes continue the previous tensor's tile
	 * (a shared tile of small tensors, docs/FORMAT.md 1.6, version 2 on):
	 * first_tile is that tile, ntiles 1, and the tile also holds other
	 * tensors' bytes (a tile's `tensor` is the first of them). */
	int shared;
} wc_tensor_info;

typedef struct wc_container wc_container;

/* Open and validate a .wcodec file: header, prefix, metadata, frequency tables
 * and tile index (not the payloads). The container is reference-counted
 * (starts at 1) and safe to share between threads.
 * Errors: WC_E_IO (open/read), WC_E_FORMAT (anything malformed, with the
 * reason via wc_last_detail()), WC_E_CORRUPT (the XXH3 check of header,
 * prefix, tables, index and metadata does not match), WC_E_RANGE (a count or
 * size beyond docs/FORMAT.md section 5), WC_E_UNSUPPORTED (newer version or
 * unknown flags), WC_E_NOMEM. */
wc_err wc_container_open(const char *path, wc_container **out);
/* wc_container_open for readers of byte ranges only (the mount, `wcodec
 * cat` and `unpack`): in a format-3 file the prefix's JSON is not parsed
 * (jansson takes about 2.5 us a tensor; a 10,000-tensor header would cost
 * 25 ms), only its length checked, so every tensor's name and dtype are
 * NULL, its shape NULL with ndim 0, and wc_container_find_tensor fails.
 * Everything a read uses (header, tables, tensor table, index) is validated
 * as by wc_container_open. Files of versions 1 and 2 get their names. */
wc_err wc_container_open_tiles(const char *path, wc_container **out);
void wc_container_retain(wc_container *c);
void wc_container_release(wc_container *c); /* closes at zero */

/* What a .wcodec file's fixed header (its first 160 bytes, docs/FORMAT.md
 * section 1) states, read and validated on its own: the magic, version,
 * flags, and every section's offset and size against each other and the
 * file's size. Costs one pread, where wc_container_open parses the whole
 * index and metadata (milliseconds for a file of a thousand tensors): for
 * stat()-like uses, such as wcodecfs answering a lookup. The header's own
 * checksum covers the index too, so only wc_container_open verifies it: a
 * file that passes here may still fail to open (WC_E_CORRUPT). */
typedef struct wc_container_summary {
	uint64_t virtual_size; /* bytes of the original safetensors file */
	uint64_t file_size;    /* bytes of the .wcodec file */
	uint32_t tile_size;    /* nominal decoded tile bytes */
	uint32_t ntensors, ntiles;
} wc_container_summary;

/* Read the header of the open file `fd` (a regular file; read with pread,
 * the file offset is not used) into *out. `name` names the file in error
 * details. Errors: WC_E_IO (fstat, read), WC_E_FORMAT (shorter than a
 * header, bad magic, malformed sizes), WC_E_RANGE, WC_E_UNSUPPORTED (newer
 * version or unknown flags), as wc_container_open reports them. */
wc_err wc_container_peek(int fd, const char *name, wc_container_summary *out);

/* Bytes of memory the open container holds (its header bytes, tensor table
 * with names and shapes, tile index, frequency tables, dictionaries, name
 * index): what a reader that keeps it open should count against its
 * memory budget. */
uint64_t wc_container_memory(const wc_container *c);

/* The format version of the file (1 or 2). */
uint32_t wc_container_version(const wc_container *c);

/* The file's name in messages about c's tiles (a damaged tile: "NAME:
 * tensor 'x', tile 21: ..."), and the path where the file is opened again
 * when its descriptor was closed to stay under the process's descriptor
 * budget (core/fd_budget.h; the file's identity is checked then):
 * reopen_path, or name if NULL. Both default to the path c was opened
 * with; a container opened through /proc/self/fd needs others. Not
 * thread-safe against decodes of c: set them before handing c out.
 * Errors: WC_E_NOMEM (the old ones are kept). */
wc_err wc_container_set_name(wc_container *c, const char *name, const char *reopen_path);

/* Unique id for this open instance (never reused in the process): cache key. */
uint64_t wc_container_id(const wc_container *c);

/* The container as a tile source for the cache (engine/tile_source.h); its
 * retain/release are wc_container_retain/release. Valid while c lives. */
wc_tile_source *wc_container_source(wc_container *c);

uint64_t wc_container_virtual_size(const wc_container *c); /* bytes */
uint64_t wc_container_file_size(const wc_container *c);    /* bytes on disk */
uint32_t wc_container_tile_size(const wc_container *c);    /* nominal decoded tile bytes */
uint32_t wc_container_chunk_symbols(const wc_container *c);

/* The prefix: the first *len bytes of the virtual file (safetensors header). */
const uint8_t *wc_container_prefix(const wc_container *c, size_t *len);

uint32_t wc_container_ntensors(const wc_container *c);
const wc_tensor_info *wc_container_tensor(const wc_container *c, uint32_t i);
/* Index of a tensor by name; WC_E_NOTFOUND if absent. */
wc_err wc_container_find_tensor(const wc_container *c, const char *name, uint32_t *index);

uint32_t wc_container_ntiles(const wc_container *c);
const wc_tile_info *wc_container_tile(const wc_container *c, uint32_t i);
/* Tiles are sorted by voff and cover [prefix_len, virtual_size) exactly.
 * Index of the tile holding virtual offset voff, O(log ntiles), no allocation.
 * Errors: WC_E_RANGE if voff is in the prefix or past the end. */
wc_err wc_container_find_tile(const wc_container *c, uint64_t voff, uint32_t *tile);

const wc_freqtab *wc_container_tables(const wc_container *c, uint32_t *ntables);

/* Read tile i's payload (csize bytes) into buf and check its chash.
 * Errors: WC_E_IO, WC_E_CORRUPT (hash mismatch, with a reason). */
wc_err wc_container_read_payload(const wc_container *c, uint32_t i, uint8_t *buf);

/* Read the payloads of tiles first..last (inclusive; consecutive in the
 * file) into buf in one read (laid out as in the file, from tile first's
 * coff), and check each tile's chash. One request from an object store
 * instead of one a tile. *bad (may be NULL) gets the tile the error is
 * about: the damaged one, else first. Errors: WC_E_RANGE (first > last,
 * past the tiles), WC_E_IO, WC_E_CORRUPT (naming the tile). */
wc_err wc_container_read_payloads(const wc_container *c, uint32_t first, uint32_t last, uint8_t *buf,
				  uint32_t *bad);

/* Check tile i's payload (csize bytes at buf, obtained some other way: from
 * another process of a distributed load, from a network source) against
 * its chash. Errors: WC_E_RANGE (no tile i), WC_E_CORRUPT (with a reason). */
wc_err wc_container_check_payload(const wc_container *c, uint32_t i, const uint8_t *buf);

/* Decode tile i's payload on the calling thread into out (dsize bytes) and
 * check its dhash. Errors: WC_E_CORRUPT, WC_E_NOMEM. */
wc_err wc_container_decode_tile(const wc_container *c, uint32_t i, const uint8_t *payload,
				uint8_t *out);

/* Read the virtual file's bytes [off, off+len) into buf by reading and
 * decoding on the calling thread (no cache): for tools and tests.
 * Errors as above; WC_E_RANGE past the end. */
wc_err wc_container_pread(const wc_container *c, uint8_t *buf, size_t len, uint64_t off);

/* ---- writing -------------------------------------------------------- */

/* rANS chunk of packed files: each chunk costs 4 + 128 bytes (its end offset
 * and 32 lane states), so 65536 symbols keeps that overhead near 0.2% of a
 * plane coded at 8 bits (the data section must stay within 1% of the
 * entropy) and one thread's CPU decode 5% faster than 16384; a 1 MiB BF16
 * tile is 8 chunks (GPU warps) of exponents. Weights decoded from GPU
 * memory a block at a time do better with 16384 (more warps for a batch of
 * a few hundred tiles: docs/BENCHMARKS.md, "Models with packed weights on
 * the GPU"). */
#define WC_PACK_CHUNK_DEFAULT 65536u

/* A lossy tensor's codes as stored (docs/FORMAT.md 2.2): `elems` codes of
 * `bits` bits (int8 values), `nscales` scales, the channels on axis `axis`
 * (0: the first, 1: the last), `group` elements of a channel per scale (0:
 * one scale per channel). */
typedef struct wc_lossy_desc {
	uint32_t bits, axis, channels, group;
	uint64_t nscales, elems;
} wc_lossy_desc;

/* Describe lossy tensor i. Errors: WC_E_RANGE (no tensor i), WC_E_INVAL
 * (tensor i is not lossy). */
wc_err wc_container_lossy_desc(const wc_container *c, uint32_t i, wc_lossy_desc *out);

/* Lossy tensor i's codes (desc.elems int8 values, in element order) into
 * codes and its scales (desc.nscales floats) into scales, for kernels that
 * take int8 weights and scales (W8A16) rather than the decoded values.
 * Each tile's payload is read and checked (chash) and its code plane
 * decoded; codes are returned only when they decode to the bytes the
 * tile's dhash names. Single-threaded. Errors: those of
 * wc_container_lossy_desc, WC_E_IO, WC_E_CORRUPT (naming the tile),
 * WC_E_NOMEM. */
wc_err wc_container_lossy_codes(const wc_container *c, uint32_t i, int8_t *codes, float *scales);


typedef struct wc_pack_opts {
	uint32_t tile_size;     /* decoded bytes per tile, a multiple of 8 in
				   [WC_TILE_SIZE_MIN, WC_TILE_SIZE_MAX]; 0 = WC_TILE_SIZE_DEFAULT */
	uint32_t chunk_symbols; /* rANS chunk; 0 = WC_PACK_CHUNK_DEFAULT */
	unsigned threads;       /* encoder threads; 0 = online CPUs */
	int verify;             /* nonzero: reopen the written temporary file, decode
				   every tile and compare with the input before the rename */
	/* Called from the calling thread with work done and total work, in
	 * bytes (each pass over the data section counts it once); may be NULL. */
	void (*progress)(void *ctx, uint64_t done, uint64_t total);
	void *progress_ctx;
	/* Called with the temporary file's path once it exists and with NULL
	 * once it is renamed or removed, so a tool can remove it when killed by
	 * a signal; may be NULL. */
	void (*temp_file)(const char *path);
	/* Lossy packing (docs/FORMAT.md 2.2): 0 packs every tensor losslessly;
	 * 8 stores as int8 codes, 4 as int4 codes, with a scale per group of
	 * lossy_group of a channel's elements (0: the default, a scale per
	 * channel for int8, groups of 128 for int4), each tensor of dtype F32, BF16 or F16 with two or more
	 * dimensions and more than 256 distinct values that lossy_select
	 * accepts (NULL: every such tensor). lossy_select gets the tensor's
	 * name, dtype, ndim and shape and returns nonzero to take it. */
	int lossy_bits;
	uint32_t lossy_group;
	int (*lossy_select)(void *ctx, const char *name, const char *dtype, unsigned ndim, const uint64_t *shape);
	void *lossy_ctx;
} wc_pack_opts;

typedef struct wc_pack_stats {
	uint64_t input_bytes, output_bytes;
	uint64_t data_bytes;         /* safetensors data section */
	uint64_t coded_data_bytes;   /* sum of tile payloads */
	double entropy_bound_bytes;  /* sum over the coded tensor-planes of entropy * n / 8,
					plus the dictionary bytes of dict tensors */
	uint64_t dict_bytes;         /* dictionary section (part of the bound above) */
	double plain_entropy_bound_bytes; /* the same over every tensor's byte planes
					     (section 2 layouts, no dictionaries) */
	uint32_t dict_tensors;       /* tensors stored with layout "dict" */
	uint32_t lossy_tensors;      /* tensors stored lossy (layout "int8") */
	uint64_t lossy_bytes;        /* their bytes in the input */
} wc_pack_stats;

/* Pack the safetensors file at in_path into out_path. Writes
 * "out_path.tmp.XXXXXX" in the same directory, fsyncs, renames it over
 * out_path; on any failure the temporary file is removed and out_path is
 * untouched. Errors: WC_E_FORMAT naming what is wrong with a malformed
 * safetensors input, WC_E_IO, WC_E_NOMEM, WC_E_INVAL (options, or out_path
 * naming the input file itself, through a hard link or symlink too). */
wc_err wc_pack_safetensors(const char *in_path, const char *out_path,
			   const wc_pack_opts *opts, wc_pack_stats *stats);

#ifdef __cplusplus
}
#endif

#endif /* WC_CONTAINER_H */
