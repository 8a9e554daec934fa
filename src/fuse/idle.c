/* idle.c - unmount after -o idle_unmount=SECONDS without use (idle.h). */
#include "fuse/idle.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <time.h>

#include "core/wc_error.h"

static pthread_t idle_thread, loop_thread;
static bool idle_running;
static pthread_mutex_t idle_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle_wake;
static bool idle_stop;

static uint64_t now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec;
}

void wcfs_idle_touch(wcfs_fs *fs)
{
	atomic_store_explicit(&fs->last_request_s, now_s(), memory_order_relaxed);
}

static void *idle_main(void *arg)
{
	wcfs_fs *fs = arg;
	const uint64_t limit = fs->opt->idle_unmount;
	pthread_mutex_lock(&idle_lock);
	while (!idle_stop) {
		struct timespec t;
		clock_gettime(CLOCK_MONOTONIC, &t);
		t.tv_sec += 1;
		pthread_cond_timedwait(&idle_wake, &idle_lock, &t);
		if (idle_stop)
			break;
		uint64_t last = atomic_load_explicit(&fs->last_request_s, memory_order_relaxed);
		if (atomic_load(&fs->open_handles) == 0 && now_s() - last >= limit) {
			wc_log(WC_LOG_INFO, "idle for %llu s (idle_unmount): unmounting",
			       (unsigned long long)limit);
			pthread_kill(loop_thread, SIGTERM); /* as `kill -TERM` does: main.c */
			break;
		}
	}
	pthread_mutex_unlock(&idle_lock);
	return NULL;
}

int wcfs_idle_start(wcfs_fs *fs)
{
	if (!fs->opt->idle_unmount)
		return 0;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&idle_wake, &ca);
	pthread_condattr_destroy(&ca);
	wcfs_idle_touch(fs);
	loop_thread = pthread_self();
	idle_stop = false;
	int err = pthread_create(&idle_thread, NULL, idle_main, fs);
	idle_running = err == 0;
	if (err)
		pthread_cond_destroy(&idle_wake);
	return err;
}

void wcfs_idle_stop(void)
{
	if (!idle_running)
		return;
	pthread_mutex_lock(&idle_lock);
	idle_stop = true;
	pthread_cond_signal(&idle_wake);
	pthread_mutex_unlock(&idle_lock);
	pthread_join(idle_thread, NULL);
	pthread_cond_destroy(&idle_wake);
	idle_running = false;
}
