/* bucket.c - an object store's prefix as the mount's tree (bucket.h). */
#include "fuse/bucket.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "source/source.h"

/* A passed-through object is cut into tiles of this many bytes: one ranged
 * GET each, large enough that a request's latency is small beside its
 * transfer, small enough that a reader of a few bytes waits little. */
#define OBJECT_CHUNK ((uint32_t)1 << 20)

/* The job kind of an object's chunk (engine/backend.h: kinds 1..7 are the
 * formats'; 1 is .qvq's, 2 lossy .wcodec tiles'): the payload is the
 * bytes. */
#define WCFS_JOB_OBJECT 3u

typedef struct bentry {
	char *name;    /* shown name (a single path component) */
	char *key;     /* an object: its full key; a directory: NULL */
	uint64_t size; /* an object: its bytes as listed */
	uint32_t dir;  /* a directory: its index in the tree's dirs */
	bool wcodec;   /* X.wcodec shown as X.safetensors */
	bool hidden;   /* while finishing: a pack beside its original */
} bentry;

typedef struct bdir {
	bentry *ent;
	uint32_t n, cap;
	uint32_t last_sub; /* while listing: the entry of the last subdirectory met + 1 (0: none) */
} bdir;

typedef struct btree {
	atomic_uint refs; /* vnodes of the tree */
	const wcfs_provider_ctx *ctx;
	char *bucket_uri; /* "s3://BUCKET/" */
	size_t prefix_len; /* bytes of PREFIX ("models/") each listed key starts with */
	bdir *dirs;       /* dirs[0]: the root */
	uint32_t ndirs, cap;
	uint64_t objects, skipped;
	bool nomem;
} btree;

static void tree_release(btree *t)
{
	if (atomic_fetch_sub(&t->refs, 1) != 1)
		return;
	for (uint32_t d = 0; d < t->ndirs; d++) {
		for (uint32_t i = 0; i < t->dirs[d].n; i++) {
			free(t->dirs[d].ent[i].name);
			free(t->dirs[d].ent[i].key);
		}
		free(t->dirs[d].ent);
	}
	free(t->dirs);
	free(t->bucket_uri);
	free(t);
}

/* ---- the listing ---------------------------------------------------- */

static bentry *add_entry(btree *t, uint32_t d, const char *name, size_t len)
{
	bdir *dir = &t->dirs[d];
	if (dir->n == dir->cap) {
		uint32_t cap = dir->cap ? dir->cap * 2 : 8;
		bentry *e = realloc(dir->ent, cap * sizeof *e);
		if (!e)
			return NULL;
		dir->ent = e;
		dir->cap = cap;
	}
	bentry *e = &dir->ent[dir->n];
	*e = (bentry){ .name = strndup(name, len) };
	if (!e->name)
		return NULL;
	dir->n++;
	return e;
}

/* strcmp of name[0..len) + "/" against b + "/": the order of the keys
 * under two subdirectories of one directory. */
static int cmp_dir(const char *name, size_t len, const char *b)
{
	size_t i = 0;
	for (; i < len && b[i] && name[i] == b[i]; i++)
		;
	/* names hold no '/': equal only where both ended */
	unsigned char x = i < len ? (unsigned char)name[i] : '/', y = b[i] ? (unsigned char)b[i] : '/';
	return x - y;
}

/* The index of subdirectory `name` (len bytes) of directory d, made if new;
 * UINT32_MAX when out of memory. Keys come in order (ListObjectsV2 lists
 * them so), and the keys under one subdirectory are together: the one met
 * last is the one asked for, or one after it, which is new. Only a listing
 * out of order makes a directory of its subdirectories searched. */
