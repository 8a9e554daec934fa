/*
 * options.h - the wcodecfs command line: `wcodecfs SOURCE MOUNTPOINT [-f]
 * [-d] [-s] [-o OPT[,OPT...]]`. Our own -o options are consumed here; every
 * other -o option (allow_other, fsname=..., ...) goes on to libfuse.
 */
#ifndef WCFS_OPTIONS_H
#define WCFS_OPTIONS_H

#include <stdint.h>
#include <sys/stat.h>

#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 312 /* libfuse 3.12 API: fuse_loop_cfg_* */
#endif
#include <fuse_lowlevel.h>

typedef struct wcfs_options {
	char *source;        /* absolute path of SOURCE (realpath) */
	char *mountpoint;    /* MOUNTPOINT as given */
	uint64_t memory_limit; /* bytes this process may use (wc_memory_limit(), read once
				* here for the default and the daemon's warning); 0 = unknown */
	uint64_t cache_size; /* decoded-tile cache budget, bytes (default 1 GiB, or a quarter
			      * of memory_limit if that is less) */
	unsigned threads;    /* CPU decode threads (default: wc_cpu_count(), the usable CPUs) */
	unsigned fuse_threads; /* FUSE worker threads at most (default max(2*threads, 4)) */
	char *backend;       /* "auto" (default), "cpu", "cuda" */
	int gpu;             /* CUDA device ordinal (default 0) */
	uint64_t gpu_memory; /* device bytes the CUDA backend may hold; 0 = its default */
	unsigned readahead;  /* tiles decoded ahead of a sequential reader; 0 = off (default 8, or
	                      * threads if larger; 16 on the cuda backend) */
	int readahead_given; /* readahead= was on the command line */
	uint64_t kernel_readahead; /* bytes: the mount's read_ahead_kb, so page-cache reads
				    * arrive as requests this large (default 1 MiB; 0 = the
				    * kernel's 128 KiB) */
	unsigned max_background; /* the kernel's limit on this connection's async requests
				  * (readahead reads); default 64; 0 = the kernel's 12 */
	double timeout;      /* kernel attribute/entry cache timeout, seconds (default 1) */
	int log_level;       /* WC_LOG_ERR..WC_LOG_DEBUG (default info) */
	int foreground;      /* -f */
	int debug;           /* -d / -o debug: libfuse request trace, log_level debug */
	int singlethread;    /* -s */
	int rw;              /* -o rw: do not pass ro to the kernel (writes still fail EROFS) */
	int direct_io;       /* -o direct_io: read() of decoded files bypasses the page cache */
	/* -o uid=N, gid=N: every entry's owner (default: the source's), and
	 * allow_other so those users can reach them; -o umask=OOO: permission
	 * bits cleared from every entry (default 0). No entry shows write bits
	 * (writes fail with EROFS). */
	unsigned uid, gid, umask;
	int uid_given, gid_given;
	char *log_file;      /* -o log=FILE: messages appended there (daemon.h) */
	char *stats_file;    /* -o stats=FILE: absolute path the counters are written to as JSON
			      * on SIGUSR1 and at unmount (stats.h); NULL = none */
	unsigned idle_unmount; /* -o idle_unmount=SECONDS: unmount after that long with no request
				* and no open file or directory (idle.h); 0 = never (default) */
	int show_help, show_version;
	struct fuse_args fuse_args; /* what libfuse gets (argv[0] and -o options) */
} wcfs_options;

/* An entry's attributes as the mount shows them: uid, gid and umask
 * applied, write bits cleared. */
void wcfs_options_apply_owner(const wcfs_options *o, struct stat *st);

/* Exit statuses of the wcodecfs command (documented in docs/wcodecfs.1). */
enum {
	WCFS_EXIT_OK = 0,
	WCFS_EXIT_USAGE = 1,      /* bad command line or option value */
	WCFS_EXIT_SOURCE = 2,     /* SOURCE missing or not a readable directory */
	WCFS_EXIT_MOUNT = 3,      /* MOUNTPOINT unusable, already a wcodecfs mount, or the
				   * mount failed */
	WCFS_EXIT_BACKEND = 4,    /* decode backend or cache could not start */
	WCFS_EXIT_RUNTIME = 5,    /* the session loop failed after mounting */
};

/* Parse argv into *o (defaults first). Prints the reason of a usage error to
 * stderr and returns WCFS_EXIT_USAGE (or WCFS_EXIT_SOURCE when SOURCE cannot
 * be resolved); WCFS_EXIT_OK otherwise (also for --help / --version, with
 * show_help/show_version set). */
int wcfs_options_parse(int argc, char **argv, wcfs_options *o);
void wcfs_options_free(wcfs_options *o);
void wcfs_options_usage(const char *prog);


#endif /* WCFS_OPTIONS_H */
