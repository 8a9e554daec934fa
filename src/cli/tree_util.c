/* tree_util.c - preparing an output tree, copying files and links into it
 * (tree_util.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/tree_util.h"
#include "core/fileio.h"

/* mkdir -p: path and any missing parents (0777 less the umask). *made is
 * the length of the first prefix of path it made (0: none), for
 * unmake_p(). Returns 0, or -1 with errno. */
static int mkdir_p(const char *path, size_t *made)
{
	*made = 0;
	char *p = strdup(path);
	if (!p)
		return -1;
	int rc = 0;
	for (char *c = p + 1;; c++) {
		if (*c != '/' && *c != '\0')
			continue;
		char keep = *c;
		*c = '\0';
		if (mkdir(p, 0777) == 0) {
			if (!*made)
				*made = strlen(p);
		} else if (errno != EEXIST) {
			rc = -1;
			break;
		}
		*c = keep;
		if (!keep)
			break;
	}
	free(p);
	return rc;
}

/* Remove what mkdir_p(path) made (they are empty: nothing was written). */
static void unmake_p(const char *path, size_t made)
{
	char *p = made ? strdup(path) : NULL;
	while (p && strlen(p) >= made) {
		rmdir(p);
		char *slash = strrchr(p, '/');
		if (!slash)
			break;
		*slash = '\0';
	}
	free(p);
}

int cli_tree_prepare(const char *cmd, const char *in, const char *out, char root_out[PATH_MAX])
{
	struct stat st;
	if (stat(in, &st) != 0 || !S_ISDIR(st.st_mode))
		return cli_error(wc_fail(WC_E_IO, "%s: not a directory", in), cmd);
	size_t made;
	if (mkdir_p(out, &made) != 0)
		return cli_error(wc_fail(WC_E_IO, "%s: %s", out, strerror(errno)), cmd);
	char rout[PATH_MAX];
	if (!realpath(in, root_out))
		return cli_error(wc_fail(WC_E_IO, "%s: %s", in, strerror(errno)), cmd);
	if (!realpath(out, rout))
		return cli_error(wc_fail(WC_E_IO, "%s: %s", out, strerror(errno)), cmd);
	if (stat(rout, &st) != 0 || !S_ISDIR(st.st_mode))
		return cli_error(wc_fail(WC_E_IO, "%s: not a directory", out), cmd);
	size_t k = strlen(root_out);
	if (strncmp(rout, root_out, k) == 0 && (rout[k] == '\0' || rout[k] == '/' || k == 1)) {
		unmake_p(out, made); /* leave DIR as it was */
		return cli_usage_error(cmd, "OUTDIR '%s' lies inside DIR '%s'", out, in);
	}
	return -1;
}

int cli_link_inside(const char *root, const char *link)
{
	char target[PATH_MAX], real[PATH_MAX];
	ssize_t n = readlink(link, target, sizeof target - 1);
	if (n <= 0 || target[0] == '/' || !realpath(link, real))
		return 0;
	size_t k = strlen(root);
	return strncmp(real, root, k) == 0 && (real[k] == '/' || k == 1);
}

wc_err cli_copy_file(const char *in, const char *out, const struct stat *st)
{
	int fd;
	wc_err e = wc_open_regular(in, &fd);
	if (e)
		return e;
	cli_tmpfile t;
	e = cli_tmp_create(&t, out);
	if (e) {
		close(fd);
		return e;
	}
	enum { COPY_BLOCK = 1 << 20 };
	uint8_t *buf = malloc(COPY_BLOCK);
	if (!buf)
		e = wc_fail(WC_E_NOMEM, "out of memory");
	for (uint64_t off = 0, size = (uint64_t)st->st_size; !e && off < size;) {
		size_t k = size - off < COPY_BLOCK ? (size_t)(size - off) : COPY_BLOCK;
		if (!(e = wc_pread_full(fd, buf, k, off, in)))
			e = wc_pwrite_full(t.fd, buf, k, off, t.tmp);
		off += k;
	}
	free(buf);
	close(fd);
	if (!e) {
		struct timespec times[2] = {st->st_atim, st->st_mtim};
		if (fchmod(t.fd, st->st_mode & 07777) != 0 || futimens(t.fd, times) != 0)
			e = wc_fail(WC_E_IO, "%s: %s", t.tmp, strerror(errno));
	}
	if (e) {
		cli_tmp_abort(&t);
		return e;
	}
	return cli_tmp_commit(&t);
}

wc_err cli_relink(const char *target, const char *out)
{
	if (unlink(out) != 0 && errno != ENOENT)
		return wc_fail(WC_E_IO, "%s: %s", out, strerror(errno));
	if (symlink(target, out) != 0)
		return wc_fail(WC_E_IO, "%s: %s", out, strerror(errno));
	return WC_OK;
}

wc_err cli_tree_walk(const char *in, const char *out, const char *rel, cli_tree_entry_fn fn, void *ctx)
{
	struct dirent **ents;
	int n = cli_scandir(in, &ents);
	if (n < 0)
		return wc_fail(WC_E_IO, "%s: %s", in, strerror(errno));
	wc_err e = WC_OK;
	for (int i = 0; i < n; i++) {
		const char *name = ents[i]->d_name;
		char *pin = cli_path_join(in, name), *pout = cli_path_join(out, name);
		char *prel = *rel ? cli_path_join(rel, name) : strdup(name);
		if (!pin || !pout || !prel)
			e = e ? e : wc_fail(WC_E_NOMEM, "out of memory");
		else if (!e)
			e = fn(ctx, in, out, name, pin, pout, prel);
		free(pin);
		free(pout);
		free(prel);
		free(ents[i]);
	}
	free(ents);
	return e;
}
