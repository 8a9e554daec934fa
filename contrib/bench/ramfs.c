/*
 * ramfs.c - the "minimal RAM-backed FUSE" ceiling for benchmarks.
 *
 * Usage: ramfs [FUSE options] SOURCE MOUNTPOINT
 *
 * Loads SOURCE into anonymous memory at start and serves it read-only
 * through the libfuse3 low-level API with the multithreaded session loop: a
 * file as MOUNTPOINT/<basename of SOURCE>, a directory as the tree under it
 * (every regular file and subdirectory, recursively; symbolic links and
 * other kinds are left out), so that a directory of images can be read file
 * by file as through a wcodecfs mount of its archive. Every read is
 * answered straight from that memory (no decoding, no cache), so the time
 * it takes is what FUSE itself costs: a wcodecfs read of the same bytes can
 * only approach it. Lookups go through a hash table of (directory, name).
 *
 * The page-cache semantics are the ones wcodecfs uses, so the comparison is
 * fair: no direct_io (unless -o direct_io, to compare with wcodecfs -o
 * direct_io), keep_cache on open, entry/attr timeouts of 1 s like
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

#include <dirent.h>
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

/* One file or directory of the tree; its inode number is its index + 1, so
 * the root (index 0) is FUSE_ROOT_ID. */
struct rnode {
	char *name;             /* entry name in its parent; "" for the root */
	uint32_t parent;        /* index of the parent directory */
	int is_dir;
	uint8_t *data;          /* file: its bytes (read-only mapping) */
	size_t size;            /* file: bytes */
	uint32_t *child;        /* directory: indices of its entries, in load order */
	uint32_t nchild, cap;
	struct timespec mtime;  /* the source entry's */
};

struct ramfs {
	const char *source;                 /* path given on the command line */
	struct rnode *node;                 /* node[0] is the root directory */
	uint32_t nnode, capnode;
	uint32_t *hash;                     /* open addressing over (parent, name): index + 1, 0 = empty */
	uint32_t hmask;
	uint64_t total;                     /* bytes of every file */
	unsigned blksize;                   /* st_blksize reported, bytes */
	double timeout;                     /* entry/attr cache timeout, seconds */
	unsigned long kernel_readahead;     /* bytes for read_ahead_kb; 0 = kernel's */
	char mountpoint[PATH_MAX];          /* absolute, to find our mount's bdi */
	atomic_int bdi_pending;             /* readahead not set yet */
	unsigned max_threads, idle_threads; /* FUSE workers; 0 = our default */
	int direct_io;                      /* -o direct_io, as wcodecfs -o direct_io */
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

static uint32_t name_hash(uint32_t parent, const char *name)
{
	uint32_t h = 2166136261u ^ parent; /* FNV-1a */
	for (const unsigned char *c = (const unsigned char *)name; *c; c++)
		h = (h ^ *c) * 16777619u;
	return h;
}

/* The index of entry `name` of directory `parent`, or UINT32_MAX. */
static uint32_t find_child(uint32_t parent, const char *name)
{
	for (uint32_t h = name_hash(parent, name) & g_fs.hmask;; h = (h + 1) & g_fs.hmask) {
		uint32_t v = g_fs.hash[h];
		if (!v)
			return UINT32_MAX;
		const struct rnode *n = &g_fs.node[v - 1];
		if (n->parent == parent && !strcmp(n->name, name))
			return v - 1;
	}
}

/* A new node under `parent` (UINT32_MAX: the root); -1 when out of memory. */
static int64_t add_node(uint32_t parent, const char *name, int is_dir, const struct stat *st)
{
	struct ramfs *fs = &g_fs;
	if (fs->nnode == fs->capnode) {
		uint32_t nc = fs->capnode ? 2 * fs->capnode : 64;
		struct rnode *nn = realloc(fs->node, nc * sizeof *nn);
		if (!nn)
			return -1;
		fs->node = nn;
		fs->capnode = nc;
	}
	uint32_t i = fs->nnode;
	struct rnode *n = &fs->node[i];
	memset(n, 0, sizeof *n);
	n->name = strdup(name);
	if (!n->name)
		return -1;
	n->parent = parent == UINT32_MAX ? 0 : parent;
	n->is_dir = is_dir;
	n->mtime = st->st_mtim;
	fs->nnode++;
	if (parent != UINT32_MAX) {
		struct rnode *d = &fs->node[parent];
		if (d->nchild == d->cap) {
			uint32_t nc = d->cap ? 2 * d->cap : 8;
			uint32_t *nv = realloc(d->child, nc * sizeof *nv);
			if (!nv)
				return -1;
			d->child = nv;
			d->cap = nc;
		}
		d->child[d->nchild++] = i;
	}
	return i;
}

/* Read the regular file at path into anonymous memory (so it is never paged
 * back to the source file). Returns 0, or -1 with a message on stderr. */
static int load_file(const char *path, struct rnode *n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		fprintf(stderr, "ramfs: %s: %s\n", path, fd < 0 ? strerror(errno) : "not a regular file");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	n->size = (size_t)st.st_size;
	size_t map = n->size ? n->size : 1;
	void *p = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		fprintf(stderr, "ramfs: cannot allocate %zu bytes: %s\n", n->size, strerror(errno));
		close(fd);
		return -1;
	}
	n->data = p;
	size_t done = 0;
	while (done < n->size) {
		ssize_t k = read(fd, n->data + done, n->size - done);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			fprintf(stderr, "ramfs: %s: %s\n", path,
				k < 0 ? strerror(errno) : "file shrank while loading");
			close(fd);
			return -1;
		}
		done += (size_t)k;
	}
	close(fd);
	mprotect(n->data, map, PROT_READ);
	g_fs.total += n->size;
	return 0;
}

