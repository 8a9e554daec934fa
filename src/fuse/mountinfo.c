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

int wcfs_mount_at(const char *path, const char *mountpoint, wcfs_mount *out)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	char *line = NULL;
	size_t len = 0;
	int found = 0;
	while (getline(&line, &len, f) > 0) {
		line[strcspn(line, "\n")] = '\0';
		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER */
		char *save = NULL, *field[5] = { NULL };
		char *tok = strtok_r(line, " ", &save);
		for (int i = 0; i < 5 && tok; i++, tok = strtok_r(NULL, " ", &save))
			field[i] = tok;
		unsigned maj, min;
		if (!field[4] || sscanf(field[2], "%u:%u", &maj, &min) != 2)
			continue;
		while (tok && strcmp(tok, "-"))
			tok = strtok_r(NULL, " ", &save);
		char *type = tok ? strtok_r(NULL, " ", &save) : NULL;
		char *source = type ? strtok_r(NULL, " ", &save) : NULL;
		if (!type)
			continue;
		unescape(field[4]);
		if (strcmp(field[4], mountpoint))
			continue;
		/* the last match is the most recent mount: keep looking */
		found = 1;
		out->major = maj;
		out->minor = min;
		snprintf(out->fstype, sizeof out->fstype, "%s", type);
		if (source)
			unescape(source);
		snprintf(out->source, sizeof out->source, "%s", source ? source : "");
	}
	free(line);
	fclose(f);
	return found;
}
