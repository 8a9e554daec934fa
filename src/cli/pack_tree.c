/* pack_tree.c - `wcodec pack DIR OUTDIR`: a model directory made into one that
 * wcodecfs mounts as the original.
 *
 * Every X.safetensors under DIR (recursively) is packed to OUTDIR/X.wcodec,
 * every other regular file is copied with its mode and mtime, directories
 * are made, and other symlinks are made again as they are, among them links
 * by relative names to files inside DIR (a Hugging Face snapshot's
 * config.json into its blobs). A symlink named X.safetensors to a regular
 * file counts as that file under the link's name, which is how the Hugging
 * Face cache's snapshot directories point into its blobs; such a target
 * inside DIR (a blob) is then not copied under its own name, which would
 * store the weights twice. A link to another X.safetensors inside
 * DIR, by a relative name, is made again as a link to its .wcodec. Each
 * output is written to a temporary file and renamed into place, so an
 * interrupted run leaves only whole files; --update skips outputs newer
 * than their inputs, so running again finishes the job. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "cli/cli.h"
#include "cli/pack_tree.h"
#include "cli/tree_util.h"
#include "container/container.h"
#include "core/fileio.h"

/* A file by identity. */
typedef struct file_id {
	dev_t dev;
	ino_t ino;
} file_id;

typedef struct tree_run {
	const cli_pack_tree_opts *o;
	const char *root;                   /* DIR, resolved (realpath) */
	unsigned packed, copied, current, linked, served;
	uint64_t in_bytes, out_bytes;       /* packed files */
	uint64_t copied_bytes;
	/* The files that symlinks named X.safetensors under DIR lead to,
	 * sorted: packed under the links' names, so not copied again under
	 * their own (the Hugging Face cache's blobs). */
	file_id *targets;
	size_t ntargets, cap;
	json_t *files; /* --json: a report per file packed */
	unsigned to_pack, seen; /* *.safetensors entries under DIR; of them met so far */
} tree_run;

static int cmp_id(const void *a, const void *b)
{
	const file_id *x = a, *y = b;
	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* Record the regular files that symlinks named *.safetensors under dir
 * lead to (directories walked without following links, as the pack walk
 * does). */
static wc_err collect_targets(tree_run *r, const char *dir)
{
	struct dirent **ents;
	int n = cli_scandir(dir, &ents);
	if (n < 0)
		return wc_fail(WC_E_IO, "%s: %s", dir, strerror(errno));
	wc_err e = WC_OK;
	for (int i = 0; i < n; i++) {
		const char *name = ents[i]->d_name;
		const unsigned char type = ents[i]->d_type;
		if (cli_ends_with(name, ".safetensors") && type != DT_DIR)
			r->to_pack++; /* the files the progress bar counts ("i/N") */
		/* Only directories and symlinks named *.safetensors matter: a
		 * regular file costs no lstat here (d_type says so). */
		const bool wanted = type == DT_DIR || type == DT_UNKNOWN ||
				    (type == DT_LNK && cli_ends_with(name, ".safetensors"));
		char *p = e || !wanted ? NULL : cli_path_join(dir, name);
		struct stat lst, st;
		if (!e && wanted && !p)
			e = wc_fail(WC_E_NOMEM, "out of memory");
		if (p && lstat(p, &lst) == 0) {
			if (S_ISDIR(lst.st_mode)) {
				e = collect_targets(r, p);
			} else if (S_ISLNK(lst.st_mode) && cli_ends_with(name, ".safetensors") &&
				   stat(p, &st) == 0 && S_ISREG(st.st_mode)) {
				if (r->ntargets == r->cap) {
					size_t cap = r->cap ? 2 * r->cap : 16;
					file_id *t = realloc(r->targets, cap * sizeof *t);
					if (!t)
						e = wc_fail(WC_E_NOMEM, "out of memory");
					else
						r->targets = t, r->cap = cap;
				}
				if (!e)
					r->targets[r->ntargets++] = (file_id){st.st_dev, st.st_ino};
			}
		}
		free(p);
		free(ents[i]);
	}
	free(ents);
	return e;
}

static int is_target(const tree_run *r, const struct stat *st)
{
	file_id k = {st->st_dev, st->st_ino};
	return r->ntargets && bsearch(&k, r->targets, r->ntargets, sizeof k, cmp_id);
}

/* out exists and is at least as new as in (by mtime). */
static int up_to_date(const char *out, const struct stat *in)
{
	struct stat st;
	if (stat(out, &st) != 0)
		return 0;
	return st.st_mtim.tv_sec > in->st_mtim.tv_sec ||
	       (st.st_mtim.tv_sec == in->st_mtim.tv_sec && st.st_mtim.tv_nsec >= in->st_mtim.tv_nsec);
}

static cli_progress file_progress;

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
	(void)ctx;
	cli_progress_update(&file_progress, done, total);
}