static uint32_t subdir(btree *t, uint32_t d, const char *name, size_t len)
{
	bdir *dir = &t->dirs[d];
	const int c = dir->last_sub ? cmp_dir(name, len, dir->ent[dir->last_sub - 1].name) : 1;
	if (c == 0)
		return dir->ent[dir->last_sub - 1].dir;
	for (uint32_t i = 0; c < 0 && i < dir->n; i++)
		if (!dir->ent[i].key && !strncmp(dir->ent[i].name, name, len) && !dir->ent[i].name[len]) {
			dir->last_sub = i + 1;
			return dir->ent[i].dir;
		}
	if (t->ndirs == t->cap) {
		uint32_t cap = t->cap * 2;
		bdir *dirs = realloc(t->dirs, cap * sizeof *dirs);
		if (!dirs)
			return UINT32_MAX;
		t->dirs = dirs;
		t->cap = cap;
		dir = &t->dirs[d];
	}
	bentry *e = add_entry(t, d, name, len);
	if (!e)
		return UINT32_MAX;
	e->dir = t->ndirs;
	t->dirs[t->ndirs++] = (bdir){ 0 };
	t->dirs[d].last_sub = t->dirs[d].n;
	return e->dir;
}

/* Whether a key's part [p, p + len) can be a name: not empty, ".", ".."
 * nor longer than NAME_MAX. */
static bool good_part(const char *p, size_t len)
{
	return len && len <= NAME_MAX && !(len == 1 && p[0] == '.') && !(len == 2 && p[0] == '.' && p[1] == '.');
}

static int on_object(void *ctx, const char *key, uint64_t size)
{
	btree *t = ctx;
	const char *rel = key + t->prefix_len;
	size_t klen = strlen(key);
	if (klen <= t->prefix_len || key[klen - 1] == '/') {
		t->skipped += klen > t->prefix_len; /* a "folder" marker */
		return 0;
	}
	uint32_t d = 0;
	for (;;) {
		const char *slash = strchr(rel, '/');
		size_t len = slash ? (size_t)(slash - rel) : strlen(rel);
		if (!good_part(rel, len)) {
			t->skipped++;
			return 0;
		}
		if (!slash)
			break;
		if ((d = subdir(t, d, rel, len)) == UINT32_MAX) {
			t->nomem = true;
			return 1;
		}
		rel = slash + 1;
	}
	bentry *e = add_entry(t, d, rel, strlen(rel));
	if (!e || !(e->key = strdup(key))) {
		t->nomem = true;
		return 1;
	}
	e->size = size;
	t->objects++;
	return 0;
}

static int by_name(const void *a, const void *b)
{
	const bentry *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	/* a directory before an object of its name: the object is dropped */
	return c ? c : (x->key != NULL) - (y->key != NULL);
}

static const char *entry_name(const void *d, uint32_t k) { return ((const bdir *)d)->ent[k].name; }

/* Show X.wcodec as X.safetensors unless an entry of that name is beside it
 * (the original wins, the pack stays hidden), then sort the directory by
 * name, dropping an object named like a directory beside it. The names
 * looked for are found in the directory sorted as listed (one sort, one
 * binary search a pack). */
static wc_err finish_dir(btree *t, bdir *dir)
{
	const char *src = wcfs_provider_wcodec.src_suffix, *virt = wcfs_provider_wcodec.virt_suffix;
	const size_t slen = strlen(src), vlen = strlen(virt);
	qsort(dir->ent, dir->n, sizeof *dir->ent, by_name);
	for (uint32_t i = 0; i < dir->n; i++) {
		bentry *e = &dir->ent[i];
		size_t n = strlen(e->name);
		if (!e->key || n <= slen || strcmp(e->name + n - slen, src) || n - slen + vlen > NAME_MAX)
			continue;
		char shown[NAME_MAX + 1];
		uint32_t k;
		memcpy(shown, e->name, n - slen);
		memcpy(shown + n - slen, virt, vlen + 1);
		e->hidden = wcfs_sorted_find(shown, dir->n, entry_name, dir, &k) == WC_OK;
		e->wcodec = !e->hidden;
	}
	uint32_t k = 0;
	for (uint32_t i = 0; i < dir->n; i++) {
		bentry *e = &dir->ent[i];
		if (e->hidden) {
			t->skipped++;
			free(e->name);
			free(e->key);
			continue;
		}
		if (e->wcodec) {
			size_t n = strlen(e->name) - slen;
			char *s = malloc(n + vlen + 1);
			if (!s)
				return wc_fail(WC_E_NOMEM, "out of memory");
			memcpy(s, e->name, n);
			memcpy(s + n, virt, vlen + 1);
			free(e->name);
			e->name = s;
		}
		dir->ent[k++] = *e;
	}
	dir->n = k;
	qsort(dir->ent, dir->n, sizeof *dir->ent, by_name);
	k = 0;
	for (uint32_t i = 0; i < dir->n; i++) {
		if (k && !strcmp(dir->ent[k - 1].name, dir->ent[i].name)) {
			wc_log(WC_LOG_WARN, "%s%s: an object named like a directory beside it: not shown",
			       t->bucket_uri, dir->ent[i].key ? dir->ent[i].key : dir->ent[i].name);
			free(dir->ent[i].name);
			free(dir->ent[i].key);
			t->skipped++;
			continue;
		}
		dir->ent[k++] = dir->ent[i];
	}
	dir->n = k;
	return WC_OK;
}

