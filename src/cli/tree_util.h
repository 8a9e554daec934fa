/* tree_util.h - what `pack DIR OUTDIR` and `unpack DIR OUTDIR` share
 * (tree_util.c). */
#ifndef WC_CLI_TREE_UTIL_H
#define WC_CLI_TREE_UTIL_H

#include <limits.h>
#include <sys/stat.h>

#include "core/wc_error.h"

/* Check that `in` is a directory, make `out` with any missing parents
 * (0777 less the umask), and refuse an `out` inside `in` (removing what
 * was made, so `in` is left as it was). On success the resolved `in`
 * (realpath) is in root_out and -1 is returned; otherwise the reason is
 * printed as "wcodec CMD: ..." and CLI_FAIL or CLI_USAGE returned. */
int cli_tree_prepare(const char *cmd, const char *in, const char *out, char root_out[PATH_MAX]);

/* Whether the symlink `link` has a relative target that resolves inside
 * root (a realpath): made again as a link in the mirror, it leads to the
 * same file there. */
int cli_link_inside(const char *root, const char *link);

/* Copy the regular file `in` (st: its lstat/stat) to `out` through a
 * temporary file and a rename, keeping mode and mtime. st_size bytes are
 * copied: a file that shrinks meanwhile is an error, not a short copy.
 * Errors: WC_E_IO naming the file, WC_E_NOMEM. */
wc_err cli_copy_file(const char *in, const char *out, const struct stat *st);

/* One entry of a walked directory: dir_in and dir_out the directories it
 * is in and goes to, name its name, in, out and rel its paths (rel: under
 * the walk's root). */
typedef wc_err (*cli_tree_entry_fn)(void *ctx, const char *dir_in, const char *dir_out, const char *name,
				    const char *in, const char *out, const char *rel);

/* Call fn for every entry of directory `in` but "." and "..", in name order
 * (cli_scandir), with out and rel extended by its name, stopping at the
 * first error. Errors: fn's, WC_E_IO (in unreadable), WC_E_NOMEM. */
wc_err cli_tree_walk(const char *in, const char *out, const char *rel, cli_tree_entry_fn fn, void *ctx);

/* Make the symlink out -> target again (an entry already at out is
 * replaced, never followed). Errors: WC_E_IO naming out. */
wc_err cli_relink(const char *target, const char *out);

#endif /* WC_CLI_TREE_UTIL_H */
