/*
 * vtree.h - the virtual tree over SOURCE: names, attributes, listings.
 *
 * Naming rules (docs/wcodecfs.1, "NAME CLASHES"):
 *   - a regular file claimed by a provider (X.wcodec) is hidden under its own
 *     name and shown as stem + virt_suffix (X.safetensors);
 *   - a real entry with the shown name wins over the provider: the real
 *     X.safetensors passes through and X.wcodec stays hidden (the real bytes
 *     need no decoding and are what was packed);
 *   - everything else passes through under its own name.
 */
#ifndef WCFS_VTREE_H
#define WCFS_VTREE_H

#include <stdint.h>
#include <sys/stat.h>

#include "core/wc_error.h"
#include "fuse/inode.h"
#include "fuse/provider.h"

typedef struct wcfs_vtree {
	wcfs_itable *itable;
	wcfs_provider_ctx pctx;
	uint64_t fd_limit;      /* RLIMIT_NOFILE's soft limit; 0: none known */
	uint64_t node_fds_max;  /* once the inode table holds this many descriptors,
				 * new directories and provider roots are named
				 * nodes too (inode.h); 0: no cap */
	/* The mountpoint, when it lies inside SOURCE: the entry `mnt_name`
	 * of the directory (mnt_dev, mnt_ino). It is hidden (wcfs_vtree_hide_
	 * mountpoint). mnt_name[0] == 0: nothing hidden. */
	uint64_t mnt_dev, mnt_ino;
	char mnt_name[256];
} wcfs_vtree;

/* Hide MOUNTPOINT from the tree when it lies inside SOURCE: once mounted,
 * the source's entry of that name leads into this mount itself, so showing
 * it would make a loop, and the daemon's own descriptor of it would keep
 * `fusermount3 -u` failing with EBUSY. Call before mounting (the path is
 * resolved and its parent directory stat()ed now, while that does not
 * enter the mount). Returns 0, or an errno value of realpath/stat. */
int wcfs_vtree_hide_mountpoint(wcfs_vtree *vt, const char *mountpoint);

/* Set vt's descriptor limit (RLIMIT_NOFILE's soft limit; 0 if unlimited or
 * unknown): directory and provider-root nodes the kernel holds keep a
 * descriptor each, and may take all but a reserve of a quarter of it, at
 * most 4096, for open files, containers and the daemon itself. A directory
 * met when no descriptor is left (EMFILE or ENFILE) below the cap becomes a
 * named node too; a container then fails with that error. */
void wcfs_vtree_set_fd_limit(wcfs_vtree *vt, uint64_t limit);

/* Look `name` up in directory node `dir` and return its node with one more
 * kernel lookup. Returns 0 or an errno value (ENOENT, ENOTDIR, EIO for a
 * provider that fails to open the source, with the reason logged; ESTALE
 * when dir is a named node whose name no longer holds it). */
int wcfs_vtree_lookup(wcfs_vtree *vt, wcfs_node *dir, const char *name, wcfs_node **out);

/* The attributes shown for node n (st_ino is the source's, or synthesised
 * for virtual children). Returns 0 or an errno value (ESTALE: a named node
 * whose name was removed or now holds another file). */
int wcfs_vtree_getattr(wcfs_vtree *vt, wcfs_node *n, struct stat *st);

/* A snapshot of a directory's shown entries, taken at opendir; readdir
 * offsets index it, so a listing is stable while the source changes. */
typedef struct wcfs_dirent {
	char *name;
	uint64_t ino;  /* st_ino shown by readdir */
	mode_t type;   /* S_IFDIR, S_IFREG, ... (0: unknown) */
} wcfs_dirent;

typedef struct wcfs_dirlist {
	wcfs_dirent *ent;
	size_t n, cap;
} wcfs_dirlist;

/* List directory node dir ("." and ".." included). Returns 0 or an errno. */
int wcfs_vtree_list(wcfs_vtree *vt, wcfs_node *dir, wcfs_dirlist *out);
void wcfs_dirlist_free(wcfs_dirlist *l);

/* Open the source of node n for reading (a passed-through regular file):
 * returns a new descriptor or -errno (-ESTALE: a named node whose name was
 * removed or now holds another file). */
int wcfs_vtree_open_source(wcfs_node *n, int flags);

/* The target of symlink node n into buf (cap bytes with the NUL; longer
 * targets are cut). Returns 0 or an errno value (EINVAL: not a symlink;
 * ESTALE as above). */
int wcfs_vtree_readlink(wcfs_node *n, char *buf, size_t cap);

/* The path of n's source entry (a virtual child's: its provider root's)
 * into buf (cap bytes with the NUL; longer paths are cut), for the log:
 * from /proc/self/fd of the nearest descriptor, then the names of named
 * nodes; "(inode ADDRESS)" where that link cannot be read. */
void wcfs_vtree_source_path(const wcfs_node *n, char *buf, size_t cap);

/* Log that provider p could not open (or prepare) the source named `real`
 * with error e: "REAL: cannot open as NAME: ERROR: DETAIL", the detail's
 * /proc/self/fd/N names (what providers open sources by) replaced by real.
 * Returns the errno to answer: EOPNOTSUPP (WC_E_UNSUPPORTED), ENOMEM,
 * ENOENT (gone), else EIO (malformed, damaged, past a limit). */
int wcfs_vtree_open_failed(const char *real, const wcfs_provider *p, wc_err e);

#endif /* WCFS_VTREE_H */
