/* size.c - byte sizes with units (size.h). */
#include "core/size.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>

int wc_parse_size(const char *s, uint64_t max, uint64_t *out)
{
	if (!s || !isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno)
		return -1;
	unsigned shift = 0;
	switch (tolower((unsigned char)*end)) {
	case 'k': shift = 10; break;
	case 'm': shift = 20; break;
	case 'g': shift = 30; break;
	case 't': shift = 40; break;
	default: break;
	}
	if (shift) {
		end++;
		if (tolower((unsigned char)*end) == 'i')
			end++;
	}
	if (tolower((unsigned char)*end) == 'b')
		end++;
	if (*end || v > (max >> shift))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}
