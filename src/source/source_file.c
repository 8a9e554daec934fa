/* source_file.c - a local file as a wc_source (source.h): positioned reads
 * of a descriptor held under the process's descriptor budget. */
#include "source/source_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fd_budget.h"
#include "core/fileio.h"

typedef struct file_source {
	struct wc_source base;
	wc_fd_slot fds;
} file_source;

static wc_err file_read(wc_source *s, void *buf, size_t len, uint64_t off, const char *what)
{
	file_source *f = (file_source *)s;
	int fd;
	wc_err e = wc_fd_slot_acquire(&f->fds, &fd);
	if (e)
		return e;
	e = wc_pread_full(fd, buf, len, off, what);
	wc_fd_slot_release(&f->fds);
	return e;
}

static wc_err file_set_path(wc_source *s, const char *path)
{
	return wc_fd_slot_set_path(&((file_source *)s)->fds, path);
}

static void file_close(wc_source *s)
{
	file_source *f = (file_source *)s;
	wc_fd_slot_destroy(&f->fds);
	free(s->name);
	free(f);
}

static const wc_source_ops file_ops = { .read = file_read, .set_path = file_set_path, .close = file_close };

wc_err wc_source_open_file(const char *path, wc_source **out)
{
	*out = NULL;
	file_source *f = calloc(1, sizeof *f);
	if (!f || !(f->base.name = strdup(path))) {
		free(f);
		return wc_fail(WC_E_NOMEM, "out of memory");
	}
	f->base.ops = &file_ops;
	int fd;
	wc_err e = wc_open_regular(path, &fd);
	if (e) {
		free(f->base.name);
		free(f);
		return e;
	}
	struct stat st;
	if (fstat(fd, &st) != 0) {
		e = wc_fail(WC_E_IO, "%s: %s", path, strerror(errno));
	} else {
		f->base.size = (uint64_t)st.st_size;
		e = wc_fd_slot_init(&f->fds, fd, path);
	}
	if (e) {
		close(fd);
		free(f->base.name);
		free(f);
		return e;
	}
	*out = &f->base;
	return WC_OK;
}