/* ---- passed-through objects ---------------------------------------- */

typedef struct obj_vnode {
	wcfs_vnode base;     /* first member */
	wc_tile_source ts;   /* chunks of the object, for the tile cache */
	atomic_uint refs;    /* the vnode's user, and the cache's queued reads */
	btree *t;
	char *uri;
	pthread_mutex_t open_lock;
	_Atomic(wc_source *) src; /* opened by the first open or read */
} obj_vnode;

static obj_vnode *obj_of(const wc_tile_source *s)
{
	return (obj_vnode *)(uintptr_t)((const char *)s - offsetof(obj_vnode, ts));
}

static void obj_unref(obj_vnode *o)
{
	if (atomic_fetch_sub(&o->refs, 1) != 1)
		return;
	wc_source *src = atomic_load(&o->src);
	if (src)
		wc_source_close(src);
	pthread_mutex_destroy(&o->open_lock);
	tree_release(o->t);
	free(o->uri);
	free(o);
}

/* The object's source, opened (one GET) on first use, its size checked
 * against the listing's. */
static wc_err obj_source(obj_vnode *o, wc_source **out)
{
	wc_source *src = atomic_load_explicit(&o->src, memory_order_acquire);
	wc_err e = WC_OK;
	if (!src) {
		pthread_mutex_lock(&o->open_lock);
		if (!(src = atomic_load_explicit(&o->src, memory_order_relaxed)) &&
		    !(e = wc_source_open(o->uri, &src))) {
			if (wc_source_size(src) != o->base.size) {
				e = wc_fail(WC_E_FORMAT, "%s: %llu bytes now, %llu when listed at mount: the "
					    "object changed (mount again to see it)", o->uri,
					    (unsigned long long)wc_source_size(src),
					    (unsigned long long)o->base.size);
				wc_source_close(src);
				src = NULL;
			} else {
				atomic_store_explicit(&o->src, src, memory_order_release);
			}
		}
		pthread_mutex_unlock(&o->open_lock);
	}
	*out = src;
	return e;
}

static uint32_t obj_ntiles(const wc_tile_source *s)
{
	const obj_vnode *o = obj_of(s);
	return (uint32_t)((o->base.size + OBJECT_CHUNK - 1) / OBJECT_CHUNK);
}

static uint32_t obj_dsize(const wc_tile_source *s, uint32_t tile)
{
	uint64_t off = (uint64_t)tile * OBJECT_CHUNK, size = obj_of(s)->base.size;
	return off >= size ? 0 : size - off < OBJECT_CHUNK ? (uint32_t)(size - off) : OBJECT_CHUNK;
}

static wc_err obj_read(const wc_tile_source *s, uint32_t tile, uint8_t *buf)
{
	obj_vnode *o = obj_of(s);
	wc_source *src;
	wc_err e = obj_source(o, &src);
	return e ? e : wc_source_read(src, buf, obj_dsize(s, tile), (uint64_t)tile * OBJECT_CHUNK, "bytes");
}

static void obj_describe(const wc_tile_source *s, uint32_t tile, wc_tile_job *job)
{
	(void)s;
	(void)tile;
	job->kind = WCFS_JOB_OBJECT;
	job->layout = (wc_layout){ 0 };
	job->chunk_symbols = 0;
	job->tables = NULL;
	job->ntables = 0;
	job->table_key = 0;
	job->dhash = 0;
	job->kind_data = NULL;
	job->dict = NULL;
	job->dict_entries = 0;
}

