/* st_builder.h - building safetensors files in tests: every dtype, random,
 * constant and weight-like data, from a seeded generator (deterministic). */
#ifndef WC_TEST_ST_BUILDER_H
#define WC_TEST_ST_BUILDER_H

#include <stddef.h>
#include <stdint.h>

typedef struct st_tensor {
	char name[64];
	const char *dtype;
	uint32_t ndim;
	uint64_t shape[4];
	uint8_t *data; /* owned */
	size_t nbytes;
} st_tensor;

typedef struct st_file {
	st_tensor t[256];
	size_t n;
} st_file;

/* Append a tensor of dtype/shape filled by `fill`: "random" (uniform bytes),
 * "const" (one repeated element), "weights" (Gaussian, std 0.02, for BF16,
 * F16, F32; random bytes otherwise), "small" (small integers). Element sizes
 * as in the safetensors spec; an unknown dtype counts as 1 byte. */
void st_add(st_file *f, const char *name, const char *dtype, uint32_t ndim, const uint64_t *shape,
	    const char *fill, uint64_t *rng);

/* A file with every dtype in empty, scalar, one-element, random, constant and
 * (for floats) weight-like tensors, large enough for several 4 KiB tiles. */
void st_all_dtypes(st_file *f, uint64_t seed);

/* The file's bytes (header padded to 8 with spaces, tensors in order, with
 * "__metadata__"); *len receives the size. Caller frees. */
uint8_t *st_serialize(const st_file *f, size_t *len);

/* Write the bytes to path; 0 on success. */
int st_write_bytes(const char *path, const uint8_t *b, size_t len);

/* Copy the file src to dst with the byte at `off` XORed with mask (a damaged
 * copy); 0 on success, -1 if a file cannot be read or written or off is past
 * the end. */
int st_copy_flipped(const char *src, const char *dst, uint64_t off, uint8_t mask);

/* A new directory $TMPDIR/STEM.XXXXXX (/tmp without TMPDIR), its path in
 * dir (n bytes); dir, or NULL when it cannot be made. */
char *st_temp_dir(char *dir, size_t n, const char *stem);

/* Remove the directory tree at dir (a test's temporary directory); 0 on
 * success. */
int st_remove_tree(const char *dir);

/* Add an F32 tensor of rows x cols weights whose columns are 2^(c % 8)
 * apart in magnitude: stored channels last (TensorFlow's layout), so the
 * lossy quantizer takes its last axis. */
void st_add_channels_last(st_file *f, const char *name, uint64_t rows, uint64_t cols, uint64_t *rng);

void st_free(st_file *f);

#endif
