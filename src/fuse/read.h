/* read.h - the read path of wcodecfs: READ of a passed-through file from
 * its descriptor, of a virtual file from its provider's spans (read.c). */
#ifndef WCFS_READ_H
#define WCFS_READ_H

#include <sys/types.h>

#include "fuse/ops.h"

/* Answer a READ of size bytes at off from descriptor fd (spliced where the
 * kernel allows; no short read). */
void wcfs_read_passthrough(fuse_req_t req, int fd, size_t size, off_t off);

/* Answer a READ of size bytes at off of virtual file n: its spans located
 * once, the later tiles queued before the first is waited for, the reply
 * written from the decoded tiles; a failed tile or span is the read's
 * errno (wc_err_to_errno), logged with the file and tile. A sequential
 * stream has the tiles after it decoded ahead (prefetch.h). */
void wcfs_read_virtual(fuse_req_t req, wcfs_fs *fs, wcfs_node *n, size_t size, off_t off);

#endif /* WCFS_READ_H */
