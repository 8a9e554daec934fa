/* options.c - command line parsing for wcodecfs (options.h), on fuse_opt. */
#include "fuse/options.h"

#include "fuse/bucket.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "core/limits.h"
#include "core/size.h"
#include "core/wc_error.h"

/* Option values as strings: parsed and checked after fuse_opt_parse. */
struct raw_opts {
	char *cache_size, *threads, *backend, *gpu, *gpu_memory, *readahead, *timeout;
	char *log_level, *kernel_readahead, *max_background, *uid, *gid, *umask, *log, *stats;
	char *idle_unmount;
	int rw, debug, direct_io;
};

enum { KEY_HELP, KEY_VERSION, KEY_FOREGROUND, KEY_DEBUG, KEY_SINGLE, KEY_RO };

#define RAW(t, f) { t, offsetof(struct raw_opts, f), 0 }
static const struct fuse_opt opt_spec[] = {
	RAW("cache_size=%s", cache_size),
	RAW("threads=%s", threads),
	RAW("backend=%s", backend),
	RAW("gpu=%s", gpu),
	RAW("gpu_memory=%s", gpu_memory),
	RAW("readahead=%s", readahead),
	RAW("timeout=%s", timeout),
	RAW("log_level=%s", log_level),
	RAW("kernel_readahead=%s", kernel_readahead),
	RAW("max_background=%s", max_background),
	RAW("uid=%s", uid),
	RAW("gid=%s", gid),
	RAW("umask=%s", umask),
	RAW("log=%s", log),
	RAW("stats=%s", stats),
	RAW("idle_unmount=%s", idle_unmount),
	{ "rw", offsetof(struct raw_opts, rw), 1 },
	{ "direct_io", offsetof(struct raw_opts, direct_io), 1 },
	FUSE_OPT_KEY("rw", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("direct_io", FUSE_OPT_KEY_DISCARD), /* ours: libfuse's low level has none */
	FUSE_OPT_KEY("ro", FUSE_OPT_KEY_DISCARD), /* always added unless rw */
	/* fstab's own options, meaningless to the file system: mount(8) and
	 * mount.fuse3 drop most of them, but not on every path (mount.fuse3
	 * run by hand, systemd units), and "defaults" gets through. x-* and
	 * comment= are dropped in opt_proc (fuse_opt matches no prefixes). */
	FUSE_OPT_KEY("defaults", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("auto", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("noauto", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("nofail", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("_netdev", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("user", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("users", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("nouser", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("debug", KEY_DEBUG),
	FUSE_OPT_KEY("-d", KEY_DEBUG),
	FUSE_OPT_KEY("-f", KEY_FOREGROUND),
	FUSE_OPT_KEY("-s", KEY_SINGLE),
	FUSE_OPT_KEY("-h", KEY_HELP),
	FUSE_OPT_KEY("--help", KEY_HELP),
	FUSE_OPT_KEY("-V", KEY_VERSION),
	FUSE_OPT_KEY("--version", KEY_VERSION),
	FUSE_OPT_END
};

/* fuse_opt_parse stores -o values at offsets of its data pointer: raw
 * comes first so the offsets in opt_spec hold for a parse_state. */
struct parse_state {
	struct raw_opts raw;
	wcfs_options *o;
	int nonopts;
	char *nonopt[2];
	int bad;
};

static int opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	(void)outargs;
	struct parse_state *st = data;
	switch (key) {
	case KEY_HELP: st->o->show_help = 1; return 0;
	case KEY_VERSION: st->o->show_version = 1; return 0;
	case KEY_FOREGROUND: st->o->foreground = 1; return 0;
	case KEY_SINGLE: st->o->singlethread = 1; return 0;
	case KEY_DEBUG:
		st->o->debug = 1;
		return 1; /* libfuse prints its request trace with "debug" */
	case FUSE_OPT_KEY_NONOPT:
		if (st->nonopts < 2) {
			st->nonopt[st->nonopts++] = strdup(arg);
			return 0;
		}
		fprintf(stderr, "wcodecfs: unexpected argument '%s'\n", arg);
		st->bad = 1;
		return 0;
	case FUSE_OPT_KEY_OPT:
		if (arg[0] == '-' && arg[1] != 'o') {
			fprintf(stderr, "wcodecfs: unknown option '%s'\n", arg);
			st->bad = 1;
			return 0;
		}
		if (strncmp(arg, "x-", 2) == 0 || strncmp(arg, "comment=", 8) == 0)
			return 0; /* fstab's comments and other programs' options */
		return 1; /* a mount option for libfuse; it rejects unknown ones */
	default:
		return 1;
	}
}

void wcfs_options_apply_owner(const wcfs_options *o, struct stat *st)
{
	if (o->uid_given)
		st->st_uid = (uid_t)o->uid;
	if (o->gid_given)
		st->st_gid = (gid_t)o->gid;
	/* Writes fail with EROFS even with -o rw: no entry shows write bits. */
	st->st_mode &= ~((mode_t)o->umask | 0222);
}

static int parse_uint(const char *name, const char *s, unsigned lo, unsigned hi, unsigned *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || !*s || *end || v < lo || v > hi || s[0] == '-') {
		fprintf(stderr, "wcodecfs: bad %s=%s (expected an integer in [%u, %u])\n", name, s,
			lo, hi);
		return -1;
	}
	*out = (unsigned)v;
	return 0;
}

static int check_values(wcfs_options *o, const struct raw_opts *r)
{
	if (r->cache_size) {
		if (wc_parse_size(r->cache_size, UINT64_MAX, &o->cache_size) != 0 ||
		    o->cache_size < (1u << 20)) {
			fprintf(stderr, "wcodecfs: bad cache_size=%s (expected a size such as 512M "
					"or 2G, at least 1M)\n", r->cache_size);
			return -1;
		}
	}
	if (r->threads) {
		if (parse_uint("threads", r->threads, 1, 1024, &o->threads) != 0)
			return -1;
		o->fuse_threads = o->threads * 2 < 4 ? 4 : o->threads * 2;
	}
	if (r->backend) {
		if (strcmp(r->backend, "auto") && strcmp(r->backend, "cpu") &&
		    strcmp(r->backend, "cuda")) {
			fprintf(stderr, "wcodecfs: bad backend=%s (expected auto, cpu or cuda)\n",
				r->backend);
			return -1;
		}
		free(o->backend);
		o->backend = strdup(r->backend);
	}
	if (r->gpu) {
		unsigned g;
		if (parse_uint("gpu", r->gpu, 0, 1023, &g) != 0)
			return -1;
		o->gpu = (int)g;
	}
	if (r->gpu_memory && wc_parse_size(r->gpu_memory, UINT64_MAX, &o->gpu_memory) != 0) {
		fprintf(stderr, "wcodecfs: bad gpu_memory=%s (expected a size such as 4G)\n",
			r->gpu_memory);
		return -1;
	}
	if (r->readahead && parse_uint("readahead", r->readahead, 0, 1024, &o->readahead) != 0)
		return -1;
	o->readahead_given = r->readahead != NULL;
	if (r->kernel_readahead) {
		if (wc_parse_size(r->kernel_readahead, UINT64_MAX, &o->kernel_readahead) != 0 ||
		    o->kernel_readahead > (64u << 20)) {
			fprintf(stderr, "wcodecfs: bad kernel_readahead=%s (expected a size up to "
					"64M, such as 1M; 0 keeps the kernel's)\n", r->kernel_readahead);
			return -1;
		}
	}
	if (r->max_background &&
	    parse_uint("max_background", r->max_background, 0, 65535, &o->max_background) != 0)
		return -1;
	if (r->timeout) {
		char *end;
		errno = 0;
		double t = strtod(r->timeout, &end);
		if (errno || !*r->timeout || *end || !(t >= 0 && t <= 86400)) {
			fprintf(stderr, "wcodecfs: bad timeout=%s (expected seconds in [0, 86400])\n",
				r->timeout);
			return -1;
		}
		o->timeout = t;
	}
	if (r->uid && parse_uint("uid", r->uid, 0, UINT32_MAX - 1, &o->uid) != 0)
		return -1;
	if (r->gid && parse_uint("gid", r->gid, 0, UINT32_MAX - 1, &o->gid) != 0)
		return -1;
	o->uid_given = r->uid != NULL;
	if (r->log) {
		if (!*r->log) {
			fprintf(stderr, "wcodecfs: bad log= (expected a file name)\n");
			return -1;
		}
		free(o->log_file);
		o->log_file = strdup(r->log);
	}
	o->gid_given = r->gid != NULL;
	if (r->stats) {
		/* absolute now: the daemon's working directory becomes / */
		char cwd[PATH_MAX];
		if (!*r->stats || (r->stats[0] != '/' && !getcwd(cwd, sizeof cwd))) {
			fprintf(stderr, "wcodecfs: bad stats=%s (expected a file name)\n", r->stats);
			return -1;
		}
		free(o->stats_file);
		if (r->stats[0] == '/') {
			o->stats_file = strdup(r->stats);
		} else {
			size_t n = strlen(cwd) + strlen(r->stats) + 2;
			if ((o->stats_file = malloc(n)))
				snprintf(o->stats_file, n, "%s/%s", cwd, r->stats);
		}
		if (!o->stats_file)
			return -1;
	}
	if (r->idle_unmount) {
		char *end;
		errno = 0;
		unsigned long t = strtoul(r->idle_unmount, &end, 10);
		if (errno || !*r->idle_unmount || *end || r->idle_unmount[0] == '-' || t > 31536000) {
			fprintf(stderr, "wcodecfs: bad idle_unmount=%s (expected whole seconds, 0 = never)\n",
				r->idle_unmount);
			return -1;
		}
		o->idle_unmount = (unsigned)t;
	}
	if (r->umask) {
		char *end;
		errno = 0;
		unsigned long m = strtoul(r->umask, &end, 8);
		if (errno || !*r->umask || *end || m > 0777 || r->umask[0] == '-') {
			fprintf(stderr, "wcodecfs: bad umask=%s (expected octal permission bits such as 022)\n",
				r->umask);
			return -1;
		}
		o->umask = (unsigned)m;
	}
	if (r->log_level) {
		static const struct { const char *n; int l; } lv[] = {
			{ "error", WC_LOG_ERR }, { "warning", WC_LOG_WARN }, { "warn", WC_LOG_WARN },
			{ "info", WC_LOG_INFO }, { "debug", WC_LOG_DEBUG },
		};
		size_t i;
		for (i = 0; i < sizeof lv / sizeof lv[0]; i++)
			if (!strcmp(lv[i].n, r->log_level))
				break;
		if (i == sizeof lv / sizeof lv[0]) {
			fprintf(stderr, "wcodecfs: bad log_level=%s (expected error, warning, info "
					"or debug)\n", r->log_level);
			return -1;
		}
		o->log_level = lv[i].l;
	}
	return 0;
}

int wcfs_options_parse(int argc, char **argv, wcfs_options *o)
{
	memset(o, 0, sizeof *o);
	/* 1 GiB, but no more than a quarter of the memory the daemon may use:
	 * a small machine (a 1 GiB board or VM) or a container with a memory
	 * limit must not have it filled by a cache nobody sized. */
	o->cache_size = (uint64_t)1 << 30;
	o->memory_limit = wc_memory_limit();
	const uint64_t quarter = o->memory_limit / 4;
	if (o->memory_limit && quarter < o->cache_size)
		o->cache_size = quarter > (16u << 20) ? quarter : (16u << 20);
	o->threads = wc_cpu_count();
	o->fuse_threads = o->threads * 2 < 4 ? 4 : o->threads * 2;
	o->backend = strdup("auto");
	o->readahead = 8;
	o->kernel_readahead = 1u << 20;
	/* The kernel's 12 async requests are shared by every reader: on the
	 * 16-core GPU machine 64 read four streams 3% (cpu) and 8% (cuda)
	 * faster side by side in one call, less than the spread between calls
	 * (docs/BENCHMARKS.md, "GPU backend through the mount"); one reader is unchanged. */
	o->max_background = 64;
	o->timeout = 1.0;
	o->log_level = WC_LOG_INFO;

	struct parse_state st = { .o = o };
	struct raw_opts *const r = &st.raw;
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	int rc = WCFS_EXIT_USAGE;
	if (fuse_opt_parse(&args, &st, opt_spec, opt_proc) != 0 || st.bad)
		goto out;
	o->rw = r->rw;
	o->direct_io = r->direct_io;
	if (o->show_help || o->show_version) {
		rc = WCFS_EXIT_OK;
		goto out;
	}
	if (check_values(o, r) != 0)
		goto out;
	if (o->debug) {
		o->foreground = 1;
		o->log_level = WC_LOG_DEBUG;
	}
	if (st.nonopts != 2) {
		fprintf(stderr, "wcodecfs: expected SOURCE and MOUNTPOINT (see wcodecfs --help)\n");
		goto out;
	}
	/* An object store's prefix is taken as it is (bucket.h); a directory
	 * by its real path. A bucket's mount keeps a smaller cache by
	 * default: its files' bytes stay in the page cache, and the daemon
	 * holds only what readers and readahead are about to take. */
	if (wcfs_is_bucket(st.nonopt[0])) {
		o->source = strdup(st.nonopt[0]);
		if (!r->cache_size && o->cache_size > WCFS_BUCKET_CACHE_DEFAULT)
			o->cache_size = WCFS_BUCKET_CACHE_DEFAULT;
	} else {
		o->source = realpath(st.nonopt[0], NULL);
	}
	if (!o->source) {
		fprintf(stderr, "wcodecfs: source '%s': %s\n", st.nonopt[0], strerror(errno));
		rc = WCFS_EXIT_SOURCE;
		goto out;
	}
	o->mountpoint = st.nonopt[1];
	st.nonopt[1] = NULL;

	/* Mount options wcodecfs always wants: read-only unless -o rw, kernel
	 * permission checks on the mirrored modes, and names in /proc/mounts;
	 * with uid= or gid=, access for the users named (allow_other: the
	 * kernel still checks the modes shown). */
	char *fsname = NULL;
	if (asprintf(&fsname, "-osubtype=wcodecfs,fsname=%s%s%s", o->source,
		     o->rw ? ",default_permissions" : ",ro,default_permissions",
		     o->uid_given || o->gid_given ? ",allow_other" : "") < 0)
		goto out;
	/* Escape commas in the source path for libfuse's -o splitter. */
	{
		char *e = malloc(strlen(fsname) * 2 + 1), *d = e;
		if (!e) {
			free(fsname);
			goto out;
		}
		const char *p = fsname;
		size_t prefix = strlen("-osubtype=wcodecfs,fsname=");
		for (size_t i = 0; *p; p++, i++) {
			if (i >= prefix && i < prefix + strlen(o->source) && (*p == ',' || *p == '\\'))
				*d++ = '\\';
			*d++ = *p;
		}
		*d = '\0';
		free(fsname);
		fsname = e;
	}
	/* Ours first, so a user's fsname=/subtype= later on the line wins. */
	if (fuse_opt_insert_arg(&args, 1, fsname) != 0) {
		free(fsname);
		goto out;
	}
	free(fsname);
	o->fuse_args = args;
	args = (struct fuse_args)FUSE_ARGS_INIT(0, NULL);
	rc = WCFS_EXIT_OK;
out:
	if (rc == WCFS_EXIT_OK && (o->show_help || o->show_version)) {
		o->fuse_args = args;
		args = (struct fuse_args)FUSE_ARGS_INIT(0, NULL);
	}
	fuse_opt_free_args(&args);
	free(st.nonopt[0]);
	free(st.nonopt[1]);
	free(r->cache_size);
	free(r->threads);
	free(r->backend);
	free(r->gpu);
	free(r->gpu_memory);
	free(r->readahead);
	free(r->uid);
	free(r->log);
	free(r->stats);
	free(r->idle_unmount);
	free(r->gid);
	free(r->umask);
	free(r->timeout);
	free(r->log_level);
	free(r->kernel_readahead);
	free(r->max_background);
	return rc;
}

void wcfs_options_free(wcfs_options *o)
{
	free(o->source);
	free(o->mountpoint);
	free(o->backend);
	free(o->log_file);
	free(o->stats_file);
	fuse_opt_free_args(&o->fuse_args);
}

void wcfs_options_usage(const char *prog)
{
	printf("usage: %s SOURCE MOUNTPOINT [-f] [-d] [-s] [-o OPTION[,OPTION...]]\n"
	       "\n"
	       "Mount a read-only mirror of SOURCE at MOUNTPOINT in which every X.wcodec\n"
	       "container appears as X.safetensors, decoded on demand. Other files,\n"
	       "directories and symlinks pass through unchanged. SOURCE is a directory,\n"
	       "or s3://BUCKET/PREFIX: the objects of an S3-compatible store (configured\n"
	       "by the AWS_* variables and ~/.aws files, as boto3 is).\n"
	       "\n"
	       "  -f                  stay in the foreground, log to stderr\n"
	       "  -d, -o debug        foreground, debug log and libfuse request trace\n"
	       "  -s                  single-threaded FUSE loop\n"
	       "  -h, --help          this help;  -V, --version  the version\n"
	       "\n"
	       "wcodecfs options (-o):\n"
	       "  cache_size=SIZE     decoded-tile cache budget (K/M/G suffixes; default 1G,\n"
	       "                      or a quarter of the memory if that is less; 128M for\n"
	       "                      an s3:// SOURCE)\n"
	       "  threads=N           CPU decode threads (default: usable CPUs); FUSE worker\n"
	       "                      threads at most max(2N, 4)\n"
	       "  backend=NAME        auto (default: CUDA if usable, else CPU), cpu or cuda\n"
	       "  gpu=N               CUDA device ordinal (default 0)\n"
	       "  gpu_memory=SIZE     device memory the CUDA backend may hold\n"
	       "  readahead=TILES     tiles decoded ahead of a sequential reader (default 8,\n"
	       "                      or threads if larger; 16 with backend cuda; at most 2\n"
	       "                      in a .qvq archive's files on the CPU; 0 disables)\n"
	       "  kernel_readahead=SIZE  the kernel's readahead on this mount, hence the\n"
	       "                      largest read request (default 1M; 0: kernel default)\n"
	       "  max_background=N    async (readahead) requests the kernel keeps in flight\n"
	       "                      on this mount (default 64; 0: the kernel's 12)\n"
	       "  timeout=SECONDS     kernel attribute and name cache timeout (default 1)\n"
	       "  log_level=LEVEL     error, warning, info (default) or debug\n"
	       "  log=FILE            append messages to FILE (default: stderr, then syslog\n"
	       "                      once detached)\n"
	       "  stats=FILE          also write the counters as JSON to FILE (replaced whole)\n"
	       "                      on SIGUSR1 and at unmount\n"
	       "  idle_unmount=SECS   unmount after SECS with no request and no open file\n"
	       "                      (default 0: never)\n"
	       "  uid=N, gid=N        every entry's owner and group (allow_other implied)\n"
	       "  umask=OOO           permission bits cleared from every entry\n"
	       "  rw                  do not pass 'ro' to the kernel (writes still fail\n"
	       "                      with EROFS)\n"
	       "  direct_io           read() of decoded files skips the page cache: one copy\n"
	       "                      instead of two, faster streams; shared mmap may fail\n"
	       "                      (ENODEV), private mmap works\n"
	       "\n"
	       "Standard FUSE mount options such as allow_other, fsname=NAME or\n"
	       "max_read=N are passed to libfuse.\n"
	       "\n"
	       "Exit status: 0 mounted (without -f: once the mount is ready), 1 usage,\n"
	       "2 SOURCE unusable, 3 MOUNTPOINT unusable or mount failed, 4 decode\n"
	       "backend failed to start, 5 session failure. See wcodecfs(1).\n",
	       prog);
}
