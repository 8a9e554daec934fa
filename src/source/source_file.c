/* source_file.c - a local file as a wc_source (source.h): positioned reads
 * of a descriptor held under the process's descriptor budget. */
#include "source/source.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fd_budget.h"
#include "core/fileio.h"

struct wc_source {
	char *name;
	uint64_t size;
	wc_fd_slot fds;
};

wc_err wc_source_open_file(const char *path, wc_source **out)
{
	*out = NULL;
	wc_source *s = calloc(1, sizeof *s);
	if (!s || !(s->name = strdup(path))) {
		free(s);
		return wc_fail(WC_E_NOMEM, "out of memory");
	}
	int fd;
	wc_err e = wc_open_regular(path, &fd);
	if (e) {
		free(s->name);
		free(s);
		return e;
	}
	struct stat st;
	if (fstat(fd, &st) != 0) {
		e = wc_fail(WC_E_IO, "%s: %s", path, strerror(errno));
	} else {
		s->size = (uint64_t)st.st_size;
		e = wc_fd_slot_init(&s->fds, fd, path);
	}
	if (e) {
		close(fd);
		free(s->name);
		free(s);
		return e;
	}
	*out = s;
	return WC_OK;
}

wc_err wc_source_read(wc_source *s, void *buf, size_t len, uint64_t off, const char *what)
{
	if (off > s->size || len > s->size - off)
		return wc_fail(WC_E_RANGE, "%s: reading %s: bytes [%llu, %llu) past the end (%llu bytes)", s->name, what,
			       (unsigned long long)off, (unsigned long long)(off + len), (unsigned long long)s->size);
	int fd;
	wc_err e = wc_fd_slot_acquire(&s->fds, &fd);
	if (e)
		return e;
	e = wc_pread_full(fd, buf, len, off, what);
	wc_fd_slot_release(&s->fds);
	return e;
}

uint64_t wc_source_size(const wc_source *s) { return s->size; }
const char *wc_source_name(const wc_source *s) { return s->name; }

wc_err wc_source_set_path(wc_source *s, const char *path)
{
	return wc_fd_slot_set_path(&s->fds, path);
}

void wc_source_close(wc_source *s)
{
	if (!s)
		return;
	wc_fd_slot_destroy(&s->fds);
	free(s->name);
	free(s);
}