static void obj_retain(wc_tile_source *s) { atomic_fetch_add(&obj_of(s)->refs, 1); }
static void obj_release(wc_tile_source *s) { obj_unref(obj_of(s)); }

static void obj_name_tile(const wc_tile_source *s, uint32_t tile, char *buf, size_t cap)
{
	uint64_t off = (uint64_t)tile * OBJECT_CHUNK;
	snprintf(buf, cap, "%s: bytes %llu-%llu", obj_of(s)->uri, (unsigned long long)off,
		 (unsigned long long)(off + obj_dsize(s, tile)));
}

static const wc_tile_source_ops obj_tile_ops = {
	.ntiles = obj_ntiles,
	.tile_dsize = obj_dsize,
	.tile_csize = obj_dsize,
	.read_payload = obj_read,
	.describe_job = obj_describe,
	.retain = obj_retain,
	.release = obj_release,
	.name_tile = obj_name_tile,
};

/* The chunk's bytes are its payload: a copy, done where the job runs. */
static wc_err object_job_decode(wc_tile_job *job)
{
	if (job->payload_size != job->out_size)
		return wc_job_fail(job, WC_E_CORRUPT, "object chunk of %u bytes for %u", job->payload_size,
				   job->out_size);
	memcpy(job->out, job->payload, job->out_size);
	return job->status = WC_OK;
}

static const wc_job_kind_ops object_job_kind = { .name = "object", .cpu_decode = object_job_decode };

static void obj_vnode_release(wcfs_vnode *n)
{
	obj_vnode *o = (obj_vnode *)n;
	if (o->t->ctx->cache)
		wc_cache_drop_source(o->t->ctx->cache, o->ts.id);
	obj_unref(o);
}

static wc_err obj_prepare(wcfs_vnode *n)
{
	wc_source *src;
	return obj_source((obj_vnode *)n, &src);
}

static wc_err obj_locate(const wcfs_vnode *n, uint64_t off, wcfs_span *span)
{
	obj_vnode *o = (obj_vnode *)(uintptr_t)n;
	if (off >= n->size)
		return wc_fail(WC_E_RANGE, "offset %llu past the end (%llu)", (unsigned long long)off,
			       (unsigned long long)n->size);
	uint32_t tile = (uint32_t)(off / OBJECT_CHUNK);
	*span = (wcfs_span){ .kind = WCFS_SPAN_TILE, .off = (uint64_t)tile * OBJECT_CHUNK,
			     .len = obj_dsize(&o->ts, tile), .src = &o->ts, .tile = tile, .fd = -1 };
	return WC_OK;
}

static const wcfs_vnode_ops obj_ops = {
	.release = obj_vnode_release,
	.prepare = obj_prepare,
	.locate = obj_locate,
};

/* ---- directories ---------------------------------------------------- */

typedef struct dir_vnode {
	wcfs_vnode base; /* first member */
	btree *t;
	uint32_t dir;
} dir_vnode;

static const bdir *dir_of(const wcfs_vnode *n)
{
	const dir_vnode *v = (const dir_vnode *)n;
	return &v->t->dirs[v->dir];
}

static void dir_release(wcfs_vnode *n)
{
	tree_release(((dir_vnode *)n)->t);
	free(n);
}

static const char *dir_child_name(const wcfs_vnode *n, uint32_t i) { return dir_of(n)->ent[i].name; }

static wc_err dir_child_find(const wcfs_vnode *n, const char *name, uint32_t *i)
{
	const bdir *d = dir_of(n);
	return wcfs_sorted_find(name, d->n, entry_name, d, i); /* entries are sorted (finish_dir) */
}

static wc_err dir_vnode_new(btree *t, uint32_t dir, wcfs_vnode **out);

