/* vtree.c - names, attributes and listings of the virtual tree (vtree.h). */
#include "fuse/vtree.h"

#include "core/hash.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int ends_with(const char *s, size_t n, const char *suffix, size_t *slen)
{
	size_t k = strlen(suffix);
	*slen = k;
	return n > k && memcmp(s + n - k, suffix, k) == 0;
}

/* Descriptors kept free of the inode table's (at most a quarter of the
 * limit): for open files, containers and the daemon itself. */
#define FD_RESERVE 4096u

void wcfs_vtree_set_fd_limit(wcfs_vtree *vt, uint64_t limit)
{
	uint64_t reserve = limit / 4 < FD_RESERVE ? limit / 4 : FD_RESERVE;
	vt->fd_limit = limit;
	vt->node_fds_max = limit - reserve;
}

/* "/proc/self/fd/N": a path to the object behind an O_PATH descriptor. */
static void fd_path(int fd, char *buf, size_t cap) { snprintf(buf, cap, "/proc/self/fd/%d", fd); }

/* Is st the entry named node n was made for? ESTALE otherwise: the name
 * was removed or now holds another file, and the kernel, seeing ESTALE,
 * looks the name up again (LOOKUP_REVAL) instead of reusing this node. */
static int same_entry(const wcfs_node *n, const struct stat *st)
{
	return st->st_dev == n->key.dev && st->st_ino == n->key.ino ? 0 : ESTALE;
}

/* The errno to answer for a named node's name that no longer resolves. */
static int named_errno(int e) { return e == ENOENT || e == ENOTDIR || e == ELOOP ? ESTALE : e; }

static int open_named(const wcfs_node *n, int flags);

/* A descriptor of directory node d: its own (*tmp = -1), or for a named
 * directory one opened by name through its parent's (*tmp: the caller
 * closes it). Returns the descriptor or -errno. */
static int dir_fd(const wcfs_node *d, int *tmp)
{
	*tmp = -1;
	if (!d->name)
		return d->fd;
	int fd = open_named(d, O_PATH | O_DIRECTORY);
	if (fd >= 0)
		*tmp = fd;
	return fd;
}

/* openat(2) of named node n's name with `flags`, its identity checked.
 * Returns the descriptor or -errno. */
