/* ops.c - FUSE low-level operations (ops.h). */
#include "fuse/ops.h"

#include "fuse/bdi.h"
#include "fuse/idle.h"
#include "fuse/prefetch.h"
#include "fuse/read.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

typedef struct wcfs_handle {
	wcfs_node *node; /* referenced */
	int fd;          /* passed-through regular file: its descriptor; else -1 */
	/* In the file system's list of open handles (fs->handles), so those the
	 * kernel never releases (the session ended with files open) are freed
	 * at exit: wcfs_handles_free. */
	struct wcfs_handle *prev, *next;
} wcfs_handle;

static void handle_link(wcfs_fs *fs, wcfs_handle *h)
{
	pthread_mutex_lock(&fs->handles_lock);
	h->prev = NULL;
	h->next = fs->handles;
	if (h->next)
		h->next->prev = h;
	fs->handles = h;
	pthread_mutex_unlock(&fs->handles_lock);
	atomic_fetch_add(&fs->open_handles, 1);
}

static void handle_unlink(wcfs_fs *fs, wcfs_handle *h)
{
	pthread_mutex_lock(&fs->handles_lock);
	if (h->prev)
		h->prev->next = h->next;
	else
		fs->handles = h->next;
	if (h->next)
		h->next->prev = h->prev;
	pthread_mutex_unlock(&fs->handles_lock);
	atomic_fetch_sub(&fs->open_handles, 1);
}

void wcfs_handles_free(wcfs_fs *fs)
{
	for (wcfs_handle *h = fs->handles, *next; h; h = next) {
		next = h->next;
		if (h->fd >= 0)
			close(h->fd);
		free(h);
	}
	fs->handles = NULL;
}

static wcfs_fs *fs_of(fuse_req_t req) { return fuse_req_userdata(req); }
static wcfs_node *node_of(fuse_req_t req, fuse_ino_t ino)
{
	return wcfs_node_of(fs_of(req)->vt.itable, ino);
}

/* Raise the mount's kernel readahead (bdi.h) on the first request after
 * INIT: the kernel lowers it to the INIT reply's max_readahead while it
 * processes that reply, so setting it earlier does not last. */
static void tune_once(wcfs_fs *fs)
{
	if (!atomic_load_explicit(&fs->bdi_pending, memory_order_relaxed) ||
	    !atomic_exchange(&fs->bdi_pending, 0))
		return;
	int err = wcfs_set_kernel_readahead(fs->opt->mountpoint, fs->opt->kernel_readahead);
	if (err)
		wc_log(WC_LOG_DEBUG, "kernel readahead stays at its default: %s", strerror(err));
	else
		wc_log(WC_LOG_DEBUG, "kernel readahead set to %llu KiB",
		       (unsigned long long)(fs->opt->kernel_readahead >> 10));
}

/* Every request that uses the mount: it is not idle (idle.h), and the
 * first one after INIT tunes the kernel's readahead. */
static void on_request(wcfs_fs *fs)
{
	wcfs_idle_touch(fs);
	tune_once(fs);
}

