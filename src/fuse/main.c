/*
 * main.c - wcodecfs: mount a read-only mirror of SOURCE in which .wcodec
 * containers appear as the safetensors files they were packed from.
 *
 * Order matters: parse and check arguments, fork (daemonize) while the
 * process has one thread, then create the decode backend (threads, maybe a
 * GPU context) and the cache, mount, report readiness, serve.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "container/container.h"
#include "core/fd_budget.h"
#include "core/version.h"
#include "engine/backend.h"
#include "fuse/bucket.h"
#include "fuse/daemon.h"
#include "fuse/idle.h"
#include "fuse/mountinfo.h"
#include "fuse/ops.h"
#include "fuse/options.h"
#include "fuse/prefetch.h"
#include "fuse/stats.h"

/* Block (how SIG_BLOCK) or unblock the signals whose libfuse handlers end
 * the loop: SIGHUP, SIGINT, SIGTERM. A handler ends the loop only when it
 * runs in the thread the loop waits in, the main one (libfuse blocks them
 * in its own workers); run in a decode or cache thread, it would leave the
 * daemon serving until the next request. So they are blocked before the
 * daemon makes any thread, which inherits the block, and unblocked in the
 * main thread alone just before the loop (a signal sent meanwhile waits). */
static int stop_signals(int how)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	return pthread_sigmask(how, &set, NULL);
}

/* libfuse installs its handlers only over the default disposition, and a
 * shell starts a program run with & with SIGINT ignored (nohup: SIGHUP),
 * which would leave the documented SIGINT and SIGHUP unmount inert. So
 * SIGINT and SIGTERM start from the default; so does SIGHUP for a daemon,
 * which has no terminal to hang up (daemon(7)), while in the foreground
 * an ignored SIGHUP (nohup) is kept. */
static void default_stop_dispositions(int daemon)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = SIG_DFL;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (daemon)
		sigaction(SIGHUP, &sa, NULL);
}

/* Every directory and container the kernel has looked up holds an O_PATH
 * descriptor while the limit allows (past a cap they are found again by
 * name, which is slower; vtree.h): allow as many as the system does
 * (fs.nr_open, when privileged enough to raise the hard limit), else up to
 * the hard limit. The limit is logged at debug level. Returns it (0 if
 * unlimited or unknown). */
static uint64_t raise_fd_limit(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return 0;
	unsigned long long nr_open = 0;
	FILE *f = fopen("/proc/sys/fs/nr_open", "r");
	if (f) {
		if (fscanf(f, "%llu", &nr_open) != 1)
			nr_open = 0;
		fclose(f);
	}
	struct rlimit all = { .rlim_cur = (rlim_t)nr_open, .rlim_max = (rlim_t)nr_open };
	if (nr_open > rl.rlim_max && setrlimit(RLIMIT_NOFILE, &all) == 0) {
		rl = all;
	} else if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			getrlimit(RLIMIT_NOFILE, &rl);
	}
	wc_log(WC_LOG_DEBUG, "descriptor limit %llu (one per directory and container the kernel holds)",
	       (unsigned long long)rl.rlim_cur);
	return rl.rlim_cur == RLIM_INFINITY ? 0 : (uint64_t)rl.rlim_cur;
}

