/*
 * ramfs.c - the "minimal RAM-backed FUSE" ceiling for benchmarks.
 *
 * Usage: ramfs [FUSE options] SOURCE MOUNTPOINT
 *
 * Loads SOURCE into anonymous memory at start and serves it read-only as
 * MOUNTPOINT/<basename of SOURCE> through the libfuse3 low-level API with the
 * multithreaded session loop. Every read is answered straight from that
 * memory (no decoding, no cache), so the time it takes is what FUSE itself
 * costs: a wcodecfs read of the same bytes can only approach it.
 *
 * The page-cache semantics are the ones wcodecfs uses, so the comparison is
 * fair: no direct_io, keep_cache on open, entry/attr timeouts of 1 s like
 * wcodecfs's default (-o timeout=SECONDS), st_blksize reported as the tile
 * size (1 MiB unless -o blksize=N), and the mount's kernel readahead
 * (/sys/class/bdi/MAJ:MIN/read_ahead_kb) raised to 1 MiB on the first
 * request after INIT, as wcodecfs does (-o kernel_readahead=BYTES, 0 keeps
 * the kernel's; needs root, else it stays). FUSE worker threads, at most
 * and idle: max(2 x online CPUs, 4), wcodecfs's default (-o max_threads=N,
 * -o max_idle_threads=N). Connection options of libfuse (-o
 * max_readahead=N, max_background=N, ...) are accepted through
 * fuse_parse_conn_info_opts().
 * Without -f the daemon detaches once mounted (fuse_daemonize), like
 * wcodecfs; stop it with `fusermount3 -u MOUNTPOINT`.
 *
 * Exit status: 0 after a clean unmount, 1 on a usage, load or mount error.
 */
#define FUSE_USE_VERSION 312

#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <fuse3/fuse_lowlevel.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuse/bdi.h" /* the same read_ahead_kb setter as wcodecfs, for a fair ceiling */

#define RAMFS_FILE_INO 2

struct ramfs {
	const char *source;                 /* path given on the command line */
	char *name;                         /* file name inside the mount */
	uint8_t *data;                      /* the file's bytes */
	size_t size;                        /* bytes */
	struct timespec mtime;              /* SOURCE's, shown on both inodes */
	unsigned blksize;                   /* st_blksize reported, bytes */
	double timeout;                     /* entry/attr cache timeout, seconds */
	unsigned long kernel_readahead;     /* bytes for read_ahead_kb; 0 = kernel's */
	char mountpoint[PATH_MAX];          /* absolute, to find our mount's bdi */
	atomic_int bdi_pending;             /* readahead not set yet */
	unsigned max_threads, idle_threads; /* FUSE workers; 0 = our default */
	struct fuse_conn_info_opts *conn_opts;
	int show_help;
};

static struct ramfs g_fs = {.blksize = 1u << 20, .timeout = 1.0, .kernel_readahead = 1ul << 20};

/* The kernel sets the bdi's readahead from the INIT reply while processing
 * it, so a value written before that is lost: set it on the first request
 * that follows INIT, once. */
static void tune_readahead_once(void)
{
	if (!atomic_exchange(&g_fs.bdi_pending, 0))
		return;
	int err = wcfs_set_kernel_readahead(g_fs.mountpoint, g_fs.kernel_readahead);
	if (err)
		fprintf(stderr, "ramfs: kernel readahead stays at its default: %s\n", strerror(err));
}

/* Read the whole file into anonymous memory (so it is never paged back to
 * the source file). Returns 0, or -1 with a message on stderr. */
static int load_source(struct ramfs *fs)
{
	int fd = open(fs->source, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "ramfs: %s: %s\n", fs->source, strerror(errno));
		return -1;
	}
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		fprintf(stderr, "ramfs: %s: not a regular file\n", fs->source);
		close(fd);
		return -1;
	}
	fs->size = (size_t)st.st_size;
	fs->mtime = st.st_mtim;
	size_t map = fs->size ? fs->size : 1;
	void *p = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		fprintf(stderr, "ramfs: cannot allocate %zu bytes: %s\n", fs->size, strerror(errno));
		close(fd);
		return -1;
	}
	fs->data = p;
	size_t done = 0;
	while (done < fs->size) {
		ssize_t n = read(fd, fs->data + done, fs->size - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			fprintf(stderr, "ramfs: %s: %s\n", fs->source,
				n < 0 ? strerror(errno) : "file shrank while loading");
			close(fd);
			return -1;
		}
		done += (size_t)n;
	}
	close(fd);
	mprotect(fs->data, map, PROT_READ);
	const char *slash = strrchr(fs->source, '/');
	fs->name = strdup(slash ? slash + 1 : fs->source);
	if (!fs->name || !*fs->name) {
		fprintf(stderr, "ramfs: %s: no file name\n", fs->source);
		return -1;
	}
	return 0;
}

