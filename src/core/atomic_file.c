/* atomic_file.c - temporary file, fsync, rename (see atomic_file.h). */
#include "core/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void clear(wc_atomic_file *f)
{
	free(f->tmp);
	free(f->final);
	f->tmp = f->final = NULL;
	f->fd = -1;
}

wc_err wc_atomic_create(wc_atomic_file *f, const char *out)
{
	f->fd = -1;
	size_t n = strlen(out) + 16;
	f->tmp = malloc(n);
	f->final = strdup(out);
	if (!f->tmp || !f->final) {
		clear(f);
		return wc_fail(WC_E_NOMEM, "out of memory");
	}
	snprintf(f->tmp, n, "%s.tmp.XXXXXX", out);
	f->fd = mkostemp(f->tmp, O_CLOEXEC);
	if (f->fd < 0) {
		/* Name what the user named: OUT and, if that is what is wrong,
		 * its directory, not the temporary's random name. */
		int err = errno;
		char *slash = strrchr(f->tmp, '/');
		if (slash)
			*slash = '\0';
		const char *dir = !slash ? "." : slash == f->tmp ? "/" : f->tmp;
		wc_err e = err == ENOENT || err == ENOTDIR
				   ? wc_fail(WC_E_IO, "cannot create %s: no directory %s", out, dir)
				   : wc_fail(WC_E_IO, "cannot create %s (in %s): %s", out, dir, strerror(err));
		clear(f);
		return e;
	}
	/* mkostemp makes 0600; an output gets what open(2) would give it. */
	mode_t mask = umask(0);
	umask(mask);
	if (fchmod(f->fd, 0666 & ~mask) != 0) {
		wc_err e = wc_fail(WC_E_IO, "chmod %s: %s", f->tmp, strerror(errno));
		wc_atomic_abort(f);
		return e;
	}
	return WC_OK;
}

void wc_atomic_abort(wc_atomic_file *f)
{
	if (!f->tmp)
		return;
	if (f->fd >= 0)
		close(f->fd);
	unlink(f->tmp);
	clear(f);
}

wc_err wc_atomic_commit(wc_atomic_file *f)
{
	wc_err e = WC_OK;
	if (fsync(f->fd) != 0)
		e = wc_fail(WC_E_IO, "fsync %s: %s", f->tmp, strerror(errno));
	int rc = close(f->fd);
	f->fd = -1;
	if (!e && rc != 0)
		e = wc_fail(WC_E_IO, "closing %s: %s", f->tmp, strerror(errno));
	if (!e && rename(f->tmp, f->final) != 0)
		e = wc_fail(WC_E_IO, "renaming %s to %s: %s", f->tmp, f->final, strerror(errno));
	if (e) {
		wc_atomic_abort(f);
		return e;
	}
	/* The rename is durable once the directory is on disk too. */
	char *slash = strrchr(f->final, '/');
	const char *dir = slash ? (slash == f->final ? "/" : (*slash = '\0', f->final)) : ".";
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	clear(f);
	return WC_OK;
}
