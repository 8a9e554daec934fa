/*
 * stats.h - the daemon's counters in its log: at unmount, and whenever it
 * receives SIGUSR1 (`kill -USR1 PID`), so an operator can see what a
 * running mount does (reads served, cache hits and misses, decodes and
 * failed ones, the cache's bytes against its budget, the daemon's RSS)
 * without stopping it.
 *
 * SIGUSR1 is taken by sigwait() on a thread of its own: a signal handler
 * could not log (syslog and the cache's lock are not async-signal-safe).
 * So SIGUSR1 must be blocked in every thread, which it is when
 * wcfs_stats_block_signal() runs before the daemon makes any thread
 * (threads inherit their creator's signal mask).
 */
#ifndef WCFS_STATS_H
#define WCFS_STATS_H

#include "fuse/ops.h"

/* Log fs's counters (WC_LOG_INFO, two lines, each starting with `when`:
 * "unmount", "SIGUSR1"), and with -o stats=FILE write them to FILE as one
 * JSON object (keys in wcodecfs(1), SIGNALS), replacing it whole; a
 * failure to write is logged as a warning. Thread-safe. */
void wcfs_stats_log(wcfs_fs *fs, const char *when);

/* Block SIGUSR1 in the calling thread, before any other thread exists.
 * Returns 0 or an errno value. */
int wcfs_stats_block_signal(void);

/* Start the thread that logs fs's counters on each SIGUSR1; stop it (and
 * join it) before fs goes away. start returns 0 or an errno value (then the
 * signal is left blocked: it is ignored, and the daemon serves on). stop is
 * a no-op if start failed or was not called. */
int wcfs_stats_thread_start(wcfs_fs *fs);
void wcfs_stats_thread_stop(void);

#endif /* WCFS_STATS_H */
