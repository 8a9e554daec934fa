/* lossy_select.h - which tensors `wcodec pack --lossy` stores lossy: the
 * wc_pack_opts.lossy_select callback over --lossy-include and
 * --lossy-exclude globs (fnmatch(3) on the tensor's name). */
#ifndef WC_CLI_LOSSY_SELECT_H
#define WC_CLI_LOSSY_SELECT_H

#include <stdint.h>

#define CLI_LOSSY_GLOBS 32
#define CLI_LOSSY_MIN_ELEMS 4096u /* smaller tensors stay lossless by default */

typedef struct cli_lossy {
	const char *include[CLI_LOSSY_GLOBS], *exclude[CLI_LOSSY_GLOBS];
	unsigned ninclude, nexclude;
} cli_lossy;

/* The wc_pack_opts.lossy_select callback (ctx: a cli_lossy). A tensor
 * matching an --lossy-include glob is taken; without include globs, one
 * of at least CLI_LOSSY_MIN_ELEMS elements whose name has no "embed" (an
 * embedding table) is; a tensor matching an --lossy-exclude glob never is.
 * The packer takes only F32, BF16 and F16 tensors of 2 or more dimensions. */
int cli_lossy_select(void *ctx, const char *name, const char *dtype, unsigned ndim, const uint64_t *shape);

#endif /* WC_CLI_LOSSY_SELECT_H */