int main(int argc, char **argv)
{
	wcfs_options o;
	int rc = wcfs_options_parse(argc, argv, &o);
	if (rc != WCFS_EXIT_OK) {
		wcfs_options_free(&o);
		return rc;
	}
	if (o.show_help) {
		wcfs_options_usage(argv[0]);
		wcfs_options_free(&o);
		return 0;
	}
	if (o.show_version) {
		char plugin[4096];
		wc_err pe = wc_backend_plugin_probe(plugin, sizeof plugin);
		printf("wcodecfs %s (libfuse %s)\n", PACKAGE_VERSION, fuse_pkgversion());
		printf("libraries:   %s\n", wc_library_versions());
		printf("CPU:         %s\n", wc_cpu_level());
		printf("CUDA plugin: %s%s%s\n", pe ? "none (" : plugin, pe ? wc_last_detail() : " (loads)",
		       pe ? ")" : "");
#ifdef WC_SYSTEMD
		printf("systemd:     sd_notify readiness (Type=notify)\n");
#else
		printf("systemd:     none (built without libsystemd)\n");
#endif
		wcfs_options_free(&o);
		return 0;
	}
	wc_log_set_level(o.log_level);
	wc_log_set_program("wcodecfs"); /* until the daemon logs to syslog */

	/* Check SOURCE and MOUNTPOINT here, where the user sees the message.
	 * A bucket's mount shows its tree with the attributes (owner, mode
	 * less write bits, times) of the mountpoint's own directory, held open
	 * from before the mount covers it. */
	const int bucket = wcfs_is_bucket(o.source);
	int root_fd = open(bucket ? o.mountpoint : o.source, O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct stat root_st;
	if (bucket && (root_fd < 0 || fstat(root_fd, &root_st) != 0)) {
		fprintf(stderr, "wcodecfs: mountpoint '%s': %s\n", o.mountpoint, strerror(errno));
		if (root_fd >= 0)
			close(root_fd);
		wcfs_options_free(&o);
		return WCFS_EXIT_MOUNT;
	}
	if (!bucket && (root_fd < 0 || fstat(root_fd, &root_st) != 0 ||
			access(o.source, R_OK | X_OK) != 0)) {
		fprintf(stderr, "wcodecfs: source '%s': %s\n", o.source, strerror(errno));
		wcfs_options_free(&o);
		return WCFS_EXIT_SOURCE;
	}
	struct stat mst;
	const int mst_err = stat(o.mountpoint, &mst) != 0 ? errno : 0;
	if (mst_err || !S_ISDIR(mst.st_mode)) {
		char hint[PATH_MAX + 96] = "";
		if (mst_err == ENOTCONN)
			snprintf(hint, sizeof hint, " (a mount whose daemon has died: unmount it with "
				 "'fusermount3 -u %s' first)", o.mountpoint);
		fprintf(stderr, "wcodecfs: mountpoint '%s': %s%s\n", o.mountpoint,
			mst_err ? strerror(mst_err) : "not a directory", hint);
		close(root_fd);
		wcfs_options_free(&o);
		return WCFS_EXIT_MOUNT;
	}
	char *mnt = realpath(o.mountpoint, NULL);
	if (!mnt) {
		fprintf(stderr, "wcodecfs: mountpoint '%s': %s\n", o.mountpoint, strerror(errno));
		close(root_fd);
		wcfs_options_free(&o);
		return WCFS_EXIT_MOUNT;
	}
	free(o.mountpoint);
	o.mountpoint = mnt;
	/* A second wcodecfs on the same mountpoint would hide the first, and
	 * one unmount would then remove only the top one. */
	wcfs_mount prev;
	if (wcfs_mount_at("/proc/self/mountinfo", mnt, &prev) == 1 &&
	    !strcmp(prev.fstype, "fuse.wcodecfs")) {
		fprintf(stderr, "wcodecfs: mountpoint '%s' already has a wcodecfs mount (of %s); "
				"unmount it first with 'fusermount3 -u %s'\n", mnt, prev.source, mnt);
		close(root_fd);
		wcfs_options_free(&o);
		return WCFS_EXIT_MOUNT;
	}
	const uint64_t fd_limit = raise_fd_limit();
	/* Open containers keep their descriptors while idle up to an eighth
	 * of the limit (at least 16, at most 4096); beyond, the least recently
	 * used are closed and opened again on their next read
	 * (core/fd_budget.h). The inode table keeps a quarter free (vtree.c). */
	if (fd_limit) {
		uint64_t idle = fd_limit / 8;
		wc_fd_budget_set_limit((unsigned)(idle < 16 ? 16 : idle > 4096 ? 4096 : idle));
	}
	const uint64_t mem = o.memory_limit;
	if (mem && o.cache_size > mem / 2)
		wc_log(WC_LOG_WARN, "cache_size=%llu MiB is more than half of the %llu MiB of memory "
		       "this process may use: a cache that fills up may get the daemon killed",
		       (unsigned long long)(o.cache_size >> 20), (unsigned long long)(mem >> 20));

	if (o.log_file) {
		int lerr = wcfs_log_to_file(o.log_file);
		if (lerr) {
			fprintf(stderr, "wcodecfs: log=%s: %s\n", o.log_file, strerror(lerr));
			close(root_fd);
			wcfs_options_free(&o);
			return WCFS_EXIT_USAGE;
		}
	}
	/* libfuse checks its mount options here, before anything starts, so a
	 * mistyped -o option is the first and only thing the user is told. */
	wcfs_fs fs = { .opt = &o, .timeout = o.timeout, .readahead = o.readahead, .prefetch_on_open = bucket };
	/* A bucket is listed now, before the mount, so a wrong address or
	 * credential is told to the user and nothing is mounted. */
	wcfs_vnode *bucket_root = NULL;
	if (bucket) {
		wc_err be = wcfs_bucket_open(&fs.vt.pctx, o.source, &bucket_root);
		if (be != WC_OK) {
			fprintf(stderr, "wcodecfs: source '%s': %s%s%s\n", o.source, wc_strerror(be),
				*wc_last_detail() ? ": " : "", wc_last_detail());
			close(root_fd);
			wcfs_options_free(&o);
			return WCFS_EXIT_SOURCE;
		}
	}
	atomic_init(&fs.bdi_pending, o.kernel_readahead != 0);
	atomic_init(&fs.reads, 0);
	atomic_init(&fs.read_bytes, 0);
	atomic_init(&fs.read_ns, 0);
	atomic_init(&fs.reply_ns, 0);
	atomic_init(&fs.last_request_s, 0);
	atomic_init(&fs.open_handles, 0);
	pthread_mutex_init(&fs.handles_lock, NULL);
	struct fuse_session *se = fuse_session_new(&o.fuse_args, &wcfs_ll_ops, sizeof wcfs_ll_ops, &fs);
	if (!se) {
		/* libfuse printed which option it rejected */
		fprintf(stderr, "wcodecfs: bad mount options (see wcodecfs --help)\n");
		if (bucket_root)
			bucket_root->ops->release(bucket_root);
		close(root_fd);
		wcfs_options_free(&o);
		return WCFS_EXIT_USAGE;
	}

	if (!o.foreground && wcfs_daemonize() != 0) {
		fprintf(stderr, "wcodecfs: cannot fork: %s\n", strerror(errno));
		fuse_session_destroy(se);
		if (bucket_root)
			bucket_root->ops->release(bucket_root);
		close(root_fd);
		wcfs_options_free(&o);
		return WCFS_EXIT_RUNTIME;
	}

	/* From here on: the daemon (or the foreground process). SIGUSR1 is
	 * blocked before any thread exists, so only the stats thread takes it
	 * (stats.h). */
	if (wcfs_stats_block_signal() != 0)
		wc_log(WC_LOG_WARN, "cannot block SIGUSR1: it will end the daemon");
	default_stop_dispositions(!o.foreground);
	int merr = stop_signals(SIG_BLOCK);
	if (merr != 0)
		wc_log(WC_LOG_WARN, "cannot keep SIGTERM from the daemon's threads: %s", strerror(merr));
	rc = WCFS_EXIT_BACKEND;
	wc_backend_opts bo = { .threads = o.threads, .gpu = o.gpu, .gpu_memory_limit = o.gpu_memory };
	wc_err e = wc_backend_create(o.backend, &bo, &fs.backend);
	if (e != WC_OK) {
		wcfs_daemon_fail(rc, "decode backend '%s': %s%s%s", o.backend, wc_strerror(e),
				 *wc_last_detail() ? ": " : "", wc_last_detail());
		goto out_session;
	}
	/* One-time costs of the backend's first decode calls, paid now rather
	 * than by the first reads (backend.h). */
	if (wc_backend_warm_up(fs.backend, fs.backend->concurrency) != WC_OK)
		wc_log(WC_LOG_WARN, "%s backend: %s", fs.backend->ops->name, wc_last_detail());
	o.readahead = wcfs_readahead_default(&o, fs.backend);
	fs.readahead = o.readahead;
	wc_cache_opts co = { .budget_bytes = o.cache_size, .backend = fs.backend,
			     /* in flight: 2 * readahead tiles' worth of bytes (of
			      * the default 1 MiB tile), in up to 16 times as many
			      * tiles, so a stream through small tiles has as many
			      * bytes decoded ahead as one through large ones */
			     .max_prefetch = o.readahead ? 32 * o.readahead : 1,
			     .max_prefetch_bytes = o.readahead ? 2ull * o.readahead * WC_TILE_SIZE_DEFAULT : 0,
			     /* as many payload readers as dispatchers: the CPU
			      * backend read 4 streams 14% faster on 16 cores
			      * (docs/BENCHMARKS.md, "GPU backend through the mount");
			      * from a bucket, where a read waits on the network
			      * rather than a CPU, WCFS_BUCKET_READERS at least */
			     .read_threads = bucket && fs.backend->concurrency < WCFS_BUCKET_READERS
						     ? WCFS_BUCKET_READERS : fs.backend->concurrency,
			     /* page-locked buffers for the default tile size, made
			      * before the first read rather than during it */
			     .prefill_tile_bytes = WC_TILE_SIZE_DEFAULT,
			     .decode_misses_on_caller = fs.backend->reader_decodes_misses };
	e = wc_cache_create(&co, &fs.cache);
	if (e != WC_OK) {
		wcfs_daemon_fail(rc, "tile cache of %llu bytes: %s%s%s",
				 (unsigned long long)o.cache_size, wc_strerror(e),
				 *wc_last_detail() ? ": " : "", wc_last_detail());
		goto out_session;
	}
	fs.vt.pctx.cache = fs.cache;
	fs.vt.pctx.source = o.source;
	fs.vt.pctx.root_fd = root_fd; /* the inode table's root keeps it open */
	wcfs_vtree_set_fd_limit(&fs.vt, fd_limit);
	fs.vt.itable = wcfs_itable_create(root_fd, &root_st);
	if (!fs.vt.itable) {
		close(root_fd);
		wcfs_daemon_fail(WCFS_EXIT_RUNTIME, "out of memory");
		goto out_session;
	}
	root_fd = -1;
	if (bucket_root)
		wcfs_itable_set_root_vnode(fs.vt.itable, bucket_root);
	bucket_root = NULL; /* the table's now */

	int herr = bucket ? 0 : wcfs_vtree_hide_mountpoint(&fs.vt, o.mountpoint);
	if (herr)
		wc_log(WC_LOG_DEBUG, "mountpoint %s not resolved: %s", o.mountpoint, strerror(herr));
	else if (fs.vt.mnt_name[0])
		wc_log(WC_LOG_DEBUG, "entry '%s' of the mountpoint's directory is hidden if SOURCE "
		       "shows it", fs.vt.mnt_name);

	rc = WCFS_EXIT_MOUNT;
	if (fuse_set_signal_handlers(se) != 0) {
		wcfs_daemon_fail(WCFS_EXIT_RUNTIME, "cannot install signal handlers");
		rc = WCFS_EXIT_RUNTIME;
		goto out_session;
	}
	if (fuse_session_mount(se, o.mountpoint) != 0) {
		wcfs_daemon_fail(rc, "cannot mount on '%s' (see the message above)", o.mountpoint);
		goto out_signals;
	}
	wcfs_daemon_ready(); /* detached: the log goes to syslog (or log=FILE) from here on */
	int serr = wcfs_stats_thread_start(&fs);
	if (serr != 0)
		wc_log(WC_LOG_WARN, "no statistics on SIGUSR1: %s", strerror(serr));
	if ((serr = wcfs_idle_start(&fs)) != 0)
		wc_log(WC_LOG_WARN, "idle_unmount: cannot watch for idleness: %s", strerror(serr));
	wc_log(WC_LOG_INFO, "mounted %s on %s: backend %s, cache %llu MiB, %u decode threads, "
	       "readahead %u tiles", o.source, o.mountpoint, fs.backend->ops->name,
	       (unsigned long long)(o.cache_size >> 20), o.threads, o.readahead);
	{
		char state[PATH_MAX * 2 + 64];
		snprintf(state, sizeof state, "READY=1\nSTATUS=serving %s on %s", o.source, o.mountpoint);
		wcfs_notify(state);
	}

	int loop;
	stop_signals(SIG_UNBLOCK);
	if (o.singlethread) {
		loop = fuse_session_loop(se);
	} else {
		struct fuse_loop_config *cfg = fuse_loop_cfg_create();
		fuse_loop_cfg_set_max_threads(cfg, o.fuse_threads);
		fuse_loop_cfg_set_idle_threads(cfg, o.fuse_threads);
		loop = fuse_session_loop_mt(se, cfg);
		fuse_loop_cfg_destroy(cfg);
	}
	/* libfuse's signal handlers end the loop with the signal's number (and
	 * its multithreaded loop resets the exited flag): a stop, not a failure. */
	rc = loop == 0 || loop == SIGTERM || loop == SIGINT || loop == SIGHUP || fuse_session_exited(se)
		     ? WCFS_EXIT_OK
		     : WCFS_EXIT_RUNTIME;
	wcfs_idle_stop();
	wcfs_stats_thread_stop();
	if (fs.cache)
		wcfs_stats_log(&fs, "unmount");
	wc_log(WC_LOG_INFO, "unmounting %s", o.mountpoint);
	wcfs_notify("STOPPING=1");
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	if (bucket_root)
		bucket_root->ops->release(bucket_root);
	fuse_session_destroy(se);
	wcfs_handles_free(&fs);
	wcfs_itable_destroy(fs.vt.itable);
	if (fs.cache)
		wc_cache_destroy(fs.cache);
	if (fs.backend)
		wc_backend_destroy(fs.backend);
	if (root_fd >= 0)
		close(root_fd);
	wcfs_options_free(&o);
	return rc;
}
