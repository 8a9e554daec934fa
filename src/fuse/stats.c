/* stats.c - the daemon's counters in its log, at unmount and on SIGUSR1
 * (stats.h). */
#include "fuse/stats.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "core/wc_error.h"

/* VmRSS and VmHWM of this process in KiB, from /proc/self/status (0 where
 * unreadable). */
static void rss_kib(unsigned long long *rss, unsigned long long *hwm)
{
	*rss = *hwm = 0;
	FILE *f = fopen("/proc/self/status", "r");
	if (!f)
		return;
	char line[256];
	while (fgets(line, sizeof line, f)) {
		if (sscanf(line, "VmRSS: %llu", rss) == 1)
			continue;
		sscanf(line, "VmHWM: %llu", hwm);
	}
	fclose(f);
}

void wcfs_stats_log(wcfs_fs *fs, const char *when)
{
	const uint64_t reads = atomic_load(&fs->reads);
	unsigned long long rss, hwm;
	rss_kib(&rss, &hwm);
	wc_cache_stats s;
	wc_cache_get_stats(fs->cache, &s);
	char what[200] = "none";
	if (reads)
		snprintf(what, sizeof what, "%llu of %.0f KiB on average; %.1f ms from request to "
			 "reply written, %.1f ms of it writing replies", (unsigned long long)reads,
			 (double)atomic_load(&fs->read_bytes) / 1024.0 / (double)reads,
			 1e-6 * (double)atomic_load(&fs->read_ns), 1e-6 * (double)atomic_load(&fs->reply_ns));
	wc_log(WC_LOG_INFO, "%s: reads: %s; cache %.1f of %.0f MiB; daemon RSS %.1f MiB (peak %.1f)",
	       when, what, (double)s.bytes_cached / 1048576.0, (double)fs->opt->cache_size / 1048576.0,
	       (double)rss / 1024.0, (double)hwm / 1024.0);
	wc_log(WC_LOG_INFO,
	       "%s: cache: %llu hits, %llu misses (readers waited %.1f ms), %llu decodes (%llu failed), "
	       "%llu prefetches, %llu evictions, %llu batches of %llu tiles; dispatchers spent "
	       "%.1f ms reading payloads and %.1f ms in decode calls; %llu buffers allocated and %llu "
	       "freed in %.1f ms; %llu misses decoded by readers", when,
	       (unsigned long long)s.hits, (unsigned long long)s.misses, 1e-6 * (double)s.wait_ns,
	       (unsigned long long)s.decodes, (unsigned long long)s.decode_errors,
	       (unsigned long long)s.prefetches, (unsigned long long)s.evictions,
	       (unsigned long long)s.batches, (unsigned long long)s.batch_tiles, 1e-6 * (double)s.read_ns,
	       1e-6 * (double)s.decode_ns, (unsigned long long)s.buf_allocs,
	       (unsigned long long)s.buf_frees, 1e-6 * (double)s.buf_ns,
	       (unsigned long long)s.caller_decodes);
}

static pthread_t stats_thread;
static bool stats_running;
static atomic_bool stats_stop;

/* The set holding SIGUSR1 alone. */
static sigset_t usr1_set(void)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	return set;
}

int wcfs_stats_block_signal(void)
{
	sigset_t set = usr1_set();
	return pthread_sigmask(SIG_BLOCK, &set, NULL);
}

static void *stats_main(void *arg)
{
	wcfs_fs *fs = arg;
	sigset_t set = usr1_set();
	for (;;) {
		int sig;
		if (sigwait(&set, &sig) != 0)
			continue;
		if (atomic_load(&stats_stop))
			return NULL;
		wcfs_stats_log(fs, "SIGUSR1");
	}
}

int wcfs_stats_thread_start(wcfs_fs *fs)
{
	atomic_store(&stats_stop, false);
	int err = pthread_create(&stats_thread, NULL, stats_main, fs);
	stats_running = err == 0;
	return err;
}

void wcfs_stats_thread_stop(void)
{
	if (!stats_running)
		return;
	atomic_store(&stats_stop, true);
	/* SIGUSR1 to that thread alone, which wakes its sigwait() */
	pthread_kill(stats_thread, SIGUSR1);
	pthread_join(stats_thread, NULL);
	stats_running = false;
}
