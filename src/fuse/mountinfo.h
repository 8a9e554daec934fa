/*
 * mountinfo.h - what is mounted where, from /proc/self/mountinfo (the
 * format of proc(5), "/proc/pid/mountinfo"), so that wcodecfs can refuse to
 * stack a second mount of itself on a mountpoint: the second daemon would
 * hide the first, and one unmount would remove only the top one.
 */
#ifndef WCFS_MOUNTINFO_H
#define WCFS_MOUNTINFO_H

#include <stddef.h>

/* Whether the mountinfo file at `path` lists a mount of file system type
 * `fstype` (such as "fuse.wcodecfs") whose mount point is `mountpoint` (an
 * absolute, resolved path). The fields' octal escapes (\040 for a space,
 * \011, \012, \134) are undone before comparing. On a match the mount's
 * source goes into src (cap bytes with the NUL; cut if longer).
 * Returns 1 on a match, 0 if none, -1 if the file cannot be read. */
int wcfs_mounted_at(const char *path, const char *mountpoint, const char *fstype, char *src,
		    size_t cap);

#endif /* WCFS_MOUNTINFO_H */