/* Load directory `path` as node dir's entries, recursively. */
static int load_dir(const char *path, uint32_t dir, int depth)
{
	if (depth > 64) {
		fprintf(stderr, "ramfs: %s: directories nested deeper than 64\n", path);
		return -1;
	}
	DIR *d = opendir(path);
	if (!d) {
		fprintf(stderr, "ramfs: %s: %s\n", path, strerror(errno));
		return -1;
	}
	int rc = 0;
	struct dirent *de;
	while (!rc && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		char *full;
		if (asprintf(&full, "%s/%s", path, de->d_name) < 0) {
			rc = -1;
			break;
		}
		struct stat st;
		if (lstat(full, &st) == 0 && (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))) {
			int64_t i = add_node(dir, de->d_name, S_ISDIR(st.st_mode), &st);
			if (i < 0)
				rc = -1;
			else if (S_ISDIR(st.st_mode))
				rc = load_dir(full, (uint32_t)i, depth + 1);
			else
				rc = load_file(full, &g_fs.node[i]);
		}
		free(full);
	}
	closedir(d);
	return rc;
}

/* Load SOURCE (a file or a directory tree) and index the names. */
static int load_source(struct ramfs *fs)
{
	struct stat st;
	if (stat(fs->source, &st) != 0) {
		fprintf(stderr, "ramfs: %s: %s\n", fs->source, strerror(errno));
		return -1;
	}
	if (add_node(UINT32_MAX, "", 1, &st) < 0)
		return -1;
	if (S_ISDIR(st.st_mode)) {
		if (load_dir(fs->source, 0, 0) != 0)
			return -1;
	} else {
		const char *slash = strrchr(fs->source, '/');
		const char *name = slash ? slash + 1 : fs->source;
		if (!*name) {
			fprintf(stderr, "ramfs: %s: no file name\n", fs->source);
			return -1;
		}
		int64_t i = add_node(0, name, 0, &st);
		if (i < 0 || load_file(fs->source, &fs->node[i]) != 0)
			return -1;
	}
	uint32_t cap = 16;
	while (cap < 2 * fs->nnode)
		cap *= 2;
	fs->hash = calloc(cap, sizeof *fs->hash);
	if (!fs->hash)
		return -1;
	fs->hmask = cap - 1;
	for (uint32_t i = 1; i < fs->nnode; i++) {
		uint32_t h = name_hash(fs->node[i].parent, fs->node[i].name) & fs->hmask;
		while (fs->hash[h])
			h = (h + 1) & fs->hmask;
		fs->hash[h] = i + 1;
	}
	return 0;
}

/* The node of inode ino, or NULL. */
static const struct rnode *node_of(fuse_ino_t ino)
{
	return ino >= 1 && ino <= g_fs.nnode ? &g_fs.node[ino - 1] : NULL;
}

