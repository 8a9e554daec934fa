/*
 * ops.h - the FUSE low-level operations of wcodecfs.
 *
 * Read-only: every operation that would change the tree or a file answers
 * EROFS (also when mounted with -o rw). Regular files keep the kernel page
 * cache (keep_cache, no direct_io) so shared mmap works; reads of virtual
 * files are answered without copying from the decoded tiles the cache holds
 * (fuse_reply_data over a fuse_bufvec), passed-through files from their
 * descriptor (FUSE_BUF_IS_FD, spliced where the kernel allows).
 */
#ifndef WCFS_OPS_H
#define WCFS_OPS_H

#include <pthread.h>
#include <stdatomic.h>

#include "fuse/options.h"
#include "fuse/vtree.h"
#include "engine/backend.h"
#include "engine/cache.h"

typedef struct wcfs_fs {
	const wcfs_options *opt;
	wcfs_vtree vt;        /* vt.pctx.cache == cache */
	wc_backend *backend;
	wc_cache *cache;
	double timeout;       /* attribute and entry timeout, seconds */
	unsigned readahead;   /* tiles ahead of a sequential stream; 0 = off */
	/* Files come from an object store (bucket.h): an open queues the
	 * first readahead tiles at once, as every fetch waits on a request's
	 * latency that a reader of the file's start would otherwise pay tile
	 * after tile before its stream is seen. */
	int prefetch_on_open;
	atomic_int bdi_pending; /* kernel readahead still to be raised (bdi.h) */
	/* Reads of virtual files served, for the unmount log: how many, their
	 * bytes, the nanoseconds from the request to the reply written (the
	 * tiles' waits included) and those spent writing replies (the copy
	 * into the kernel's pages). */
	atomic_uint_fast64_t reads, read_bytes, read_ns, reply_ns;
	/* For -o idle_unmount (idle.h): CLOCK_MONOTONIC second of the last
	 * request, and the files and directories open now. */
	atomic_uint_fast64_t last_request_s;
	atomic_uint open_handles;
	/* Open file handles (ops.c), under handles_lock. */
	pthread_mutex_t handles_lock;
	struct wcfs_handle *handles;
} wcfs_fs;

/* The operation table; the session's userdata is a wcfs_fs*. */
extern const struct fuse_lowlevel_ops wcfs_ll_ops;

/* Free the handles of files still open when the session ended (the kernel
 * sends no RELEASE for them then), closing their descriptors. Call after
 * the session loop, before the inode table is destroyed. */
void wcfs_handles_free(wcfs_fs *fs);

#endif /* WCFS_OPS_H */
