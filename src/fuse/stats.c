/* stats.c - the daemon's counters in its log (and -o stats=FILE), at
 * unmount and on SIGUSR1 (stats.h). */
#include "fuse/stats.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "core/atomic_file.h"
#include "core/fileio.h"
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

/* The counters written to -o stats=FILE: one JSON object, replaced whole
 * (wc_atomic_file), so a reader never sees half of it. Keys: wcodecfs(1),
 * SIGNALS. */
static void stats_write_json(const wcfs_fs *fs, const char *when, const wc_cache_stats *s,
			     unsigned long long rss, unsigned long long hwm)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	json_t *o = json_pack("{s:s, s:I, s:s, s:s, s:s, s:I, s:I, s:f, s:f, s:I, s:I, s:I, s:I}",
			      "when", when, "time", (json_int_t)now.tv_sec, "source", fs->opt->source,
			      "mountpoint", fs->opt->mountpoint, "backend", fs->backend->ops->name,
			      "reads", (json_int_t)atomic_load(&fs->reads),
			      "read_bytes", (json_int_t)atomic_load(&fs->read_bytes),
			      "read_ms", 1e-6 * (double)atomic_load(&fs->read_ns),
			      "reply_ms", 1e-6 * (double)atomic_load(&fs->reply_ns),
			      "cache_bytes", (json_int_t)s->bytes_cached, "cache_size", (json_int_t)fs->opt->cache_size,
			      "rss_bytes", (json_int_t)(rss * 1024), "peak_rss_bytes", (json_int_t)(hwm * 1024));
	json_t *c = json_pack("{s:I, s:I, s:f, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "hits", (json_int_t)s->hits,
			      "misses", (json_int_t)s->misses, "wait_ms", 1e-6 * (double)s->wait_ns,
			      "decodes", (json_int_t)s->decodes, "decode_errors", (json_int_t)s->decode_errors,
			      "prefetches", (json_int_t)s->prefetches, "evictions", (json_int_t)s->evictions,
			      "batches", (json_int_t)s->batches, "batch_tiles", (json_int_t)s->batch_tiles,
			      "caller_decodes", (json_int_t)s->caller_decodes);
	char *text = NULL;
	if (o && c && json_object_set_new(o, "cache", c) == 0) {
		c = NULL;
		text = json_dumps(o, JSON_INDENT(2));
	}
	json_decref(c);
	json_decref(o);
	wc_atomic_file f;
	wc_err e = text ? wc_atomic_create(&f, fs->opt->stats_file) : wc_fail(WC_E_NOMEM, "out of memory");
	if (!e) {
		size_t n = strlen(text);
		text[n] = '\n'; /* json_dumps' terminator, now the last line's end */
		e = wc_pwrite_full(f.fd, text, n + 1, 0, f.tmp);
		if (e)
			wc_atomic_abort(&f);
		else
			e = wc_atomic_commit(&f);
	}
	if (e)
		wc_log(WC_LOG_WARN, "stats=%s: %s", fs->opt->stats_file, wc_last_detail());
	free(text);
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
	if (fs->opt->stats_file)
		stats_write_json(fs, when, &s, rss, hwm);
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
