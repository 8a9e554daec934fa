/* unpack_tree.c - `wcodec unpack DIR OUTDIR`: a packed directory made into
 * the tree wcodecfs shows for it, as files.
 *
 * The inverse of `pack DIR OUTDIR` (pack_tree.c), and the same mapping as
 * the mount's: every X.wcodec under DIR is unpacked to OUTDIR/X.safetensors
 * and every Y.qvq to directory OUTDIR/Y; a symlink named X.wcodec whose
 * target ends in .wcodec is made again as X.safetensors leading to the
 * target's .safetensors name (so a Hugging Face snapshot's links stay
 * links); other symlinks are made again as they are, other regular files
 * copied with mode and mtime, directories made. Outputs go through a
 * temporary file and a rename; directories are made without following a
 * link already in OUTDIR (cli_mkdir_here). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/tree_util.h"

typedef struct unpack_run {
	const cli_decode_opts *o;
	unsigned unpacked, copied, linked;
	uint64_t stored_bytes, copied_bytes;
} unpack_run;

static wc_err walk(unpack_run *r, const char *in, const char *out, const char *rel);

/* The path of name with f's suffix swapped for its unpacked suffix, in
 * directory dir; NULL if out of memory. */
static char *unpacked_name(const cli_format *f, const char *dir, const char *name)
{
	size_t stem = strlen(name) - strlen(f->suffix);
	size_t cap = strlen(dir) + stem + strlen(f->unpacked_suffix) + 2;
	char *p = malloc(cap);
	if (p)
		snprintf(p, cap, "%s/%.*s%s", dir, (int)stem, name, f->unpacked_suffix);
	return p;
}

/* A plain file that a container beside it unpacks over (X.safetensors
 * beside X.wcodec): the container's output wins, as in the mount. */
static int shadowed(const char *dir_in, const char *name)
{
	size_t n;
	const cli_format *fs = cli_formats(&n);
	for (size_t i = 0; i < n; i++) {
		const char *us = fs[i].unpacked_suffix;
		size_t k = strlen(name), u = strlen(us);
		if (k <= u || strcmp(name + k - u, us) != 0)
			continue;
		char sib[PATH_MAX];
		struct stat st;
		int w = snprintf(sib, sizeof sib, "%s/%.*s%s", dir_in, (int)(k - u), name, fs[i].suffix);
		if (w > 0 && (size_t)w < sizeof sib && lstat(sib, &st) == 0 && S_ISREG(st.st_mode))
			return 1;
	}
	return 0;
}

static wc_err relink(unpack_run *r, const char *in, const char *name, const char *out_dir, const char *out)
{
	char target[PATH_MAX];
	ssize_t n = readlink(in, target, sizeof target - 1);
	if (n < 0)
		return wc_fail(WC_E_IO, "%s: %s", in, strerror(errno));
	target[n] = '\0';
	const cli_format *f = cli_format_named(name);
	wc_err e;
	if (f && cli_ends_with(target, f->suffix)) {
		/* ../shared/m.wcodec becomes ../shared/m.safetensors, as the
		 * mount shows it. */
		size_t stem = strlen(target) - strlen(f->suffix);
		char vt[PATH_MAX];
		char *vout = unpacked_name(f, out_dir, name);
		snprintf(vt, sizeof vt, "%.*s%s", (int)stem, target, f->unpacked_suffix);
		e = vout ? cli_relink(vt, vout) : wc_fail(WC_E_NOMEM, "out of memory");
		free(vout);
	} else {
		e = cli_relink(target, out);
	}
	r->linked += !e;
	return e;
}

/* One directory entry: in/out are its paths, rel its path under DIR. */
static wc_err entry(unpack_run *r, const char *dir_in, const char *out_dir, const char *name, const char *in,
		    const char *out, const char *rel)
{
	struct stat st;
	if (lstat(in, &st) != 0)
		return wc_fail(WC_E_IO, "%s: %s", in, strerror(errno));
	if (S_ISLNK(st.st_mode))
		return relink(r, in, name, out_dir, out);
	if (S_ISDIR(st.st_mode)) {
		wc_err e = cli_mkdir_here(out, (st.st_mode & 07777) | 0700);
		return e ? e : walk(r, in, out, rel);
	}
	if (!S_ISREG(st.st_mode)) {
		fprintf(stderr, "wcodec unpack: %s: not a regular file, directory or symlink: skipped\n", in);
		return WC_OK;
	}
	const cli_format *f = cli_format_named(name);
	if (f && strlen(name) > strlen(f->suffix)) {
		char *vout = unpacked_name(f, out_dir, name);
		if (!vout)
			return wc_fail(WC_E_NOMEM, "out of memory");
		int rc = f->unpack(in, vout, r->o);
		free(vout);
		if (rc != CLI_OK) /* the reason is printed */
			return wc_fail(WC_E_IO, "%s: not unpacked", rel);
		r->unpacked++;
		r->stored_bytes += (uint64_t)st.st_size;
		if (!r->o->quiet)
			printf("%s: unpacked\n", rel);
		return WC_OK;
	}
	if (shadowed(dir_in, name)) {
		fprintf(stderr, "wcodec unpack: %s: skipped, the packed file beside it unpacks to the same name\n",
			in);
		return WC_OK;
	}
	wc_err e = cli_copy_file(in, out, &st);
	if (!e) {
		r->copied++;
		r->copied_bytes += (uint64_t)st.st_size;
	}
	return e;
}

static wc_err entry_of(void *ctx, const char *dir_in, const char *dir_out, const char *name, const char *in,
		       const char *out, const char *rel)
{
	return entry(ctx, dir_in, dir_out, name, in, out, rel);
}

static wc_err walk(unpack_run *r, const char *in, const char *out, const char *rel)
{
	return cli_tree_walk(in, out, rel, entry_of, r);
}

int cli_unpack_tree(const char *in, const char *out, const cli_decode_opts *o)
{
	char root[PATH_MAX];
	int rc = cli_tree_prepare("unpack", in, out, root);
	if (rc >= 0)
		return rc;
	unpack_run r = {.o = o};
	wc_err e = walk(&r, in, out, "");
	if (e)
		return cli_error(e, "unpack");
	if (!o->quiet) {
		char a[32], b[32];
		printf("%s -> %s: %u unpacked (%s packed), %u copied (%s), %u symlinks\n", in, out, r.unpacked,
		       cli_human_bytes(r.stored_bytes, a), r.copied, cli_human_bytes(r.copied_bytes, b), r.linked);
	}
	return CLI_OK;
}
