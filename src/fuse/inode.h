/*
 * inode.h - the table of inodes the kernel knows (FUSE node ids).
 *
 * A node is one object of the virtual tree:
 *   - a source entry passed through (directory, file, symlink), or
 *   - a provider root (X.wcodec shown as X.safetensors, Y.qvq shown as Y/),
 *   - or a child of a provider's virtual directory.
 * The FUSE node id is the node's address (FUSE_ROOT_ID stands for the root),
 * as in libfuse's passthrough_ll. Nodes are found again by a key so repeated
 * lookups of one object give the same node id: a source entry's (st_dev,
 * st_ino), a virtual child's parent key plus its index.
 *
 * Directories and provider roots keep an O_PATH descriptor of their source
 * entry (up to a cap, vtree.h; beyond it they are named nodes too). Other
 * passed-through entries (files, symlinks) are *named nodes*:
 * they keep their directory's node and their name instead, and are found
 * again through the directory's descriptor with (st_dev, st_ino) checked
 * (vtree.c; ESTALE when the name now holds another file). The kernel
 * forgets an inode only under memory pressure, so a descriptor per file
 * would let a walk of a large tree take every descriptor; this way a walk
 * costs one per directory. A named node's key includes its place (a hash
 * of directory and name), so a hard link or a renamed file looked up under
 * another name gets a node of its own that resolves by that name.
 *
 * A node lives while the kernel holds lookups on it (nlookup, decremented by
 * FORGET) or the daemon holds references (open handles, a virtual child's
 * link to its parent). When both reach zero it is freed: its O_PATH
 * descriptor is closed and its provider vnode released (which drops the
 * vnode's tiles from the cache).
 */
#ifndef WCFS_INODE_H
#define WCFS_INODE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "fuse/provider.h"
#include "fuse/readahead.h"

/* wcfs_key.child of a source entry passed through, of a provider root; any
 * other value is the index of a virtual child, whose key's ino is the
 * address of its directory's node (which the child keeps alive). */
#define WCFS_NO_CHILD UINT32_MAX
#define WCFS_PROV_ROOT (UINT32_MAX - 1)

typedef struct wcfs_key {
	uint64_t dev, ino; /* the source entry's; a virtual child: its provider root's */
	uint32_t child;    /* WCFS_NO_CHILD, or the child index in the virtual directory */
	uint64_t where;    /* a named node: a hash of its directory and name; else 0 */
} wcfs_key;

typedef struct wcfs_node wcfs_node;
struct wcfs_node {
	wcfs_node *hnext; /* hash chain */
	wcfs_key key;
	uint64_t nlookup; /* kernel lookups not yet forgotten */
	uint64_t refs;    /* daemon references: handles, children */
	int fd;           /* O_PATH|O_NOFOLLOW descriptor of the source entry; -1 for
			   * a virtual child or a named node */
	mode_t type;      /* S_IFDIR, S_IFREG, S_IFLNK, ... as shown */
	const wcfs_provider *prov; /* provider root: its provider; else NULL */
	wcfs_vnode *vn;   /* provider root or virtual child: its vnode; else NULL */
	/* Provider root: its source file's size, mtime and ctime when it was
	 * opened, to notice a file rewritten in place (vtree.c). */
	off_t src_size;
	struct timespec src_mtim, src_ctim;
	int retired;      /* wcfs_itable_retire: kept, but no lookup finds it */
	/* A symlink named like link_prov's sources whose target is one too
	 * (model.wcodec -> ../shared/model.wcodec): shown, and its target
	 * read, with the provider's shown suffix (vtree.c); else NULL. */
	const wcfs_provider *link_prov;
	wcfs_node *parent; /* virtual child: its directory (referenced); else NULL */
	wcfs_node *dir;   /* named node: the directory it is in (referenced); else NULL */
	const char *name; /* named node: its name in dir (stored after the node); else NULL */
	/* Readahead streams, made on the first tile read (wcfs_node_ra):
	 * directories, passed-through files and most virtual children never
	 * need them, and a file's 64 slots are 2 KiB. */
	_Atomic(wcfs_ra *) ra;
	/* Failed reads logged (ops.c): the last failing tile + 1 and how often
	 * it failed in a row, so a reader retrying a damaged tile page by page
	 * does not flood the log. */
	_Atomic uint64_t bad_tile;
	_Atomic uint64_t bad_repeats;
	/* A read met a damaged tile of this virtual file: later opens fail
	 * with EIO (the source is damaged; a rewritten source gets a new node
	 * at its next lookup), logged once (damage_logged). */
	atomic_bool damaged, damage_logged;
};

