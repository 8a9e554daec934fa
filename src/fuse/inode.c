/* inode.c - the inode table (inode.h): a chained hash table under one lock. */
#include "fuse/inode.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FUSE_ROOT_ID_VALUE 1u

struct wcfs_itable {
	pthread_mutex_t lock;
	wcfs_node **bucket;
	size_t nbucket; /* power of two */
	uint64_t count;
	uint64_t fds;   /* nodes in the table holding a descriptor */
	wcfs_node *root;
};

static size_t key_hash(const wcfs_key *k, size_t nbucket)
{
	/* splitmix64 finaliser over the three fields */
	uint64_t h = k->dev * 0x9e3779b97f4a7c15ull ^ k->ino ^ ((uint64_t)k->child << 32) ^
		     k->where;
	h ^= h >> 30;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 27;
	h *= 0x94d049bb133111ebull;
	h ^= h >> 31;
	return (size_t)h & (nbucket - 1);
}

static int key_eq(const wcfs_key *a, const wcfs_key *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->child == b->child &&
	       a->where == b->where;
}

/* A zeroed node with `extra` bytes after it (a named node's name), or NULL. */
static wcfs_node *node_alloc(const wcfs_key *k, mode_t type, size_t extra)
{
	wcfs_node *n = calloc(1, sizeof *n + extra);
	if (n) {
		n->key = *k;
		n->type = type;
		n->fd = -1;
	}
	return n;
}

wcfs_node *wcfs_node_new(const wcfs_key *k, mode_t type, int fd, const wcfs_provider *prov,
			 wcfs_vnode *vn, wcfs_node *parent)
{
	wcfs_node *n = node_alloc(k, type, 0);
	if (!n) {
		if (fd >= 0)
			close(fd);
		if (vn)
			vn->ops->release(vn);
		return NULL;
	}
	n->fd = fd;
	n->prov = prov;
	n->vn = vn;
	n->parent = parent;
	return n;
}

wcfs_node *wcfs_node_new_named(const wcfs_key *k, mode_t type, wcfs_node *dir, const char *name)
{
	/* The name lives in the node's own allocation: a walk makes one node
	 * per file, and a separate copy would cost a malloc chunk more. */
	size_t len = strlen(name);
	wcfs_node *n = node_alloc(k, type, len + 1);
	if (!n)
		return NULL;
	n->dir = dir;
	n->name = memcpy((char *)(n + 1), name, len + 1);
	return n;
}

wcfs_ra *wcfs_node_ra(wcfs_node *n)
{
	wcfs_ra *ra = atomic_load_explicit(&n->ra, memory_order_acquire);
	if (ra)
		return ra;
	wcfs_ra *fresh = malloc(sizeof *fresh);
	if (!fresh)
		return NULL;
	wcfs_ra_init(fresh);
	if (atomic_compare_exchange_strong_explicit(&n->ra, &ra, fresh, memory_order_acq_rel,
						    memory_order_acquire))
		return fresh;
	/* another thread's first read made it meanwhile: use that one */
	wcfs_ra_destroy(fresh);
	free(fresh);
	return ra;
}

/* Free a node that is out of the table; returns the reference it held on
 * another node (a virtual child's parent, a named node's directory) for the
 * caller to drop. */
static wcfs_node *node_free(wcfs_node *n)
{
	wcfs_node *parent = n->parent ? n->parent : n->dir;
	if (n->vn)
		n->vn->ops->release(n->vn);
	if (n->fd >= 0)
		close(n->fd);
	wcfs_ra *ra = atomic_load(&n->ra);
	if (ra) {
		wcfs_ra_destroy(ra);
		free(ra);
	}
	free(n); /* and a named node's name with it */
	return parent;
}

wcfs_itable *wcfs_itable_create(int root_fd, const struct stat *root_st)
{
	wcfs_itable *t = calloc(1, sizeof *t);
	if (!t)
		return NULL;
	t->nbucket = 1024;
	t->bucket = calloc(t->nbucket, sizeof *t->bucket);
	wcfs_key k = { .dev = root_st->st_dev, .ino = root_st->st_ino, .child = WCFS_NO_CHILD };
	t->root = t->bucket ? wcfs_node_new(&k, S_IFDIR, root_fd, NULL, NULL, NULL) : NULL;
	if (!t->root) {
		free(t->bucket);
		free(t);
		return NULL;
	}
	t->root->nlookup = 1; /* the kernel never forgets the root */
	pthread_mutex_init(&t->lock, NULL);
	size_t h = key_hash(&k, t->nbucket);
	t->root->hnext = t->bucket[h];
	t->bucket[h] = t->root;
	t->count = 1;
	t->fds = 1; /* the root's */
	return t;
}

void wcfs_itable_set_root_vnode(wcfs_itable *t, wcfs_vnode *vn) { t->root->vn = vn; }