static void fill_attr(fuse_ino_t ino, struct stat *st)
{
	const struct rnode *n = node_of(ino);
	memset(st, 0, sizeof *st);
	st->st_ino = ino;
	st->st_uid = getuid();
	st->st_gid = getgid();
	if (n->is_dir) {
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2;
	} else {
		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
		st->st_size = (off_t)n->size;
		st->st_blocks = (blkcnt_t)((n->size + 511) / 512);
	}
	st->st_blksize = (blksize_t)g_fs.blksize;
	st->st_mtim = st->st_ctim = st->st_atim = n->mtime;
}

static void ramfs_init(void *userdata, struct fuse_conn_info *conn)
{
	struct ramfs *fs = userdata;
	fuse_apply_conn_info_opts(fs->conn_opts, conn);
}

static void ramfs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	tune_readahead_once();
	const struct rnode *d = node_of(parent);
	uint32_t i = d && d->is_dir ? find_child((uint32_t)(parent - 1), name) : UINT32_MAX;
	if (i == UINT32_MAX) {
		fuse_reply_err(req, d && !d->is_dir ? ENOTDIR : ENOENT);
		return;
	}
	struct fuse_entry_param e;
	memset(&e, 0, sizeof e);
	e.ino = i + 1;
	e.attr_timeout = g_fs.timeout;
	e.entry_timeout = g_fs.timeout;
	fill_attr(e.ino, &e.attr);
	fuse_reply_entry(req, &e);
}

static void ramfs_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	tune_readahead_once();
	if (!node_of(ino)) {
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
	const struct rnode *d = node_of(ino);
	if (!d || !d->is_dir) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	/* Entries: 0 ".", 1 "..", then the children; off is the index of the
	 * next one. */
	char *buf = malloc(size ? size : 1);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	size_t used = 0;
	for (off_t i = off < 0 ? 0 : off; i < 2 + (off_t)d->nchild; i++) {
		const char *name = i == 0 ? "." : i == 1 ? ".." : g_fs.node[d->child[i - 2]].name;
		fuse_ino_t cino = i == 0 ? ino : i == 1 ? d->parent + 1 : d->child[i - 2] + 1;
		struct stat st;
		fill_attr(cino, &st);
		size_t need = fuse_add_direntry(req, buf + used, size - used, name, &st, i + 1);
		if (need > size - used)
			break;
		used += need;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void ramfs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	const struct rnode *n = node_of(ino);
	if (!n || n->is_dir) {
		fuse_reply_err(req, n ? EISDIR : ENOENT);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	fi->keep_cache = 1; /* immutable: keep pages across opens, as wcodecfs does */
	fi->direct_io = g_fs.direct_io; /* off by default: page cache on, shared mmap works */
	fuse_reply_open(req, fi);
}

static void ramfs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	(void)fi;
	const struct rnode *n = node_of(ino);
	if (!n || n->is_dir) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if ((uint64_t)off >= n->size) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	size_t k = n->size - (size_t)off;
	if (k > size)
		k = size;
	fuse_reply_buf(req, (const char *)n->data + off, k);
}

static void ramfs_statfs(fuse_req_t req, fuse_ino_t ino)
{
	(void)ino;
	struct statvfs sv;
	memset(&sv, 0, sizeof sv);
	sv.f_bsize = g_fs.blksize;
	sv.f_frsize = 512;
	sv.f_blocks = (fsblkcnt_t)((g_fs.total + 511) / 512);
	sv.f_files = g_fs.nnode;
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
	{"direct_io", offsetof(struct ramfs, direct_io), 1},
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
		       "Serve SOURCE from RAM as MOUNTPOINT/<name> (read-only FUSE); a directory\n"
		       "SOURCE is served as its tree of files and subdirectories.\n"
		       "  -o blksize=N    st_blksize to report (default 1048576)\n"
		       "  -o timeout=S    entry/attr cache timeout in seconds (default 1)\n"
		       "  -o kernel_readahead=BYTES  the mount's read_ahead_kb in bytes\n"
		       "                  (default 1048576; 0 keeps the kernel's)\n"
		       "  -o direct_io    reads skip the page cache (the ceiling of\n"
		       "                  wcodecfs -o direct_io)\n",
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
	fuse_opt_free_args(&args);
	return ret;
}
