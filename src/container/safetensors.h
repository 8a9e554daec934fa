/*
 * safetensors.h - a validating parser of safetensors headers.
 *
 * Format (github.com/huggingface/safetensors, "Format" in its README):
 *   u64 N (little-endian)  length of the JSON header
 *   N bytes                a JSON object: tensor name -> {"dtype": string,
 *                          "shape": [int...], "data_offsets": [begin, end]},
 *                          plus an optional "__metadata__" object whose
 *                          values are strings; may be padded with spaces
 *   data section           the tensors' bytes; offsets are relative to it
 *
 * The parser accepts exactly what the reference implementation accepts, and
 * rejects with a WC_E_FORMAT reason (wc_last_detail()) naming the problem and
 * the tensor: non-object JSON, duplicate keys, missing or ill-typed fields,
 * negative or overflowing shapes, end < begin, a byte count that does not
 * match prod(shape) * element size (for the dtypes whose size it knows),
 * overlapping tensors, holes between tensors, a data section longer or
 * shorter than the tensors (trailing bytes, truncated file).
 * Limits (docs/FORMAT.md section 5) give WC_E_RANGE.
 */
#ifndef WC_SAFETENSORS_H
#define WC_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "core/wc_error.h"

#define WC_ST_HEADER_MAX (100u << 20) /* bytes of JSON header */
#define WC_ST_TENSORS_MAX (1u << 20)  /* tensors per file */
#define WC_ST_NAME_MAX 4096u          /* bytes of a tensor name */
#define WC_ST_DTYPE_MAX 32u           /* bytes of a dtype name */
#define WC_ST_NDIM_MAX 64u            /* dimensions of a shape */

typedef struct wc_st_tensor {
	char *name;       /* UTF-8, NUL-terminated (JSON forbids NUL inside) */
	char *dtype;      /* as written: "BF16", "F32", ... */
	uint32_t ndim;
	uint64_t *shape;  /* ndim entries (NULL when ndim == 0: a scalar) */
	uint64_t begin;   /* byte offsets relative to the data section */
	uint64_t end;
} wc_st_tensor;

typedef struct wc_st_header {
	uint64_t header_len;  /* N: bytes of JSON */
	uint64_t data_offset; /* 8 + N: first byte of the data section in the file */
	uint64_t data_size;   /* bytes of the data section (= the last tensor's end) */
	uint32_t ntensors;
	wc_st_tensor *tensors; /* sorted by (begin, end): data order */
	json_t *metadata;      /* "__metadata__" (an object of strings), or NULL */
} wc_st_header;

/* Element size in bits of a safetensors dtype (4 for F4, 6 for F6_E2M3 and
 * F6_E3M2, 8 to 64 for the others), 0 if the parser does not know it (such
 * tensors are accepted; their byte count is not checked). */
unsigned wc_st_dtype_bits(const char *dtype);

/* Element size in bytes of a safetensors dtype, 0 if the parser does not
 * know it or its elements are smaller than a byte (F4, F6_*). */
unsigned wc_st_dtype_size(const char *dtype);

/* Read the header length N from the first 8 bytes of a file of file_size
 * bytes and check 8 + N <= file_size and N <= WC_ST_HEADER_MAX.
 * Errors: WC_E_FORMAT (file shorter than 8 bytes or than 8 + N), WC_E_RANGE. */
wc_err wc_st_header_length(const uint8_t *first8, uint64_t file_size, uint64_t *n);

/* Parse and validate the header of a safetensors file of file_size bytes.
 * buf holds the file's first buf_len bytes, at least 8 + N (the data section
 * need not be present: the container reader checks a prefix this way).
 * On success *out is a new header (free with wc_st_free).
 * Errors: WC_E_FORMAT, WC_E_RANGE (limits), WC_E_NOMEM; reason via wc_last_detail(). */
wc_err wc_st_parse(const uint8_t *buf, size_t buf_len, uint64_t file_size, wc_st_header **out);

void wc_st_free(wc_st_header *h);

#endif /* WC_SAFETENSORS_H */