/* ---- names and attributes ------------------------------------------ */

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	const wcfs_fs *fs = userdata;
	/* Readahead requests are async: the kernel keeps at most max_background
	 * of them in flight per connection, across every reader of the mount. */
	if (fs->opt->max_background) {
		conn->max_background = fs->opt->max_background;
		conn->congestion_threshold = fs->opt->max_background * 3 / 4;
	}
	if (conn->capable & FUSE_CAP_SPLICE_WRITE)
		conn->want |= FUSE_CAP_SPLICE_WRITE; /* passthrough reads: fd -> /dev/fuse */
	if (conn->capable & FUSE_CAP_ASYNC_READ)
		conn->want |= FUSE_CAP_ASYNC_READ; /* parallel reads of one file */
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	/* Passed-through files may change under us: drop their cached pages
	 * when getattr shows a new mtime. Virtual files never change. */
	if (conn->capable & FUSE_CAP_AUTO_INVAL_DATA)
		conn->want |= FUSE_CAP_AUTO_INVAL_DATA;
	if (fs->opt->direct_io) {
		/* A direct_io file may be mapped MAP_SHARED only when the
		 * kernel (6.6+) and libfuse (3.16+) agree on it; private
		 * mappings always go through the page cache. */
		const char *shared = "fail with ENODEV (private ones work)";
#ifdef FUSE_CAP_DIRECT_IO_ALLOW_MMAP
		if (conn->capable & FUSE_CAP_DIRECT_IO_ALLOW_MMAP) {
			conn->want |= FUSE_CAP_DIRECT_IO_ALLOW_MMAP;
			shared = "work";
		}
#endif
		wc_log(WC_LOG_INFO, "direct_io: read() of decoded files bypasses the page cache; "
		       "shared mappings of them %s", shared);
	}
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	wcfs_fs *fs = fs_of(req);
	on_request(fs);
	struct fuse_entry_param e = { 0 };
	e.attr_timeout = fs->timeout;
	e.entry_timeout = fs->timeout;
	wcfs_node *n;
	int err = wcfs_vtree_lookup(&fs->vt, node_of(req, parent), name, &n);
	if (err == ENOENT) {
		fuse_reply_entry(req, &e); /* ino 0: a negative entry the kernel caches */
		return;
	}
	if (!err) {
		err = wcfs_vtree_getattr(&fs->vt, n, &e.attr);
		if (err)
			wcfs_node_forget(fs->vt.itable, n, 1);
		else
			wcfs_options_apply_owner(fs->opt, &e.attr);
	}
	if (err) {
		fuse_reply_err(req, err);
		return;
	}
	e.ino = wcfs_ino_of(fs->vt.itable, n);
	fuse_reply_entry(req, &e);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	wcfs_node_forget(fs_of(req)->vt.itable, node_of(req, ino), nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	wcfs_fs *fs = fs_of(req);
	for (size_t i = 0; i < count; i++)
		wcfs_node_forget(fs->vt.itable, wcfs_node_of(fs->vt.itable, forgets[i].ino),
				 forgets[i].nlookup);
	fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	wcfs_fs *fs = fs_of(req);
	on_request(fs);
	struct stat st;
	/* fstat of an open passed-through file: that file's attributes, even
	 * if its name has since been removed or reused (the kernel gives the
	 * handle for regular files only). */
	const wcfs_handle *h = fi ? (const wcfs_handle *)(uintptr_t)fi->fh : NULL;
	int err = h && h->fd >= 0 ? (fstat(h->fd, &st) != 0 ? errno : 0)
				  : wcfs_vtree_getattr(&fs->vt, node_of(req, ino), &st);
	if (err) {
		fuse_reply_err(req, err);
	} else {
		wcfs_options_apply_owner(fs->opt, &st);
		fuse_reply_attr(req, &st, fs->timeout);
	}
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	wcfs_idle_touch(fs_of(req));
	char buf[PATH_MAX + 1];
	int err = wcfs_vtree_readlink(node_of(req, ino), buf, sizeof buf);
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_readlink(req, buf);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	(void)ino;
	wcfs_node *root = wcfs_itable_root(fs_of(req)->vt.itable);
	struct statvfs sv;
	if (fstatvfs(root->fd, &sv) != 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_statfs(req, &sv);
}

/* ---- directories ----------------------------------------------------- */

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	wcfs_fs *fs = fs_of(req);
	on_request(fs);
	wcfs_dirlist *l = malloc(sizeof *l);
	if (!l) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	int err = wcfs_vtree_list(&fs->vt, node_of(req, ino), l);
	if (err) {
		free(l);
		fuse_reply_err(req, err);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)l;
	atomic_fetch_add(&fs->open_handles, 1);
	if (fuse_reply_open(req, fi) == -ENOENT) { /* interrupted */
		atomic_fetch_sub(&fs->open_handles, 1);
		wcfs_dirlist_free(l);
		free(l);
	}
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	(void)ino;
	wcfs_idle_touch(fs_of(req));
	wcfs_dirlist *l = (wcfs_dirlist *)(uintptr_t)fi->fh;
	char *buf = malloc(size ? size : 1);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	size_t pos = 0;
	for (size_t i = off < 0 ? 0 : (size_t)off; i < l->n; i++) {
		struct stat st = { .st_ino = l->ent[i].ino, .st_mode = l->ent[i].type };
		size_t need = fuse_add_direntry(req, buf + pos, size - pos, l->ent[i].name, &st,
						(off_t)(i + 1));
		if (need > size - pos)
			break;
		pos += need;
	}
	fuse_reply_buf(req, buf, pos);
	free(buf);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	wcfs_dirlist *l = (wcfs_dirlist *)(uintptr_t)fi->fh;
	wcfs_dirlist_free(l);
	free(l);
	atomic_fetch_sub(&fs_of(req)->open_handles, 1);
	fuse_reply_err(req, 0);
}

