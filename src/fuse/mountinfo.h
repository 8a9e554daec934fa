/*
 * mountinfo.h - what is mounted where, from /proc/self/mountinfo (the
 * format of proc(5), "/proc/pid/mountinfo"): the device number of our own
 * mount, for its readahead (bdi.h), and whether a mountpoint already holds
 * a wcodecfs mount, which wcodecfs refuses to stack a second one on (the
 * second daemon would hide the first, and one unmount would remove only
 * the top one).
 */
#ifndef WCFS_MOUNTINFO_H
#define WCFS_MOUNTINFO_H

#include <limits.h>

typedef struct wcfs_mount {
	unsigned major, minor;   /* the mount's device number (MAJ:MIN) */
	char fstype[64];         /* such as "fuse.wcodecfs" (cut if longer) */
	char source[PATH_MAX];   /* the mount's source (cut if longer) */
} wcfs_mount;

/* The topmost mount (the last line listing it) whose mount point is
 * `mountpoint` (an absolute, resolved path) in the mountinfo file at
 * `path`, into *out. The fields' octal escapes (\040 for a space, \011,
 * \012, \134) are undone before comparing. Returns 1 if found, 0 if none,
 * -1 if the file cannot be read (errno set). */
int wcfs_mount_at(const char *path, const char *mountpoint, wcfs_mount *out);

#endif /* WCFS_MOUNTINFO_H */