static wc_err pack_one(tree_run *r, const char *in, const char *out, const char *rel, const struct stat *st)
{
	r->seen++;
	if (r->o->update && up_to_date(out, st)) {
		r->current++;
		return WC_OK;
	}
	wc_pack_opts po = r->o->pack;
	po.progress = on_progress;
	char label[PATH_MAX + 32];
	snprintf(label, sizeof label, "%s (%u/%u)", rel, r->seen, r->to_pack);
	cli_progress_init(&file_progress, label, r->o->quiet);
	file_progress.bytes = 1;
	wc_pack_stats ps;
	wc_err e = wc_pack_safetensors(in, out, &po, &ps);
	cli_progress_done(&file_progress);
	if (e)
		return e;
	r->packed++;
	r->in_bytes += ps.input_bytes;
	r->out_bytes += ps.output_bytes;
	if (r->files) {
		json_t *f = cli_json_file(out, "wcodec", ps.input_bytes, ps.output_bytes);
		if (f && !json_object_set_new(f, "input", json_string(in)))
			json_array_append_new(r->files, f);
		else
			json_decref(f);
	}
	if (!r->o->quiet) {
		char a[32], b[32];
		printf("%s: %s -> %s (ratio %.3fx)\n", rel, cli_human_bytes(ps.input_bytes, a),
		       cli_human_bytes(ps.output_bytes, b),
		       cli_ratio(ps.input_bytes, ps.output_bytes));
	}
	return WC_OK;
}

static wc_err walk(tree_run *r, const char *in, const char *out, const char *rel);

/* Symlink `in` named X.safetensors: if its target is a relative name
 * ending in .safetensors of a regular file inside DIR, that file is packed
 * in this run too, so the link is made again as wout (X.wcodec) leading to
 * the target's .wcodec, which wcodecfs shows as a link to the target's
 * .safetensors: one container instead of two. Returns 1 when made. */
static int link_to_packed(tree_run *r, const char *in, const char *wout)
{
	char target[PATH_MAX], real[PATH_MAX];
	ssize_t k = readlink(in, target, sizeof target - 1);
	if (k <= 0 || target[0] == '/')
		return 0;
	target[k] = '\0';
	size_t rl = strlen(r->root);
	if (!cli_ends_with(target, ".safetensors") || !realpath(in, real) ||
	    strncmp(real, r->root, rl) != 0 || (real[rl] != '/' && rl > 1))
		return 0;
	char *wtarget = cli_derive_output(target, ".safetensors", ".wcodec", NULL);
	int made = wtarget && (unlink(wout) == 0 || errno == ENOENT) && symlink(wtarget, wout) == 0;
	free(wtarget);
	r->linked += made;
	return made; /* not made: packed as a file instead */
}

