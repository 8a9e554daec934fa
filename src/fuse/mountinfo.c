/* mountinfo.c - find a mount in /proc/self/mountinfo (mountinfo.h). */
#include "fuse/mountinfo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Undo mountinfo's octal escapes in place (\ooo: three octal digits). */
static void unescape(char *s)
{
	char *o = s;
	for (const char *p = s; *p; o++) {
		if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' &&
		    p[3] >= '0' && p[3] <= '7') {
			*o = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
			p += 4;
		} else {
			*o = *p++;
		}
	}
	*o = '\0';
}

int wcfs_mounted_at(const char *path, const char *mountpoint, const char *fstype, char *src,
		    size_t cap)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	char *line = NULL;
	size_t len = 0;
	int found = 0;
	while (!found && getline(&line, &len, f) > 0) {
		line[strcspn(line, "\n")] = '\0';
		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER */
		char *save = NULL, *field[5] = { NULL };
		char *tok = strtok_r(line, " ", &save);
		for (int i = 0; i < 5 && tok; i++, tok = strtok_r(NULL, " ", &save))
			field[i] = tok;
		if (!field[4])
			continue;
		while (tok && strcmp(tok, "-"))
			tok = strtok_r(NULL, " ", &save);
		char *type = tok ? strtok_r(NULL, " ", &save) : NULL;
		char *source = type ? strtok_r(NULL, " ", &save) : NULL;
		if (!type)
			continue;
		unescape(field[4]);
		if (strcmp(field[4], mountpoint) || strcmp(type, fstype))
			continue;
		found = 1;
		if (src && cap) {
			if (source)
				unescape(source);
			snprintf(src, cap, "%s", source ? source : "");
		}
	}
	free(line);
	fclose(f);
	return found;
}