static void fill_attr(fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof *st);
	st->st_ino = ino;
	st->st_uid = getuid();
	st->st_gid = getgid();
	if (ino == FUSE_ROOT_ID) {
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2;
	} else {
		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
		st->st_size = (off_t)g_fs.size;
		st->st_blocks = (blkcnt_t)((g_fs.size + 511) / 512);
	}
	st->st_blksize = (blksize_t)g_fs.blksize;
	st->st_mtim = st->st_ctim = st->st_atim = g_fs.mtime;
}

static void ramfs_init(void *userdata, struct fuse_conn_info *conn)
{
	struct ramfs *fs = userdata;
	fuse_apply_conn_info_opts(fs->conn_opts, conn);
}

static void ramfs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	tune_readahead_once();
	if (parent != FUSE_ROOT_ID || strcmp(name, g_fs.name) != 0) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	struct fuse_entry_param e;
	memset(&e, 0, sizeof e);
	e.ino = RAMFS_FILE_INO;
	e.attr_timeout = g_fs.timeout;
	e.entry_timeout = g_fs.timeout;
	fill_attr(e.ino, &e.attr);
	fuse_reply_entry(req, &e);
}

static void ramfs_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	tune_readahead_once();
	if (ino != FUSE_ROOT_ID && ino != RAMFS_FILE_INO) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	struct stat st;
	fill_attr(ino, &st);
	fuse_reply_attr(req, &st, g_fs.timeout);
}

static void ramfs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			  struct fuse_file_info *fi)
{
	(void)fi;
	if (ino != FUSE_ROOT_ID) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	/* Entries: 1 ".", 2 "..", 3 the file; off is the index of the next one. */
	char buf[1024];
	size_t used = 0;
	const char *names[3] = {".", "..", g_fs.name};
	fuse_ino_t inos[3] = {FUSE_ROOT_ID, FUSE_ROOT_ID, RAMFS_FILE_INO};
	for (off_t i = off; i < 3; i++) {
		struct stat st;
		fill_attr(inos[i], &st);
		size_t need = fuse_add_direntry(req, buf + used, sizeof buf - used, names[i], &st, i + 1);
		if (used + need > sizeof buf || used + need > size)
			break;
		used += need;
	}
	fuse_reply_buf(req, buf, used);
}

static void ramfs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (ino != RAMFS_FILE_INO) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	fi->keep_cache = 1; /* immutable: keep pages across opens, as wcodecfs does */
	fi->direct_io = 0;  /* page cache on: shared mmap works */
	fuse_reply_open(req, fi);
}

static void ramfs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	(void)fi;
	if (ino != RAMFS_FILE_INO) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if ((uint64_t)off >= g_fs.size) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	size_t n = g_fs.size - (size_t)off;
	if (n > size)
		n = size;
	fuse_reply_buf(req, (const char *)g_fs.data + off, n);
}

static void ramfs_statfs(fuse_req_t req, fuse_ino_t ino)
{
	(void)ino;
	struct statvfs sv;
	memset(&sv, 0, sizeof sv);
	sv.f_bsize = g_fs.blksize;
	sv.f_frsize = 512;
	sv.f_blocks = (fsblkcnt_t)((g_fs.size + 511) / 512);
	sv.f_files = 2;
	sv.f_namemax = 255;
	fuse_reply_statfs(req, &sv);
}

static const struct fuse_lowlevel_ops ramfs_ops = {
	.init = ramfs_init,
	.lookup = ramfs_lookup,
	.getattr = ramfs_getattr,
	.readdir = ramfs_readdir,
	.open = ramfs_open,
	.read = ramfs_read,
	.statfs = ramfs_statfs,
};