typedef struct wcfs_itable wcfs_itable;

/* Create the table with the root node for the source directory open as
 * root_fd (O_PATH; the table owns it). Returns NULL on allocation failure. */
wcfs_itable *wcfs_itable_create(int root_fd, const struct stat *root_st);
/* Free every node (at unmount; no handle may be open). */
void wcfs_itable_destroy(wcfs_itable *t);

wcfs_node *wcfs_itable_root(wcfs_itable *t);
/* Make the root a virtual directory (the mount of a bucket, bucket.h):
 * lookups and listings go to vn (a WCFS_VDIR, which the table takes);
 * its attributes stay root_fd's, less write permission. */
void wcfs_itable_set_root_vnode(wcfs_itable *t, wcfs_vnode *vn);
/* The node of a FUSE node id handed out by this table. */
wcfs_node *wcfs_node_of(wcfs_itable *t, uint64_t ino);
/* The FUSE node id of a node. */
uint64_t wcfs_ino_of(wcfs_itable *t, const wcfs_node *n);

/* Find the node with key k and add one kernel lookup to it. Returns NULL if
 * there is none. */
wcfs_node *wcfs_itable_lookup(wcfs_itable *t, const wcfs_key *k);

/* Insert `fresh` (a node made by wcfs_node_new, not in any table) with one
 * kernel lookup, unless a node with its key appeared meanwhile: then that
 * node gets the lookup, `fresh` is freed and the existing one returned. */
wcfs_node *wcfs_itable_insert(wcfs_itable *t, wcfs_node *fresh);

/* Make n unreachable by key, so the next lookup of its key makes a new node
 * (with a new node id), while n lives on for the kernel lookups and handles
 * it has. Used when a provider root's source file was rewritten in place.
 * Idempotent; thread-safe. */
void wcfs_itable_retire(wcfs_itable *t, wcfs_node *n);

/* A detached node; takes ownership of fd, vn and a reference on parent. NULL
 * on allocation failure (then fd is closed, vn released, parent kept). */
wcfs_node *wcfs_node_new(const wcfs_key *k, mode_t type, int fd, const wcfs_provider *prov,
			 wcfs_vnode *vn, wcfs_node *parent);

/* A detached named node (above): the entry `name` (copied) of directory
 * node dir, taking ownership of a reference on dir. NULL on allocation
 * failure (then dir's reference stays with the caller). */
wcfs_node *wcfs_node_new_named(const wcfs_key *k, mode_t type, wcfs_node *dir, const char *name);

/* n's readahead stream detector, made on first use; NULL if out of memory
 * (the read then goes without readahead). Thread-safe. */
wcfs_ra *wcfs_node_ra(wcfs_node *n);

/* Daemon references (open handles). */
void wcfs_node_ref(wcfs_itable *t, wcfs_node *n);
void wcfs_node_unref(wcfs_itable *t, wcfs_node *n);
/* FORGET: drop nlookup kernel lookups. */
void wcfs_node_forget(wcfs_itable *t, wcfs_node *n, uint64_t nlookup);

/* Number of nodes in the table (for the debug log and tests). */
uint64_t wcfs_itable_count(wcfs_itable *t);
/* Number of them holding an O_PATH descriptor of their source entry (the
 * root, directories, provider roots; not named nodes, not virtual
 * children). */
uint64_t wcfs_itable_fds(wcfs_itable *t);

#endif /* WCFS_INODE_H */