static int open_named(const wcfs_node *n, int flags)
{
	int tmp;
	int dfd = dir_fd(n->dir, &tmp);
	if (dfd < 0)
		return dfd;
	/* The name may now hold a FIFO or a device, which must not be opened
	 * (a FIFO's open blocks a FUSE worker until a writer comes; a device's
	 * open may act): check before opening (only O_PATH opens nothing), and
	 * open without blocking, then check again, closing any race. */
	struct stat st;
	int err = 0, fd = -1;
	if (!(flags & O_PATH))
		err = fstatat(dfd, n->name, &st, AT_SYMLINK_NOFOLLOW) != 0 ? named_errno(errno)
									  : same_entry(n, &st);
	if (!err) {
		fd = openat(dfd, n->name, flags | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
		err = fd < 0 ? named_errno(errno) : 0;
	}
	if (tmp >= 0)
		close(tmp);
	if (!err && (err = fstat(fd, &st) != 0 ? errno : same_entry(n, &st)) == 0 &&
	    !(flags & (O_NONBLOCK | O_PATH)) && fcntl(fd, F_SETFL, flags & ~O_ACCMODE) != 0)
		err = errno;
	if (err && fd >= 0)
		close(fd);
	return err ? -err : fd;
}

/* The node whose source entry stands for n: n itself, or for a virtual
 * child (no descriptor, no name) its nearest ancestor with a descriptor,
 * its provider root. */
static const wcfs_node *source_node(const wcfs_node *n)
{
	while (n->fd < 0 && n->parent)
		n = n->parent;
	return n;
}

void wcfs_vtree_source_path(const wcfs_node *n, char *buf, size_t cap)
{
	n = source_node(n);
	if (n->name) { /* a named node: its directory's path and its name */
		wcfs_vtree_source_path(n->dir, buf, cap);
		size_t k = strlen(buf);
		snprintf(buf + k, cap - k, "/%s", n->name);
		return;
	}
	char link[64];
	fd_path(n->fd, link, sizeof link);
	ssize_t k = readlink(link, buf, cap - 1);
	if (k < 0)
		k = snprintf(buf, cap, "(inode %p)", (const void *)n) < 0 ? 0 : (ssize_t)strlen(buf);
	buf[k] = '\0';
}

/* The attributes of n's source entry (source_node). Returns 0 or an errno
 * value. */
static int source_stat(const wcfs_node *n, struct stat *st)
{
	n = source_node(n);
	if (!n->name)
		return fstatat(n->fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0 ? errno : 0;
	int tmp;
	int dfd = dir_fd(n->dir, &tmp);
	if (dfd < 0)
		return -dfd;
	int err = fstatat(dfd, n->name, st, AT_SYMLINK_NOFOLLOW) != 0 ? named_errno(errno)
								       : same_entry(n, st);
	if (tmp >= 0)
		close(tmp);
	return err;
}

int wcfs_vtree_open_source(wcfs_node *n, int flags)
{
	if (n->name)
		return open_named(n, flags);
	char path[64];
	fd_path(n->fd, path, sizeof path);
	int fd = open(path, flags | O_CLOEXEC);
	return fd >= 0 ? fd : -errno;
}

/* Whether the symlink `name` in dfd stands for a provider's source: its
 * target ends in p's source suffix too (the caller checked the name). */
static bool provider_link(int dfd, const char *name, const wcfs_provider *p)
{
	char target[PATH_MAX];
	size_t slen;
	ssize_t k = readlinkat(dfd, name, target, sizeof target);
	return k > 0 && (size_t)k < sizeof target && ends_with(target, (size_t)k, p->src_suffix, &slen);
}

int wcfs_vtree_readlink(wcfs_node *n, char *buf, size_t cap)
{
	if (n->type != S_IFLNK || cap == 0 || (n->fd < 0 && !n->name))
		return EINVAL;
	int fd = n->name ? open_named(n, O_PATH) : n->fd;
	if (fd < 0)
		return -fd;
	ssize_t k = readlinkat(fd, "", buf, cap - 1);
	int err = k < 0 ? errno : 0;
	if (n->name)
		close(fd);
	if (err)
		return err;
	buf[k] = '\0';
	const wcfs_provider *p = n->link_prov;
	size_t slen;
	if (p && ends_with(buf, (size_t)k, p->src_suffix, &slen)) {
		/* ../shared/model.wcodec reads as ../shared/model.safetensors */
		size_t stem = (size_t)k - slen, vlen = strlen(p->virt_suffix);
		if (stem + vlen >= cap)
			return ENAMETOOLONG;
		memcpy(buf + stem, p->virt_suffix, vlen + 1);
	}
	return 0;
}

/* Copy s to out (cap bytes, truncating) with every `from` replaced by `to`. */
/* s with every /proc/self/fd/N (the name a provider opens a source by)
 * replaced by `real`, into out (cap bytes with the NUL; cut if longer). */
static void name_fd_paths(const char *s, const char *real, char *out, size_t cap)
{
	static const char fdp[] = "/proc/self/fd/";
	size_t n = 0, rlen = strlen(real);
	while (*s && n + 1 < cap) {
		if (!strncmp(s, fdp, sizeof fdp - 1) && s[sizeof fdp - 1] >= '0' && s[sizeof fdp - 1] <= '9') {
			size_t k = rlen < cap - 1 - n ? rlen : cap - 1 - n;
			memcpy(out + n, real, k);
			n += k;
			for (s += sizeof fdp - 1; *s >= '0' && *s <= '9'; s++)
				;
		} else {
			out[n++] = *s++;
		}
	}
	out[n] = '\0';
}

int wcfs_vtree_open_failed(const char *real, const wcfs_provider *p, wc_err e)
{
	char detail[1024];
	name_fd_paths(wc_last_detail(), real, detail, sizeof detail);
	wc_log(WC_LOG_ERR, "%s: cannot open as %s: %s%s%s", real, p ? p->name : "?", wc_strerror(e),
	       *detail ? ": " : "", detail);
	/* A file past a limit (WC_E_RANGE) is as unreadable as a malformed
	 * one: EIO, not EOVERFLOW, which would speak of the reader's types. */
	int err = wc_err_to_errno(e);
	return err == EOPNOTSUPP || err == ENOMEM || err == ENOENT ? err : EIO;
}

/* Whether descriptor fd holds the entry st describes (same st_dev, st_ino). */
static bool fd_holds(int fd, const struct stat *st)
{
	struct stat now;
	return fstatat(fd, "", &now, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == 0 &&
	       now.st_dev == st->st_dev && now.st_ino == st->st_ino;
}

/* Whether provider root n's source, now st, differs from when it was
 * opened (size, mtime or ctime). */
static int source_changed(const wcfs_node *n, const struct stat *st)
{
	return n->src_size != st->st_size || n->src_mtim.tv_sec != st->st_mtim.tv_sec ||
	       n->src_mtim.tv_nsec != st->st_mtim.tv_nsec || n->src_ctim.tv_sec != st->st_ctim.tv_sec ||
	       n->src_ctim.tv_nsec != st->st_ctim.tv_nsec;
}

/* Find or create the node of a real entry, or of a provider root
 * (prov != NULL), at `name` in directory node dir (whose descriptor, maybe
 * a temporary one, is dirfd). */
static int node_for_entry(wcfs_vtree *vt, wcfs_node *dir, int dirfd, const char *name,
			  const struct stat *st, const wcfs_provider *prov,
			  const wcfs_provider *link_prov, wcfs_node **out)
{
	wcfs_key k = { .dev = st->st_dev, .ino = st->st_ino,
		       .child = prov ? WCFS_PROV_ROOT : WCFS_NO_CHILD };
	/* Its place, a named node's key (inode.h): the directory node's
	 * address and the name. */
	const uint64_t place = (wc_xxh3_64(name, strlen(name)) ^
				(uint64_t)(uintptr_t)dir * 0x9e3779b97f4a7c15ull) | 1;
	/* Files and symlinks are named nodes. A directory or a provider root
	 * keeps a descriptor of its own, unless the table's descriptors have
	 * reached the cap that keeps a reserve for open files, containers and
	 * the daemon itself: then it is a named node too, found again through
	 * its parent at the cost of an openat per use. Either node may exist
	 * already, whatever the count is now: look for both, so a known
	 * directory keeps its node id. */
	int named = !prov && !S_ISDIR(st->st_mode);
	k.where = named ? place : 0;
	wcfs_node *n = wcfs_itable_lookup(vt->itable, &k);
	if (!n && !named) {
		k.where = place;
		n = wcfs_itable_lookup(vt->itable, &k);
		k.where = 0;
	}
	if (n && n->prov && source_changed(n, st)) {
		/* Rewritten in place (cp onto it, not a rename): its container
		 * no longer matches the file. A new node, with a new node id,
		 * opens it again; the kernel drops the old inode and its page
		 * cache when it next looks the name up, and the old node's
		 * decoded tiles go with it. */
		wc_log(WC_LOG_INFO, "%s changed since it was opened: opening it again", name);
		wcfs_itable_retire(vt->itable, n);
		wcfs_node_forget(vt->itable, n, 1); /* the lookup just counted */
		n = NULL;
	}
	if (n) {
		*out = n;
		return 0;
	}
	if (!named && vt->node_fds_max && wcfs_itable_fds(vt->itable) >= vt->node_fds_max) {
		named = 1;
		k.where = place;
		static atomic_flag said = ATOMIC_FLAG_INIT;
		if (!atomic_flag_test_and_set(&said))
			wc_log(WC_LOG_INFO, "%llu directories and containers hold descriptors (limit "
			       "%llu): further ones are found again by name, which is slower; "
			       "a higher limit (ulimit -Hn, or LimitNOFILE= for a service) avoids "
			       "that (logged once)", (unsigned long long)vt->node_fds_max,
			       (unsigned long long)vt->fd_limit);
	}
	int fd = -1;
	wcfs_vnode *vn = NULL;
	mode_t type = st->st_mode & S_IFMT;
	if (!named || prov) {
		fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 && !prov && (errno == EMFILE || errno == ENFILE)) {
			/* Below the cap, yet no descriptor left: open passed-through
			 * files and containers hold the rest. A directory needs none
			 * of its own; it becomes a named node, as past the cap. */
			static atomic_flag said_out = ATOMIC_FLAG_INIT;
			if (!atomic_flag_test_and_set(&said_out))
				wc_log(WC_LOG_INFO, "no descriptor for directory %s (%s, %llu held by "
				       "directories and containers): it and others like it are found "
				       "again by name (logged once)", name, strerror(errno),
				       (unsigned long long)wcfs_itable_fds(vt->itable));
			named = 1;
			k.where = place;
		} else if (fd < 0) {
			return errno;
		} else if (!fd_holds(fd, st)) {
			close(fd); /* replaced between stat and open: let the kernel retry */
			return ENOENT;
		}
	}
	if (prov) {
		/* Open by /proc/self/fd/N: the very inode we looked up, with no
		 * path walk (SOURCE may lie under MOUNTPOINT, even be it: a walk
		 * could re-enter this file system from its own worker thread). */
		char path[64];
		fd_path(fd, path, sizeof path);
		wc_clear_detail();
		wc_err e = prov->open(&vt->pctx, path, &vn);
		if (e != WC_OK) {
			/* Name the file by its real path in the message (readlink
			 * only reads the descriptor's name: no walk). */
			char real[PATH_MAX];
			ssize_t k = readlink(path, real, sizeof real - 1);
			real[k > 0 ? k : 0] = '\0';
			if (k <= 0)
				snprintf(real, sizeof real, "%s", name);
			close(fd);
			return wcfs_vtree_open_failed(real, prov, e);
		}
		type = vn->kind == WCFS_VDIR ? S_IFDIR : S_IFREG;
	}
	if (named) {
		if (fd >= 0)
			close(fd); /* the container keeps its own */
		wcfs_node_ref(vt->itable, dir); /* the node keeps its directory */
		n = wcfs_node_new_named(&k, type, dir, name);
		if (!n) {
			wcfs_node_unref(vt->itable, dir);
			if (vn)
				vn->ops->release(vn);
			return ENOMEM;
		}
		n->prov = prov;
		n->vn = vn;
		n->link_prov = link_prov;
	} else {
		n = wcfs_node_new(&k, type, fd, prov, vn, NULL);
		if (!n)
			return ENOMEM;
	}
	if (prov) {
		n->src_size = st->st_size;
		n->src_mtim = st->st_mtim;
		n->src_ctim = st->st_ctim;
	}
	*out = wcfs_itable_insert(vt->itable, n);
	return 0;
}

static int lookup_child(wcfs_vtree *vt, wcfs_node *dir, const char *name, wcfs_node **out)
{
	const wcfs_vnode *d = dir->vn;
	uint32_t i;
	if (d->ops->child_find) {
		if (d->ops->child_find(d, name, &i) != WC_OK)
			return ENOENT;
	} else {
		for (i = 0; i < d->nchildren; i++)
			if (!strcmp(d->ops->child_name(d, i), name))
				break;
		if (i == d->nchildren)
			return ENOENT;
	}
	wcfs_key k = { .dev = 0, .ino = (uint64_t)(uintptr_t)dir, .child = i };
	wcfs_node *n = wcfs_itable_lookup(vt->itable, &k);
	if (n) {
		*out = n;
		return 0;
	}
	wcfs_vnode *vn;
	wc_clear_detail();
	wc_err e = d->ops->child_open(d, i, &vn);
	if (e != WC_OK) {
		wc_log(WC_LOG_ERR, "%s: cannot open: %s%s%s", name, wc_strerror(e),
		       *wc_last_detail() ? ": " : "", wc_last_detail());
		return wc_err_to_errno(e);
	}
	wcfs_node_ref(vt->itable, dir); /* the child keeps its directory */
	n = wcfs_node_new(&k, vn->kind == WCFS_VDIR ? S_IFDIR : S_IFREG, -1, NULL, vn, dir);
	if (!n) {
		wcfs_node_unref(vt->itable, dir);
		return ENOMEM;
	}
	*out = wcfs_itable_insert(vt->itable, n);
	return 0;
}

int wcfs_vtree_hide_mountpoint(wcfs_vtree *vt, const char *mountpoint)
{
	vt->mnt_name[0] = '\0';
	char *real = realpath(mountpoint, NULL);
	if (!real)
		return errno;
	char *slash = strrchr(real, '/');
	int err = 0;
	if (slash && slash[1] && strlen(slash + 1) < sizeof vt->mnt_name) {
		struct stat st;
		*slash = '\0';
		if (stat(real == slash ? "/" : real, &st) != 0) {
			err = errno;
		} else {
			vt->mnt_dev = st.st_dev;
			vt->mnt_ino = st.st_ino;
			strcpy(vt->mnt_name, slash + 1);
		}
	}
	free(real);
	return err;
}

/* Whether entry `name` of the real directory open as dirfd is the mountpoint
 * (wcfs_vtree_hide_mountpoint). One fstat, only for that name. */
static bool is_mountpoint(const wcfs_vtree *vt, int dirfd, const char *name)
{
	struct stat st;
	return vt->mnt_name[0] && !strcmp(name, vt->mnt_name) && fstat(dirfd, &st) == 0 &&
	       (uint64_t)st.st_dev == vt->mnt_dev && (uint64_t)st.st_ino == vt->mnt_ino;
}

/* wcfs_vtree_lookup of a real directory, whose descriptor is dirfd. */
static int lookup_real(wcfs_vtree *vt, wcfs_node *dir, int dirfd, const char *name,
		       wcfs_node **out)
{
	size_t n = strlen(name);
	struct stat st;
	if (is_mountpoint(vt, dirfd, name))
		return ENOENT;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		const wcfs_provider *p = wcfs_provider_for_source(name);
		if (p && (S_ISREG(st.st_mode) || (S_ISLNK(st.st_mode) && provider_link(dirfd, name, p))))
			return ENOENT; /* shown under its virtual name only */
		return node_for_entry(vt, dir, dirfd, name, &st, NULL, NULL, out);
	}
	if (errno != ENOENT)
		return errno;
	/* Not a real entry: is it the shown name of a provider's source? */
	for (const wcfs_provider *const *p = wcfs_providers; *p; p++) {
		size_t vlen;
		if (!ends_with(name, n, (*p)->virt_suffix, &vlen))
			continue;
		char src[NAME_MAX + 1];
		size_t stem = n - vlen, slen = strlen((*p)->src_suffix);
		if (stem + slen > NAME_MAX)
			continue;
		memcpy(src, name, stem);
		memcpy(src + stem, (*p)->src_suffix, slen + 1);
		if (fstatat(dirfd, src, &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		if (S_ISREG(st.st_mode))
			return node_for_entry(vt, dir, dirfd, src, &st, *p, NULL, out);
		if (S_ISLNK(st.st_mode) && provider_link(dirfd, src, *p))
			return node_for_entry(vt, dir, dirfd, src, &st, NULL, *p, out);
	}
	return ENOENT;
}

int wcfs_vtree_lookup(wcfs_vtree *vt, wcfs_node *dir, const char *name, wcfs_node **out)
{
	if (dir->vn)
		return dir->vn->kind == WCFS_VDIR ? lookup_child(vt, dir, name, out) : ENOTDIR;
	if (dir->type != S_IFDIR)
		return ENOTDIR;
	if (strlen(name) > NAME_MAX)
		return ENAMETOOLONG;
	int tmp;
	int dfd = dir_fd(dir, &tmp);
	if (dfd < 0)
		return -dfd;
	int err = lookup_real(vt, dir, dfd, name, out);
	if (tmp >= 0)
		close(tmp);
	return err;
}

/* st_ino of a node: the source's, or a stable mix of the directory's and
 * the child index with the top bit set for virtual children. */
static uint64_t child_ino(uint64_t dir_ino, uint32_t i)
{
	uint64_t h = dir_ino ^ ((uint64_t)(i + 1) * 0x9e3779b97f4a7c15ull);
	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 32;
	return h | (1ull << 63);
}

static uint64_t shown_ino(const wcfs_node *n)
{
	if (n->key.child >= WCFS_PROV_ROOT)
		return n->key.ino;
	return child_ino(shown_ino(n->parent), n->key.child);
}

/* st_blocks of virtual child n, given its source's: the child's share of
 * them by size, so that `du` of a provider's directory adds up to the source
 * file's disk use, as `du` of X.safetensors shows X.wcodec's. Without the
 * root's total, the child's own size. */
static blkcnt_t child_blocks(const wcfs_node *n, blkcnt_t src_blocks)
{
	const wcfs_node *root = n;
	while (root->parent)
		root = root->parent;
	uint64_t total = root->vn ? root->vn->size : 0;
	if (!total || src_blocks <= 0)
		return (blkcnt_t)((n->vn->size + 511) / 512);
	/* Shares rounded up: a non-empty file shows at least one block. */
	long double share = (long double)src_blocks * (long double)n->vn->size / (long double)total;
	blkcnt_t b = (blkcnt_t)share;
	return b + ((long double)b < share);
}

int wcfs_vtree_getattr(wcfs_vtree *vt, wcfs_node *n, struct stat *st)
{
	(void)vt;
	int err = source_stat(n, st);
	if (!err && n->link_prov && S_ISLNK(st->st_mode)) /* the target as readlink gives it */
		st->st_size += (off_t)strlen(n->link_prov->virt_suffix) -
			       (off_t)strlen(n->link_prov->src_suffix);
	if (err || !n->vn)
		return err;
	/* Immutable virtual objects: the source's mode without write bits, and
	 * its mtime for every time so tools see a stable file. */
	mode_t r = st->st_mode & 0444;
	if (n->vn->kind == WCFS_VDIR) {
		st->st_mode = S_IFDIR | r | (r >> 2);
		st->st_nlink = 2;
		st->st_size = 4096;
		st->st_blocks = 0;
		st->st_blksize = 4096;
	} else {
		st->st_mode = S_IFREG | r;
		st->st_nlink = 1;
		st->st_size = (off_t)n->vn->size;
		st->st_blksize = n->vn->blksize ? n->vn->blksize : 4096;
		if (n->parent)
			st->st_blocks = child_blocks(n, st->st_blocks);
	}
	st->st_ino = shown_ino(n);
	st->st_atim = st->st_mtim;
	st->st_ctim = st->st_mtim;
	return 0;
}

static int list_add(wcfs_dirlist *l, const char *name, uint64_t ino, mode_t type)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 32;
		wcfs_dirent *e = realloc(l->ent, cap * sizeof *e);
		if (!e)
			return ENOMEM;
		l->ent = e;
		l->cap = cap;
	}
	char *s = strdup(name);
	if (!s)
		return ENOMEM;
	l->ent[l->n++] = (wcfs_dirent){ .name = s, .ino = ino, .type = type };
	return 0;
}

void wcfs_dirlist_free(wcfs_dirlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->ent[i].name);
	free(l->ent);
	*l = (wcfs_dirlist){ 0 };
}