/* ---- files ----------------------------------------------------------- */

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	wcfs_fs *fs = fs_of(req);
	on_request(fs);
	wcfs_node *n = node_of(req, ino);
	if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (n->type == S_IFDIR) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if (n->type != S_IFREG) {
		fuse_reply_err(req, EACCES); /* devices, fifos, sockets are not served */
		return;
	}
	if (n->vn && atomic_load(&n->damaged)) {
		/* No new reader gets a prefix of a file known to be damaged
		 * (a reader already in it gets EIO at the damage). */
		if (!atomic_exchange(&n->damage_logged, true)) {
			char name[PATH_MAX];
			wcfs_vtree_source_path(n, name, sizeof name);
			wc_log(WC_LOG_ERR, "%s: damaged (tile %llu): later opens fail with EIO until the file "
			       "changes", name, (unsigned long long)(atomic_load(&n->bad_tile) - 1));
		}
		fuse_reply_err(req, EIO);
		return;
	}
	wcfs_handle *h = malloc(sizeof *h);
	if (!h) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	h->node = n;
	h->fd = -1;
	if (n->vn && n->vn->ops->prepare) {
		wc_clear_detail();
		wc_err e = n->vn->ops->prepare(n->vn);
		if (e != WC_OK) {
			char name[PATH_MAX];
			wcfs_vtree_source_path(n, name, sizeof name);
			free(h);
			fuse_reply_err(req, wcfs_vtree_open_failed(name, n->prov, e));
			return;
		}
	}
	if (!n->vn) {
		h->fd = wcfs_vtree_open_source(n, O_RDONLY);
		if (h->fd < 0) {
			int err = -h->fd;
			free(h);
			fuse_reply_err(req, err);
			return;
		}
	}
	if (n->vn && fs->prefetch_on_open && fs->readahead)
		wcfs_prefetch_after(fs, n->vn, 0,
				    (uint64_t)wcfs_readahead_of(fs, n->vn) * (n->vn->blksize ? n->vn->blksize : 4096));
	wcfs_node_ref(fs->vt.itable, n);
	handle_link(fs, h);
	fi->fh = (uint64_t)(uintptr_t)h;
	/* Keep the page cache across opens: virtual files never change, and
	 * passed-through ones are invalidated on a new mtime (AUTO_INVAL_DATA).
	 * No direct_io by default, so mmap(MAP_SHARED) works. With -o direct_io
	 * a decoded file's reads skip the page cache: the reply is copied once,
	 * straight into the reader's buffer, instead of into page-cache folios
	 * the reader then copies again, and no folio is allocated per 4 KiB. */
	fi->keep_cache = 1;
	fi->noflush = 1;
	if (n->vn && fs->opt->direct_io)
		fi->direct_io = 1;
	if (fuse_reply_open(req, fi) == -ENOENT) { /* interrupted */
		handle_unlink(fs, h);
		if (h->fd >= 0)
			close(h->fd);
		wcfs_node_unref(fs->vt.itable, n);
		free(h);
	}
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	wcfs_handle *h = (wcfs_handle *)(uintptr_t)fi->fh;
	handle_unlink(fs_of(req), h);
	if (h->fd >= 0)
		close(h->fd);
	wcfs_node_unref(fs_of(req)->vt.itable, h->node);
	free(h);
	fuse_reply_err(req, 0);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	(void)ino;
	wcfs_idle_touch(fs_of(req));
	wcfs_handle *h = (wcfs_handle *)(uintptr_t)fi->fh;
	if (h->fd >= 0)
		wcfs_read_passthrough(req, h->fd, size, off);
	else
		wcfs_read_virtual(req, fs_of(req), h->node, size, off);
}

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino;
	(void)datasync;
	(void)fi;
	fuse_reply_err(req, 0); /* nothing is ever dirty */
}

/* ---- everything that writes: EROFS ------------------------------------ */

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	(void)ino, (void)attr, (void)to_set, (void)fi;
	fuse_reply_err(req, EROFS);
}
static void op_mknod(fuse_req_t req, fuse_ino_t p, const char *name, mode_t mode, dev_t rdev)
{
	(void)p, (void)name, (void)mode, (void)rdev;
	fuse_reply_err(req, EROFS);
}
static void op_mkdir(fuse_req_t req, fuse_ino_t p, const char *name, mode_t mode)
{
	(void)p, (void)name, (void)mode;
	fuse_reply_err(req, EROFS);
}
static void op_unlink(fuse_req_t req, fuse_ino_t p, const char *name)
{
	(void)p, (void)name;
	fuse_reply_err(req, EROFS);
}
static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t p, const char *name)
{
	(void)link, (void)p, (void)name;
	fuse_reply_err(req, EROFS);
}
static void op_rename(fuse_req_t req, fuse_ino_t p, const char *name, fuse_ino_t np,
		      const char *nname, unsigned int flags)
{
	(void)p, (void)name, (void)np, (void)nname, (void)flags;
	fuse_reply_err(req, EROFS);
}
static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t np, const char *nname)
{
	(void)ino, (void)np, (void)nname;
	fuse_reply_err(req, EROFS);
}
static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	(void)ino, (void)buf, (void)size, (void)off, (void)fi;
	fuse_reply_err(req, EROFS);
}
static void op_create(fuse_req_t req, fuse_ino_t p, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	(void)p, (void)name, (void)mode, (void)fi;
	fuse_reply_err(req, EROFS);
}
static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			size_t size, int flags)
{
	(void)ino, (void)name, (void)value, (void)size, (void)flags;
	fuse_reply_err(req, EROFS);
}
static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	(void)ino, (void)name;
	fuse_reply_err(req, EROFS);
}
static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
			 struct fuse_file_info *fi)
{
	(void)ino, (void)mode, (void)offset, (void)length, (void)fi;
	fuse_reply_err(req, EROFS);
}

const struct fuse_lowlevel_ops wcfs_ll_ops = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.readlink = op_readlink,
	.statfs = op_statfs,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.releasedir = op_releasedir,
	.open = op_open,
	.release = op_release,
	.read = op_read,
	.flush = op_flush,
	.fsync = op_fsync,
	.setattr = op_setattr,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.unlink = op_unlink,
	.rmdir = op_unlink,
	.symlink = op_symlink,
	.rename = op_rename,
	.link = op_link,
	.write = op_write,
	.create = op_create,
	.setxattr = op_setxattr,
	.removexattr = op_removexattr,
	.fallocate = op_fallocate,
};
