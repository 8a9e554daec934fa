/*
 * fd_budget.h - descriptors of files that are kept open only while the
 * process can spare them: a process-wide LRU of idle descriptors under a
 * limit, each closed when the limit needs it and opened again by path on
 * its next use, with the file's identity checked.
 *
 * A daemon that serves thousands of containers cannot hold a descriptor
 * for each (RLIMIT_NOFILE is often 1,024, or less in containers); the
 * kernel may keep its inodes, and so the open containers, for as long as
 * it likes. With a limit set (wc_fd_budget_set_limit; wcodecfs sets one
 * from RLIMIT_NOFILE) at most that many slots hold a descriptor while idle;
 * a slot in use (between acquire and release) keeps its descriptor, so
 * the count may exceed the limit while more than `limit` reads run at once.
 *
 * Reopening checks that the path still leads to the same file (device,
 * inode, size, mtime): a file replaced or rewritten meanwhile is an error,
 * never bytes of another file.
 */
#ifndef WC_FD_BUDGET_H
#define WC_FD_BUDGET_H

#include <stdbool.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "core/wc_error.h"

typedef struct wc_fd_slot {
	int fd;           /* -1 while closed */
	unsigned users;   /* acquired and not yet released */
	char *path;       /* where it is opened again */
	dev_t dev;        /* what it must still be then */
	ino_t ino;
	off_t size;
	struct timespec mtime;
	bool on_lru;      /* open and idle: may be closed */
	struct wc_fd_slot *prev, *next;
} wc_fd_slot;

/* At most `limit` idle slots keep their descriptor (0: no limit, the
 * default). Lowering it closes idle descriptors at once. Thread-safe. */
void wc_fd_budget_set_limit(unsigned limit);

/* Descriptors the slots hold now (for tests and statistics). */
unsigned wc_fd_budget_open(void);

/* Make s own the open descriptor fd of the file at path (which is
 * where it will be opened again; a /proc/self/fd path is useless for that
 * and gives an error then). Identity is taken from fstat(fd). The slot
 * starts idle. Errors: WC_E_IO (fstat), WC_E_NOMEM; fd is then not taken. */
wc_err wc_fd_slot_init(wc_fd_slot *s, int fd, const char *path);

/* Change the path the slot is opened again by. Errors: WC_E_NOMEM (the
 * old path is kept). */
wc_err wc_fd_slot_set_path(wc_fd_slot *s, const char *path);

/* The slot's descriptor in *fd, valid until wc_fd_slot_release: opened
 * again (O_RDONLY, O_CLOEXEC) if it was closed, closing the least recently
 * used idle slot's descriptor if the limit is reached. Errors: WC_E_IO
 * ("<path>: <strerror>", or "<path>: the file changed since it was
 * opened"). Thread-safe; every successful acquire needs one release. */
wc_err wc_fd_slot_acquire(wc_fd_slot *s, int *fd);
void wc_fd_slot_release(wc_fd_slot *s);

/* Close the slot's descriptor and free its path; no user may remain. */
void wc_fd_slot_destroy(wc_fd_slot *s);

#endif /* WC_FD_BUDGET_H */
