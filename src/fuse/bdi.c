/* bdi.c - set read_ahead_kb of our mount (bdi.h). */
#include "fuse/bdi.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Mount points in mountinfo escape space, tab, newline and backslash as
 * \ooo (octal); compare the field with our path decoded. */
static int field_equals(const char *field, const char *path)
{
	while (*field && *path) {
		char c = *field;
		if (c == '\\' && field[1] >= '0' && field[1] <= '7' && field[2] && field[3]) {
			c = (char)((field[1] - '0') * 64 + (field[2] - '0') * 8 + (field[3] - '0'));
			field += 4;
		} else {
			field++;
		}
		if (c != *path++)
			return 0;
	}
	return !*field && !*path;
}

int wcfs_set_kernel_readahead(const char *mountpoint, uint64_t bytes)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return errno;
	char *line = NULL;
	size_t cap = 0;
	unsigned maj = 0, min = 0;
	int found = 0;
	while (getline(&line, &cap, f) > 0) {
		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [FIELDS...] - FSTYPE ... */
		unsigned a, b;
		char mp[4096];
		if (sscanf(line, "%*u %*u %u:%u %*s %4095s", &a, &b, mp) != 3)
			continue;
		const char *dash = strstr(line, " - ");
		if (!dash || strncmp(dash + 3, "fuse", 4) != 0 || !field_equals(mp, mountpoint))
			continue;
		maj = a; /* the last match is the most recent mount */
		min = b;
		found = 1;
	}
	free(line);
	fclose(f);
	if (!found)
		return ENOENT;
	char path[64];
	snprintf(path, sizeof path, "/sys/class/bdi/%u:%u/read_ahead_kb", maj, min);
	FILE *w = fopen(path, "we");
	if (!w)
		return errno;
	int ok = fprintf(w, "%llu\n", (unsigned long long)(bytes >> 10)) > 0;
	int err = fclose(w) != 0 || !ok ? (errno ? errno : EIO) : 0;
	return err;
}
