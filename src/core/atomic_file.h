/*
 * atomic_file.h - writing a file whole or not at all: the bytes go to a
 * temporary "OUT.tmp.XXXXXX" in OUT's directory (created O_CLOEXEC, mode
 * 0666 & ~umask), which commit fsyncs, renames over OUT and makes durable
 * (the directory fsynced); abort, or a failed commit, removes it. A reader
 * of OUT sees the old file or the whole new one, never part of either.
 * Every writer of the project's outputs goes through it (wcodec pack and
 * unpack, the .qvq writer).
 */
#ifndef WC_ATOMIC_FILE_H
#define WC_ATOMIC_FILE_H

#include "core/wc_error.h"

typedef struct wc_atomic_file {
	int fd;      /* write here; -1 after commit or abort */
	char *tmp;   /* the temporary's path (NULL after commit or abort) */
	char *final; /* OUT */
} wc_atomic_file;

/* Create the temporary for `out`. Errors: WC_E_IO (with the path and
 * strerror: a missing directory, no permission), WC_E_NOMEM. */
wc_err wc_atomic_create(wc_atomic_file *f, const char *out);

/* fsync, close and rename the temporary over OUT, then fsync OUT's
 * directory. Errors: WC_E_IO naming the step; the temporary is then gone
 * and OUT untouched. */
wc_err wc_atomic_commit(wc_atomic_file *f);

/* Close and remove the temporary; a no-op after commit or abort. */
void wc_atomic_abort(wc_atomic_file *f);

#endif /* WC_ATOMIC_FILE_H */