static int list_real(const wcfs_vtree *vt, int dfd, wcfs_dirlist *l)
{
	DIR *d = fdopendir(dfd);
	if (!d) {
		int e = errno;
		close(dfd);
		return e;
	}
	int err = 0;
	struct dirent *de;
	errno = 0;
	while (!err && (de = readdir(d))) {
		const char *name = de->d_name;
		if (!strcmp(name, ".") || !strcmp(name, "..") || is_mountpoint(vt, dfd, name))
			continue;
		const wcfs_provider *p = wcfs_provider_for_source(name);
		unsigned char type = de->d_type;
		if (p && type == DT_UNKNOWN) {
			struct stat st;
			type = fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 ? DT_UNKNOWN
			       : S_ISREG(st.st_mode)			     ? DT_REG
			       : S_ISLNK(st.st_mode)			     ? DT_LNK
									     : DT_UNKNOWN;
		}
		int is_link = p && type == DT_LNK && provider_link(dfd, name, p);
		if (p && (type == DT_REG || is_link)) {
			size_t n = strlen(name), slen = strlen(p->src_suffix);
			char shown[NAME_MAX + 1];
			size_t vlen = strlen(p->virt_suffix);
			if (n - slen + vlen > NAME_MAX) {
				static atomic_flag said = ATOMIC_FLAG_INIT;
				if (!atomic_flag_test_and_set(&said))
					wc_log(WC_LOG_WARN, "%s: not shown: its name as %s would be longer "
					       "than %d bytes (logged once)", name, p->virt_suffix, NAME_MAX);
				continue;
			}
			memcpy(shown, name, n - slen);
			memcpy(shown + n - slen, p->virt_suffix, vlen + 1);
			struct stat st;
			if (fstatat(dfd, shown, &st, AT_SYMLINK_NOFOLLOW) == 0)
				continue; /* a real entry of that name wins */
			err = list_add(l, shown, de->d_ino,
				       is_link ? S_IFLNK : p->kind == WCFS_VDIR ? S_IFDIR : S_IFREG);
		} else {
			err = list_add(l, name, de->d_ino, DTTOIF(de->d_type));
		}
		errno = 0;
	}
	if (!err && errno)
		err = errno;
	closedir(d);
	return err;
}

int wcfs_vtree_list(wcfs_vtree *vt, wcfs_node *dir, wcfs_dirlist *out)
{
	*out = (wcfs_dirlist){ 0 };
	int err = list_add(out, ".", shown_ino(dir), S_IFDIR);
	if (!err)
		err = list_add(out, "..", 1, S_IFDIR);
	if (err)
		goto fail;
	if (dir->vn) {
		if (dir->vn->kind != WCFS_VDIR) {
			err = ENOTDIR;
			goto fail;
		}
		for (uint32_t i = 0; i < dir->vn->nchildren && !err; i++)
			err = list_add(out, dir->vn->ops->child_name(dir->vn, i),
				       child_ino(shown_ino(dir), i), 0);
	} else {
		int dfd = wcfs_vtree_open_source(dir, O_RDONLY | O_DIRECTORY);
		err = dfd < 0 ? -dfd : list_real(vt, dfd, out);
	}
	if (!err)
		return 0;
fail:
	wcfs_dirlist_free(out);
	return err;
}
