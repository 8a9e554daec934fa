/* lossy_select.c - the tensors `wcodec pack --lossy` takes (lossy_select.h). */
#include "cli/lossy_select.h"

#include <fnmatch.h>
#include <string.h>

int cli_lossy_select(void *ctx, const char *name, const char *dtype, unsigned ndim, const uint64_t *shape)
{
	const cli_lossy *l = ctx;
	(void)dtype;
	for (unsigned k = 0; k < l->nexclude; k++)
		if (fnmatch(l->exclude[k], name, 0) == 0)
			return 0;
	for (unsigned k = 0; k < l->ninclude; k++)
		if (fnmatch(l->include[k], name, 0) == 0)
			return 1;
	if (l->ninclude)
		return 0;
	uint64_t n = 1;
	for (unsigned d = 0; d < ndim; d++)
		n *= shape[d];
	return n >= CLI_LOSSY_MIN_ELEMS && !strstr(name, "embed");
}
