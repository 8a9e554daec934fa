/*
 * source.h - where the bytes of a container come from: the layer under the
 * container reader (docs/ARCHITECTURE.md, "Sources"). A wc_source is a
 * read-only, fixed-size sequence of bytes read at offsets from any number of
 * threads: a local file today (by path, its descriptor held under the
 * process's descriptor budget, core/fd_budget.h), an object in a store
 * next. Readers above it (the container, the checkpoint loader) read
 * through it alone, so each of them gains a source at once.
 */
#ifndef WC_SOURCE_H
#define WC_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "core/wc_error.h"

typedef struct wc_source wc_source;

/* Open the local file at path for reading (a regular file only: a FIFO or
 * a device is refused rather than read). Its size is taken once; the
 * descriptor may be closed while idle and opened again by path, the file's
 * identity checked then (fd_budget.h). Errors: WC_E_IO ("<path>:
 * <strerror>"), WC_E_FORMAT (not a regular file), WC_E_NOMEM. */
wc_err wc_source_open_file(const char *path, wc_source **out);

/* Open what `name` names: an object of an S3-compatible store for
 * "s3://BUCKET/KEY" (source_s3.c), else the local file at that path.
 * Errors: those of wc_source_open_file and wc_source_open_s3. */
wc_err wc_source_open(const char *name, wc_source **out);

/* Read exactly len bytes at byte offset off into buf; `what` names the
 * part read for the reason. Thread-safe. Errors: WC_E_RANGE ([off, off +
 * len) past the source's size), WC_E_IO ("reading <what> at offset N: ...",
 * naming the source). */
wc_err wc_source_read(wc_source *s, void *buf, size_t len, uint64_t off, const char *what);

/* Bytes worth reading at once where a reader is unsure how much it will
 * need (a container's header and prefix): 0 for a local file, where each
 * read costs little; 64 KiB for an object store, where each costs a
 * request's latency. */
size_t wc_source_read_ahead(const wc_source *s);

/* The size in bytes, as when opened. */
uint64_t wc_source_size(const wc_source *s);

/* The path or address it was opened by (for messages). */
const char *wc_source_name(const wc_source *s);

/* Where a file source is opened again after its descriptor was closed
 * while idle (a daemon that renamed the file it opened; a pack that
 * renamed its temporary file). Errors: WC_E_NOMEM (the old path is
 * kept), WC_E_INVAL (not a file source). */
wc_err wc_source_set_path(wc_source *s, const char *path);

/* Serve reads from windows of `bytes`: a read of less than a quarter of
 * that outside every window fetches up to `bytes` from its offset (to the
 * end at most) into a new window (the least recently used of 4 goes), and
 * any read a window holds is copied from it, so a reader of many small
 * consecutive pieces (the mount's small tiles from an object store, one
 * GET each otherwise) makes one request per window. The windows of all sources of the process hold
 * at most 64 MiB; past that, reads go to the source as they are. Set once,
 * before the source is shared between threads. Errors: WC_E_NOMEM. */
wc_err wc_source_set_read_window(wc_source *s, size_t bytes);

/* The window size set by wc_source_set_read_window (0: none). */
size_t wc_source_window(const wc_source *s);

/* wc_source_read by a reader that knows what it reads next: where a read
 * window is fetched, it spans fetch_len bytes from off (at least len, at
 * most the window's size) instead of the window's size, so it ends where
 * the next small pieces do rather than inside a large one read on its
 * own. Errors: those of wc_source_read. */
wc_err wc_source_read_within(wc_source *s, void *buf, size_t len, uint64_t off, uint64_t fetch_len, const char *what);

void wc_source_close(wc_source *s);

/* The objects of an S3-compatible store whose keys start with PREFIX, for
 * prefix_uri "s3://BUCKET/PREFIX" (ListObjectsV2, every page, in key
 * order): fn(ctx, key, size) for each (the key without "s3://BUCKET/");
 * fn returning nonzero stops the listing. Errors: WC_E_INVAL (not an
 * s3:// address), WC_E_UNSUPPORTED (a build without s3:// sources), WC_E_IO
 * (HTTP errors, as wc_source_read), WC_E_FORMAT (an answer that is not a
 * listing). */
wc_err wc_source_list(const char *prefix_uri, int (*fn)(void *ctx, const char *key, uint64_t size), void *ctx);

/* What s3:// names are read with, for --version: "libcurl 7.88.1", or
 * "none (built without libcurl and libinih)". */
const char *wc_source_s3_support(void);

#endif /* WC_SOURCE_H */