/* One directory entry: in/out are its paths, rel its path under DIR. */
static wc_err entry(tree_run *r, const char *dir_in, const char *name, const char *in, const char *out,
		    const char *rel)
{
	struct stat lst, st;
	if (lstat(in, &lst) != 0)
		return wc_fail(WC_E_IO, "%s: %s", in, strerror(errno));
	int link = S_ISLNK(lst.st_mode);
	if (link && (stat(in, &st) != 0 || !S_ISREG(st.st_mode) ||
		     (!cli_ends_with(name, ".safetensors") && cli_link_inside(r->root, in)))) {
		/* A link to a directory or to nothing: made again as it is (a
		 * directory link is not followed, so a loop cannot trap the walk);
		 * and a link to a file inside DIR that is not weights (a Hugging
		 * Face snapshot's config.json into its blobs), whose target is
		 * copied under its own name. */
		char target[PATH_MAX];
		ssize_t n = readlink(in, target, sizeof target - 1);
		if (n < 0)
			return wc_fail(WC_E_IO, "%s: %s", in, strerror(errno));
		target[n] = '\0';
		wc_err e = cli_relink(target, out);
		r->linked += !e;
		return e;
	}
	if (!link)
		st = lst;
	if (S_ISDIR(st.st_mode)) {
		wc_err e = cli_mkdir_here(out, (st.st_mode & 07777) | 0700);
		return e ? e : walk(r, in, out, rel);
	}
	if (!S_ISREG(st.st_mode)) {
		fprintf(stderr, "wcodec pack: %s: not a regular file, directory or symlink: skipped\n", in);
		return WC_OK;
	}
	if (cli_ends_with(name, ".safetensors")) {
		char *wout = cli_derive_output(out, ".safetensors", ".wcodec", NULL);
		if (!wout)
			return wc_fail(WC_E_NOMEM, "out of memory");
		wc_err e = link && link_to_packed(r, in, wout) ? WC_OK : pack_one(r, in, wout, rel, &st);
		free(wout);
		return e;
	}
	if (cli_ends_with(name, ".wcodec")) {
		/* X.wcodec beside X.safetensors would be overwritten by its packing. */
		size_t n = strlen(name);
		size_t cap = strlen(dir_in) + n + 16;
		char *sib = malloc(cap);
		if (!sib)
			return wc_fail(WC_E_NOMEM, "out of memory");
		snprintf(sib, cap, "%s/%.*s.safetensors", dir_in, (int)(n - strlen(".wcodec")), name);
		struct stat sst;
		int clash = stat(sib, &sst) == 0;
		free(sib);
		if (clash) {
			fprintf(stderr, "wcodec pack: %s: skipped, the .safetensors file beside it is packed "
				"to the same name\n", in);
			return WC_OK;
		}
	}
	if (!link && is_target(r, &st)) {
		/* Its bytes are served under a .safetensors link's name, packed;
		 * a copy here would store the weights twice. */
		r->served++;
		return WC_OK;
	}
	if (r->o->update && up_to_date(out, &st)) {
		r->current++;
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
	(void)dir_out;
	return entry(ctx, dir_in, name, in, out, rel);
}

static wc_err walk(tree_run *r, const char *in, const char *out, const char *rel)
{
	return cli_tree_walk(in, out, rel, entry_of, r);
}

int cli_pack_tree(const char *in, const char *out, const cli_pack_tree_opts *o)
{
	char rin[PATH_MAX];
	int rc = cli_tree_prepare("pack", in, out, rin);
	if (rc >= 0)
		return rc;

	tree_run r = {.o = o, .root = rin, .files = o->json ? json_array() : NULL};
	wc_err e = collect_targets(&r, in);
	if (!e && r.ntargets)
		qsort(r.targets, r.ntargets, sizeof *r.targets, cmp_id);
	if (!e)
		e = walk(&r, in, out, "");
	free(r.targets);
	if (e) {
		json_decref(r.files);
		return cli_error(e, "pack");
	}
	if (o->json) {
		json_t *doc = json_pack("{s:o, s:i, s:I, s:I, s:f, s:i, s:i, s:i}", "files", r.files, "packed",
					(int)r.packed, "decoded_bytes", (json_int_t)r.in_bytes, "file_bytes",
					(json_int_t)r.out_bytes, "ratio", cli_ratio(r.in_bytes, r.out_bytes), "copied",
					(int)r.copied, "up_to_date", (int)r.current, "symlinks", (int)r.linked);
		int rc = cli_json_print(doc);
		json_decref(doc);
		return rc;
	}
	if (!o->quiet) {
		char a[32], b[32], c[32], packed[128] = "";
		if (r.packed) /* no "ratio 0.000x" when nothing was packed */
			snprintf(packed, sizeof packed, " (%s -> %s, ratio %.3fx)", cli_human_bytes(r.in_bytes, a),
				 cli_human_bytes(r.out_bytes, b), cli_ratio(r.in_bytes, r.out_bytes));
		printf("%s -> %s: %u packed%s, %u copied (%s), %u up to date, %u symlinks\n", in, out, r.packed,
		       packed, r.copied, cli_human_bytes(r.copied_bytes, c), r.current, r.linked);
		if (r.served)
			printf("%u files reached through X.safetensors links were packed under the links' "
			       "names, not copied under their own\n", r.served);
	}
	return CLI_OK;
}
