/*
 * idle.h - -o idle_unmount=SECONDS: the mount ends itself once no request
 * has come for that long and no file or directory is open, as squashfuse's
 * -o timeout= and autofs do, so an on-demand mount (a systemd automount, a
 * script) frees its memory and decode threads when nobody uses it.
 *
 * The operations mark each request (wcfs_idle_touch) and count open
 * handles; a thread looks once a second and, when idle, logs it and sends
 * SIGTERM to the thread running the session loop: the same clean path as
 * an operator's SIGTERM (exit status 0, counters logged, unmounted).
 */
#ifndef WCFS_IDLE_H
#define WCFS_IDLE_H

#include "fuse/ops.h"

/* Start watching fs (fs->opt->idle_unmount seconds; nothing if 0). Call
 * from the thread that then runs the session loop. Returns 0 or an errno
 * value (then the mount never unmounts itself). */
int wcfs_idle_start(wcfs_fs *fs);

/* Note a request now (every operation calls it; a relaxed atomic store). */
void wcfs_idle_touch(wcfs_fs *fs);

/* Stop the watcher and join it; a no-op if it was not started. */
void wcfs_idle_stop(void);

#endif /* WCFS_IDLE_H */
