/*
 * daemon.h - detaching from the terminal with a readiness pipe.
 *
 * `wcodecfs SOURCE MNT` must return only when the mount is usable (so a
 * script can use MNT on the next line), or fail with a message and a
 * distinct exit status. The parent forks before any thread, GPU context or
 * decode pool exists (fork copies only the calling thread), then waits on a
 * pipe; the child starts everything, mounts, and writes one status record:
 * an exit status byte and, on failure, the message the parent prints.
 */
#ifndef WCFS_DAEMON_H
#define WCFS_DAEMON_H

/* Fork. In the parent: wait for the child's status record, print its
 * message, and _exit() with its status (WCFS_EXIT_MOUNT... if the child died
 * without one). In the child: start a new session, chdir("/"), and return 0.
 * Returns -1 if fork or pipe fail (errno set), in the calling process. */
int wcfs_daemonize(void);

/* Child (or foreground) side. wcfs_daemon_fail: report failure `status` with
 * a printf-style message (to the waiting parent, or to stderr in the
 * foreground). wcfs_daemon_ready: report success, then point stdin, stdout
 * and stderr at /dev/null and send wc_log and libfuse messages to syslog.
 * Both are no-ops for the parent pipe after the first report. */
void wcfs_daemon_fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void wcfs_daemon_ready(void);

/* -o log=FILE: from now on every message (the library's and libfuse's) is
 * appended to FILE, one line with the UTC time and the pid, instead of
 * stderr or, once detached, syslog (a container often has no syslog
 * socket). Returns 0 or an errno (the file cannot be opened). */
int wcfs_log_to_file(const char *path);

/* Tell systemd a state change ("READY=1", "STOPPING=1", "STATUS=..."), for
 * a Type=notify unit (sd_notify(3)); a no-op without NOTIFY_SOCKET or in a
 * build without libsystemd. */
void wcfs_notify(const char *state);

#endif /* WCFS_DAEMON_H */