void wcfs_itable_destroy(wcfs_itable *t)
{
	if (!t)
		return;
	/* Children first: free nodes without a parent reference last by simply
	 * unlinking everything and freeing in two passes. */
	for (int pass = 0; pass < 2; pass++) {
		for (size_t b = 0; b < t->nbucket; b++) {
			wcfs_node **pp = &t->bucket[b];
			while (*pp) {
				wcfs_node *n = *pp;
				if (pass == 0 && !n->parent && !n->dir) {
					pp = &n->hnext;
					continue;
				}
				*pp = n->hnext;
				node_free(n);
			}
		}
	}
	free(t->bucket);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

wcfs_node *wcfs_itable_root(wcfs_itable *t) { return t->root; }

wcfs_node *wcfs_node_of(wcfs_itable *t, uint64_t ino)
{
	return ino == FUSE_ROOT_ID_VALUE ? t->root : (wcfs_node *)(uintptr_t)ino;
}

uint64_t wcfs_ino_of(wcfs_itable *t, const wcfs_node *n)
{
	return n == t->root ? FUSE_ROOT_ID_VALUE : (uint64_t)(uintptr_t)n;
}

static wcfs_node *find_locked(wcfs_itable *t, const wcfs_key *k)
{
	for (wcfs_node *n = t->bucket[key_hash(k, t->nbucket)]; n; n = n->hnext)
		if (!n->retired && key_eq(&n->key, k))
			return n;
	return NULL;
}

wcfs_node *wcfs_itable_lookup(wcfs_itable *t, const wcfs_key *k)
{
	pthread_mutex_lock(&t->lock);
	wcfs_node *n = find_locked(t, k);
	if (n)
		n->nlookup++;
	pthread_mutex_unlock(&t->lock);
	return n;
}

static void grow_locked(wcfs_itable *t)
{
	size_t nb = t->nbucket * 2;
	wcfs_node **b = calloc(nb, sizeof *b);
	if (!b)
		return; /* keep the longer chains */
	for (size_t i = 0; i < t->nbucket; i++) {
		wcfs_node *n = t->bucket[i];
		while (n) {
			wcfs_node *next = n->hnext;
			size_t h = key_hash(&n->key, nb);
			n->hnext = b[h];
			b[h] = n;
			n = next;
		}
	}
	free(t->bucket);
	t->bucket = b;
	t->nbucket = nb;
}

wcfs_node *wcfs_itable_insert(wcfs_itable *t, wcfs_node *fresh)
{
	pthread_mutex_lock(&t->lock);
	wcfs_node *n = find_locked(t, &fresh->key);
	if (n) {
		n->nlookup++;
		pthread_mutex_unlock(&t->lock);
		wcfs_node *parent = node_free(fresh);
		if (parent)
			wcfs_node_unref(t, parent);
		return n;
	}
	if (t->count >= t->nbucket * 2)
		grow_locked(t);
	size_t h = key_hash(&fresh->key, t->nbucket);
	fresh->hnext = t->bucket[h];
	t->bucket[h] = fresh;
	fresh->nlookup = 1;
	t->count++;
	t->fds += fresh->fd >= 0;
	pthread_mutex_unlock(&t->lock);
	return fresh;
}

void wcfs_itable_retire(wcfs_itable *t, wcfs_node *n)
{
	pthread_mutex_lock(&t->lock);
	if (n != t->root)
		n->retired = 1; /* its key stays: it still names the source (st_ino) */
	pthread_mutex_unlock(&t->lock);
}

/* Called with the lock held: unlink n if unused. Returns n if the caller must
 * free it (outside the lock: releasing a vnode may take the cache's lock). */
static wcfs_node *maybe_unlink_locked(wcfs_itable *t, wcfs_node *n)
{
	if (n == t->root || n->nlookup || n->refs)
		return NULL;
	wcfs_node **pp = &t->bucket[key_hash(&n->key, t->nbucket)];
	while (*pp && *pp != n)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = n->hnext;
	t->count--;
	t->fds -= n->fd >= 0;
	return n;
}

static void free_chain(wcfs_itable *t, wcfs_node *dead)
{
	while (dead) {
		wcfs_node *parent = node_free(dead);
		dead = NULL;
		if (parent) {
			pthread_mutex_lock(&t->lock);
			parent->refs--;
			dead = maybe_unlink_locked(t, parent);
			pthread_mutex_unlock(&t->lock);
		}
	}
}

void wcfs_node_ref(wcfs_itable *t, wcfs_node *n)
{
	pthread_mutex_lock(&t->lock);
	n->refs++;
	pthread_mutex_unlock(&t->lock);
}

void wcfs_node_unref(wcfs_itable *t, wcfs_node *n)
{
	pthread_mutex_lock(&t->lock);
	n->refs--;
	wcfs_node *dead = maybe_unlink_locked(t, n);
	pthread_mutex_unlock(&t->lock);
	free_chain(t, dead);
}

void wcfs_node_forget(wcfs_itable *t, wcfs_node *n, uint64_t nlookup)
{
	pthread_mutex_lock(&t->lock);
	n->nlookup = nlookup > n->nlookup ? 0 : n->nlookup - nlookup;
	wcfs_node *dead = maybe_unlink_locked(t, n);
	pthread_mutex_unlock(&t->lock);
	free_chain(t, dead);
}

uint64_t wcfs_itable_fds(wcfs_itable *t)
{
	pthread_mutex_lock(&t->lock);
	uint64_t c = t->fds;
	pthread_mutex_unlock(&t->lock);
	return c;
}

uint64_t wcfs_itable_count(wcfs_itable *t)
{
	pthread_mutex_lock(&t->lock);
	uint64_t c = t->count;
	pthread_mutex_unlock(&t->lock);
	return c;
}
