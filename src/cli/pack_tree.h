/* pack_tree.h - `wcodec pack DIR OUTDIR` (pack_tree.c). */
#ifndef WC_CLI_PACK_TREE_H
#define WC_CLI_PACK_TREE_H

#include "container/container.h"

typedef struct cli_pack_tree_opts {
	wc_pack_opts pack; /* for every file packed; progress is set per file */
	int quiet;         /* no progress bars, no per-file lines, no summary */
	int update;        /* skip outputs at least as new as their inputs */
	int json;          /* print a JSON report (wcodec(1), JSON OUTPUT) on standard output */
} cli_pack_tree_opts;

/* Mirror directory `in` into `out` (made if missing, with its parents; it
 * must not lie inside `in`): every *.safetensors file (or symlink to one) is packed to the same
 * relative path with the .wcodec suffix, every other regular file copied
 * with its mode and mtime, directories made, other symlinks made again with
 * the same target. Entries are visited in name order; the first failure
 * stops the run (outputs written so far are whole files). Returns CLI_OK,
 * or CLI_FAIL / CLI_USAGE after printing the reason. */
int cli_pack_tree(const char *in, const char *out, const cli_pack_tree_opts *o);

#endif /* WC_CLI_PACK_TREE_H */