static const struct fuse_opt ramfs_opts[] = {
	{"blksize=%u", offsetof(struct ramfs, blksize), 0},
	{"timeout=%lf", offsetof(struct ramfs, timeout), 0},
	{"kernel_readahead=%lu", offsetof(struct ramfs, kernel_readahead), 0},
	/* Taken here rather than by libfuse, whose defaults (10, unlimited)
	 * cannot be told apart from values given. */
	{"max_threads=%u", offsetof(struct ramfs, max_threads), 0},
	{"max_idle_threads=%u", offsetof(struct ramfs, idle_threads), 0},
	FUSE_OPT_END,
};

/* The first non-option argument is SOURCE; the rest go to libfuse. */
static int ramfs_opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	(void)outargs;
	struct ramfs *fs = data;
	if (key == FUSE_OPT_KEY_NONOPT && !fs->source) {
		fs->source = arg;
		return 0;
	}
	return 1;
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_cmdline_opts opts;
	int ret = 1;

	if (fuse_opt_parse(&args, &g_fs, ramfs_opts, ramfs_opt_proc) != 0)
		return 1;
	if (fuse_parse_cmdline(&args, &opts) != 0)
		return 1;
	if (opts.show_version) {
		fuse_lowlevel_version();
		ret = 0;
		goto out_args;
	}
	if (opts.show_help || !g_fs.source || !opts.mountpoint) {
		printf("usage: %s [options] SOURCE MOUNTPOINT\n"
		       "Serve SOURCE from RAM as MOUNTPOINT/<name> (read-only FUSE).\n"
		       "  -o blksize=N    st_blksize to report (default 1048576)\n"
		       "  -o timeout=S    entry/attr cache timeout in seconds (default 1)\n"
		       "  -o kernel_readahead=BYTES  the mount's read_ahead_kb in bytes\n"
		       "                  (default 1048576; 0 keeps the kernel's)\n",
		       argv[0]);
		fuse_cmdline_help();
		fuse_lowlevel_help();
		ret = opts.show_help ? 0 : 1;
		goto out_args;
	}
	if (!(g_fs.timeout >= 0 && g_fs.timeout <= 86400)) {
		fprintf(stderr, "ramfs: timeout must be in [0, 86400] seconds\n");
		goto out_args;
	}
	if (g_fs.blksize < 512 || (g_fs.blksize & (g_fs.blksize - 1))) {
		fprintf(stderr, "ramfs: blksize must be a power of two >= 512\n");
		goto out_args;
	}
	g_fs.conn_opts = fuse_parse_conn_info_opts(&args);
	if (!g_fs.conn_opts)
		goto out_args;
	if (g_fs.kernel_readahead > (64ul << 20)) {
		fprintf(stderr, "ramfs: kernel_readahead must be at most 64 MiB\n");
		goto out_args;
	}
	if (!realpath(opts.mountpoint, g_fs.mountpoint)) {
		fprintf(stderr, "ramfs: %s: %s\n", opts.mountpoint, strerror(errno));
		goto out_args;
	}
	atomic_init(&g_fs.bdi_pending, g_fs.kernel_readahead != 0);
	if (load_source(&g_fs) != 0)
		goto out_args;

	struct fuse_session *se = fuse_session_new(&args, &ramfs_ops, sizeof ramfs_ops, &g_fs);
	if (!se)
		goto out_args;
	if (fuse_set_signal_handlers(se) != 0)
		goto out_session;
	if (fuse_session_mount(se, opts.mountpoint) != 0)
		goto out_signals;
	if (fuse_daemonize(opts.foreground) != 0)
		goto out_unmount;

	if (opts.singlethread) {
		ret = fuse_session_loop(se);
	} else {
		struct fuse_loop_config *cfg = fuse_loop_cfg_create();
		if (!cfg)
			goto out_unmount;
		fuse_loop_cfg_set_clone_fd(cfg, (unsigned)opts.clone_fd);
		/* Worker threads as wcodecfs has them: max(2 x online CPUs, 4),
		 * both at most and idle, unless given. */
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);
		unsigned def = cpus > 2 ? 2u * (unsigned)cpus : 4u;
		fuse_loop_cfg_set_max_threads(cfg, g_fs.max_threads ? g_fs.max_threads : def);
		fuse_loop_cfg_set_idle_threads(cfg, g_fs.idle_threads ? g_fs.idle_threads : def);
		ret = fuse_session_loop_mt(se, cfg);
		fuse_loop_cfg_destroy(cfg);
	}
	ret = ret != 0;

out_unmount:
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
out_args:
	free(opts.mountpoint);
	free(g_fs.conn_opts);
	free(g_fs.name);
	fuse_opt_free_args(&args);
	return ret;
}