static wc_err dir_child_open(const wcfs_vnode *n, uint32_t i, wcfs_vnode **out)
{
	btree *t = ((const dir_vnode *)n)->t;
	const bentry *e = &dir_of(n)->ent[i];
	if (!e->key)
		return dir_vnode_new(t, e->dir, out);
	char *uri = malloc(strlen(t->bucket_uri) + strlen(e->key) + 1);
	if (!uri)
		return wc_fail(WC_E_NOMEM, "out of memory");
	strcpy(uri, t->bucket_uri);
	strcat(uri, e->key);
	if (e->wcodec) {
		wc_err err = wcfs_wcodec_open_object(t->ctx, uri, out);
		free(uri);
		return err;
	}
	obj_vnode *o = calloc(1, sizeof *o);
	if (!o) {
		free(uri);
		return wc_fail(WC_E_NOMEM, "out of memory");
	}
	o->base = (wcfs_vnode){ .ops = &obj_ops, .kind = WCFS_VFILE, .size = e->size, .blksize = OBJECT_CHUNK };
	o->ts = (wc_tile_source){ .ops = &obj_tile_ops, .id = wc_tile_source_new_id() };
	atomic_init(&o->refs, 1);
	atomic_init(&o->src, NULL);
	pthread_mutex_init(&o->open_lock, NULL);
	o->uri = uri;
	o->t = t;
	atomic_fetch_add(&t->refs, 1);
	*out = &o->base;
	return WC_OK;
}

static const wcfs_vnode_ops dir_ops = {
	.release = dir_release,
	.child_name = dir_child_name,
	.child_find = dir_child_find,
	.child_open = dir_child_open,
};

static wc_err dir_vnode_new(btree *t, uint32_t dir, wcfs_vnode **out)
{
	dir_vnode *v = calloc(1, sizeof *v);
	if (!v)
		return wc_fail(WC_E_NOMEM, "out of memory");
	v->base = (wcfs_vnode){ .ops = &dir_ops, .kind = WCFS_VDIR, .nchildren = t->dirs[dir].n };
	v->t = t;
	v->dir = dir;
	atomic_fetch_add(&t->refs, 1);
	*out = &v->base;
	return WC_OK;
}

wc_err wcfs_bucket_open(const wcfs_provider_ctx *ctx, const char *uri, wcfs_vnode **root)
{
	*root = NULL;
	const char *b = uri + 5, *slash = strchr(b, '/');
	if (!wcfs_is_bucket(uri) || slash == b || !*b)
		return wc_fail(WC_E_INVAL, "%s: not an S3 address (s3://BUCKET or s3://BUCKET/PREFIX)", uri);
	wc_err e = wc_job_kind_register(WCFS_JOB_OBJECT, &object_job_kind);
	if (e)
		return e;
	btree *t = calloc(1, sizeof *t);
	size_t blen = slash ? (size_t)(slash - b) : strlen(b);
	const char *prefix = slash ? slash + 1 : "";
	size_t plen = strlen(prefix);
	/* the listed address: s3://BUCKET/PREFIX with PREFIX ending in '/' */
	char *list = malloc(blen + plen + 8);
	if (!t || !list || !(t->bucket_uri = malloc(blen + 7)) || !(t->dirs = calloc(16, sizeof *t->dirs))) {
		free(list);
		if (t) {
			free(t->bucket_uri);
			free(t);
		}
		return wc_fail(WC_E_NOMEM, "out of memory");
	}
	snprintf(t->bucket_uri, blen + 7, "s3://%.*s/", (int)blen, b);
	snprintf(list, blen + plen + 8, "%s%s%s", t->bucket_uri, prefix, plen && prefix[plen - 1] != '/' ? "/" : "");
	atomic_init(&t->refs, 1);
	t->ctx = ctx;
	t->cap = 16;
	t->ndirs = 1;
	t->prefix_len = strlen(list) - strlen(t->bucket_uri);
	e = wc_source_list(list, on_object, t);
	if (!e && t->nomem)
		e = wc_fail(WC_E_NOMEM, "out of memory listing %s", list);
	for (uint32_t d = 0; !e && d < t->ndirs; d++)
		e = finish_dir(t, &t->dirs[d]);
	if (!e) {
		wc_log(WC_LOG_INFO, "%s: %llu objects in %u directories%s", list, (unsigned long long)t->objects,
		       t->ndirs, t->skipped ? " (some keys not shown: folder markers, names no file can have, "
		       "packs beside their originals)" : "");
		e = dir_vnode_new(t, 0, root);
	}
	free(list);
	tree_release(t);
	return e;
}
