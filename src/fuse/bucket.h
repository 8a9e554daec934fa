/*
 * bucket.h - the mount of an object store's prefix: `wcodecfs
 * s3://BUCKET/PREFIX MOUNTPOINT` (docs/wcodecfs.1, "OBJECT STORES").
 *
 * The objects under PREFIX are listed once, at mount (ListObjectsV2,
 * source/source.h), and shown as a read-only tree of virtual vnodes
 * (provider.h): a key's '/'-separated parts are directories and a file;
 * X.wcodec is shown as X.safetensors (provider_wcodec.c over the object)
 * unless an object X.safetensors sits beside it, which then wins, as in a
 * local mount; every other object, .qvq archives included, passes through
 * byte for byte. A name that is both an object and a directory (a key
 * "a" and a key "a/b") is shown as the directory. Keys ending in '/'
 * (the consoles' empty "folders") and parts that are empty, "." or ".."
 * are left out.
 *
 * A passed-through object is a tile source of 1 MiB chunks, each read by
 * one ranged GET into the shared tile cache: the daemon's readahead
 * (readahead=, tiles ahead of a sequential reader) keeps that many GETs in
 * flight for one reader, bounded by the cache's budget.
 *
 * Objects added or removed after mounting are not seen until the next
 * mount; an object replaced in place fails with EIO (its ETag no longer
 * matches: source_s3.c) instead of mixing two versions.
 */
#ifndef WCFS_BUCKET_H
#define WCFS_BUCKET_H

#include <stdint.h>
#include <string.h>

#include "core/wc_error.h"
#include "fuse/provider.h"

/* List the objects under uri ("s3://BUCKET/PREFIX"; PREFIX empty, or taken
 * as a directory: "s3://b/models" lists "models/...") and return the root
 * directory's vnode (WCFS_VDIR, owned by the caller; released with its
 * ops->release). ctx outlives every vnode of the tree. Errors: those of
 * wc_source_list (WC_E_IO naming the HTTP status: no such bucket, access
 * denied; WC_E_INVAL: a malformed address; WC_E_UNSUPPORTED: a build
 * without s3:// sources), WC_E_NOMEM. */
wc_err wcfs_bucket_open(const wcfs_provider_ctx *ctx, const char *uri, wcfs_vnode **root);

/* Whether name is an object store's address (s3://...), which the mount
 * takes as SOURCE instead of a directory. */
static inline int wcfs_is_bucket(const char *name) { return !strncmp(name, "s3://", 5); }

/* cache_size of a bucket's mount unless given (docs/wcodecfs.1): 128 MiB,
 * so the daemon stays well within 256 MiB while files are read. */
#define WCFS_BUCKET_CACHE_DEFAULT ((uint64_t)128 << 20)

/* Payload readers of a bucket's mount at least (the tile cache's
 * read_threads): GETs in flight at once for readers and readahead. */
#define WCFS_BUCKET_READERS 16u

#endif /* WCFS_BUCKET_H */
