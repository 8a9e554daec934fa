/* bdi.c - set read_ahead_kb of our mount (bdi.h). */
#include "fuse/bdi.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fuse/mountinfo.h"

int wcfs_set_kernel_readahead(const char *mountpoint, uint64_t bytes)
{
	/* our mount is the topmost one at its mount point */
	wcfs_mount m;
	int found = wcfs_mount_at("/proc/self/mountinfo", mountpoint, &m);
	if (found < 0)
		return errno;
	if (!found || strncmp(m.fstype, "fuse", 4) != 0)
		return ENOENT;
	char path[64];
	snprintf(path, sizeof path, "/sys/class/bdi/%u:%u/read_ahead_kb", m.major, m.minor);
	FILE *w = fopen(path, "we");
	if (!w)
		return errno;
	int ok = fprintf(w, "%llu\n", (unsigned long long)(bytes >> 10)) > 0;
	int err = fclose(w) != 0 || !ok ? (errno ? errno : EIO) : 0;
	return err;
}
