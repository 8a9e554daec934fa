/* container_fixture.h - the file the container tests share: a safetensors
 * file of every dtype (st_builder.h, seed 42) packed with 4 KiB tiles,
 * 256-symbol chunks and verification, in a temporary directory; and helpers
 * to read, modify and reopen it (test_container, test_container_damage,
 * test_metadata). */
#ifndef WC_TESTS_CONTAINER_FIXTURE_H
#define WC_TESTS_CONTAINER_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "container/format.h"

extern char fx_dir[256];                     /* the temporary directory */
extern char fx_st_path[300], fx_wc_path[300]; /* the input and the packed file */
extern uint8_t *fx_st_bytes;                  /* the input's bytes */
extern size_t fx_st_len;

/* Make and remove the directory and both files (an unchecked fixture). */
void fx_setup(void);
void fx_teardown(void);
/* A whole file, malloc'd; fails the test if it cannot be read. */
uint8_t *fx_read_file(const char *path, size_t *len);
/* Recompute the header's XXH3 check of image b (sections where h says), so
 * that structural validation is what must catch a modified field. */
void fx_fix_check(uint8_t *b, const wc_file_header *h);
/* Write the len-byte image b to fx_dir/mod.wcodec and open it with
 * wc_container_open (names: 1) or wc_container_open_tiles (0); returns the
 * error, which must come with a reason. */
wc_err fx_open_bytes(const uint8_t *b, size_t len);
wc_err fx_open_bytes_as(const uint8_t *b, size_t len, int names);

/* The image b (header h) with its metadata content replaced by the n bytes
 * at content (zstd-compressed as the format stores it), check recomputed;
 * *out_len its bytes. */
uint8_t *fx_with_metadata(const uint8_t *b, const wc_file_header *h, const void *content, size_t n, size_t *out_len);
/* The metadata content of image b, NUL-terminated (for JSON); *n its bytes. */
uint8_t *fx_metadata_of(const uint8_t *b, const wc_file_header *h, size_t *n);

/* One record of a version-3 tensor table (docs/FORMAT.md 1.3.1). */
typedef struct fx_record {
	size_t off, len; /* in the table */
	uint8_t code, flags;
	uint64_t bytes;
} fx_record;
/* The ntensors records of table t (n bytes, which they must fill). */
void fx_walk_records(const uint8_t *t, size_t n, uint32_t ntensors, fx_record *out);

#endif /* WC_TESTS_CONTAINER_FIXTURE_H */
