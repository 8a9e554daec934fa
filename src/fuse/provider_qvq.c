/*
 * provider_qvq.c - Y.qvq shown as directory Y/ (src/fuse/provider.h): each
 * image as a binary PPM under its shown name (subdirectories as in the
 * names), images.npy when all images share a size, labels.txt when the
 * archive has labels (qvq_files.h, docs/FORMAT.md 6.6).
 *
 * One shared, refcounted `qvq_tree` per opened archive holds the wc_qvq and
 * the directory tree built from the shown names; every vnode (directories
 * and files) holds a reference, so children outlive their parents safely.
 * File bytes are spans: the header (PPM/NPY) or labels text from memory,
 * pixels as byte ranges of decoded tiles fetched by the daemon through the
 * shared tile cache.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "fuse/provider.h"
#include "qvq/qvq.h"
#include "qvq/qvq_files.h"

#define IS_DIR 0x80000000u
/* Tiles prefetched ahead of a stream through an archive's files (its
 * images.npy), at most, under the CPU backend's default readahead (8, or
 * the thread count). An archive's tile decodes in a sixth of the time a
 * .wcodec tile of the same size takes (0.15 ms against 1 ms a MiB on one
 * core, with PACK planes), so two ahead keep a reader fed; each tile more
 * lengthens the round of tile buffers a stream goes through, and the
 * gather and the reply's copy then find fewer of them in the CPU's caches.
 * images.npy of 2040 224x224 crops, 2 cores, twelve alternating fresh
 * mounts each, twice: 17,216 and 17,646 images/s at 2 against 14,480 and
 * 14,796 at 8, the daemon's CPU 114 and 109 ms against 151 and 146
 * (docs/BENCHMARKS.md, "Image archives"). A .wcodec
 * file read 3% slower at 4 than at 8, so the cap is the archive's alone. */
#define QVQ_READAHEAD_MAX 2u

typedef struct qdir {
	uint32_t n, cap;
	uint32_t *child;     /* IS_DIR | dir id, or file id */
	const char **name;   /* child names (single components) */
	uint32_t *by_name;   /* positions sorted by name, for child_find */
} qdir;

typedef struct qvq_tree {
	atomic_uint refs;
	const wcfs_provider_ctx *ctx;
	wc_qvq *q;
	qdir *dirs;
	uint32_t ndirs, cap;
	char **dirnames;     /* owned copies of directory components */
} qvq_tree;

typedef struct qvq_vnode {
	wcfs_vnode base;     /* first member */
	qvq_tree *t;
	uint32_t id;         /* dir id (VDIR) or file id (VFILE) */
	char ppm[64];        /* PPM header of an image file */
	wc_qvq_file_layout lay;
} qvq_vnode;

static void tree_free(qvq_tree *t)
{
	for (uint32_t d = 0; d < t->ndirs; d++) {
		free(t->dirs[d].child);
		free(t->dirs[d].name);
		free(t->dirs[d].by_name);
		free(t->dirnames[d]);
	}
	free(t->dirs);
	free(t->dirnames);
	if (t->q) {
		if (t->ctx && t->ctx->cache)
			wc_cache_drop_source(t->ctx->cache, wc_qvq_id(t->q));
		wc_qvq_release(t->q);
	}
	free(t);
}

static void tree_release(qvq_tree *t)
{
	if (atomic_fetch_sub(&t->refs, 1) == 1)
		tree_free(t);
}

static int add_child(qdir *d, uint32_t child, const char *name)
{
	if (d->n == d->cap) {
		uint32_t nc = d->cap ? 2 * d->cap : 8;
		uint32_t *c = realloc(d->child, nc * sizeof *c);
		if (!c)
			return -1;
		d->child = c;
		const char **nm = realloc(d->name, nc * sizeof *nm);
		if (!nm)
			return -1;
		d->name = nm;
		d->cap = nc;
	}
	d->child[d->n] = child;
	d->name[d->n] = name;
	d->n++;
	return 0;
}

/* New directory `name` under parent (or the root if parent is
 * UINT32_MAX); returns its id, the tree then owning name, or UINT32_MAX
 * without memory, the caller still owning name (and freeing it). */
static uint32_t add_dir(qvq_tree *t, uint32_t parent, char *name)
{
	if (t->ndirs == t->cap) {
		uint32_t nc = t->cap ? 2 * t->cap : 16;
		qdir *nd = realloc(t->dirs, nc * sizeof *nd);
		if (!nd)
			return UINT32_MAX;
		t->dirs = nd;
		char **nn = realloc(t->dirnames, nc * sizeof *nn);
		if (!nn)
			return UINT32_MAX;
		t->dirnames = nn;
		t->cap = nc;
	}
	uint32_t id = t->ndirs++;
	memset(&t->dirs[id], 0, sizeof t->dirs[id]);
	t->dirnames[id] = name;
	if (parent != UINT32_MAX && add_child(&t->dirs[parent], IS_DIR | id, name)) {
		/* the slot goes too: name would otherwise be freed by the
		 * caller and again by tree_free (found by gcc -fanalyzer) */
		t->ndirs--;
		return UINT32_MAX;
	}
	return id;
}

static int cmp_child(const void *a, const void *b, void *ctx)
{
	const qdir *d = ctx;
	return strcmp(d->name[*(const uint32_t *)a], d->name[*(const uint32_t *)b]);
}

typedef struct path_ref {
	const char *path;
	uint32_t file;
} path_ref;

static int cmp_path(const void *a, const void *b)
{
	return strcmp(((const path_ref *)a)->path, ((const path_ref *)b)->path);
}

/* Build the directory tree from the shown names. Sorted bytewise, the
 * paths under any directory are contiguous, so a stack of open
 * directories suffices. Names were validated by the reader (no empty,
 * "." or ".." component; a file is never also a directory). */
static wc_err build_tree(qvq_tree *t)
{
	uint32_t nf = wc_qvq_nfiles(t->q);
	path_ref *p = malloc(nf * sizeof *p);
	uint32_t stack[WC_QVQ_MAX_NAME / 2 + 2];
	size_t stack_len[WC_QVQ_MAX_NAME / 2 + 2]; /* prefix length of each open dir */
	if (!p)
		return wc_fail(WC_E_NOMEM, "qvq: no memory for the directory tree");
	for (uint32_t f = 0; f < nf; f++)
		p[f] = (path_ref){wc_qvq_file_name(t->q, f), f};
	qsort(p, nf, sizeof *p, cmp_path);
	char *root = strdup("");
	if (!root || add_dir(t, UINT32_MAX, root) != 0) {
		free(root);
		free(p);
		return wc_fail(WC_E_NOMEM, "qvq: no memory");
	}
	uint32_t depth = 1;
	stack[0] = 0;
	stack_len[0] = 0;
	wc_err e = WC_OK;
	for (uint32_t i = 0; i < nf && !e; i++) {
		const char *s = p[i].path;
		/* Pop directories that are not a prefix of s. */
		while (depth > 1) {
			size_t l = stack_len[depth - 1];
			if (strncmp(s, p[i - 1].path, l) == 0 && s[l - 1] == '/')
				break;
			depth--;
		}
		/* Open the directories of s below the deepest open one. */
		const char *c = s + stack_len[depth - 1], *slash;
		while ((slash = strchr(c, '/'))) {
			char *name = strndup(c, (size_t)(slash - c));
			uint32_t id = name ? add_dir(t, stack[depth - 1], name) : UINT32_MAX;
			if (id == UINT32_MAX) {
				free(name);
				e = wc_fail(WC_E_NOMEM, "qvq: no memory");
				break;
			}
			stack[depth] = id;
			stack_len[depth] = (size_t)(slash - s) + 1;
			depth++;
			c = slash + 1;
		}
		if (!e && add_child(&t->dirs[stack[depth - 1]], p[i].file, c))
			e = wc_fail(WC_E_NOMEM, "qvq: no memory");
	}
	free(p);
	for (uint32_t d = 0; d < t->ndirs && !e; d++) {
		qdir *q = &t->dirs[d];
		q->by_name = malloc((q->n ? q->n : 1) * sizeof *q->by_name);
		if (!q->by_name) {
			e = wc_fail(WC_E_NOMEM, "qvq: no memory");
			break;
		}
		for (uint32_t j = 0; j < q->n; j++)
			q->by_name[j] = j;
		qsort_r(q->by_name, q->n, sizeof *q->by_name, cmp_child, q);
	}
	return e;
}

static void vnode_release(wcfs_vnode *n)
{
	qvq_vnode *v = (qvq_vnode *)n;
	tree_release(v->t);
	free(v);
}

static wc_err file_locate(const wcfs_vnode *n, uint64_t off, wcfs_span *span)
{
	const qvq_vnode *v = (const qvq_vnode *)n;
	if (off >= n->size)
		return wc_fail(WC_E_RANGE, "offset %llu past the end (%llu)",
			       (unsigned long long)off, (unsigned long long)n->size);
	const wc_qvq_file_layout *l = &v->lay;
	if (off < l->prefix_len) {
		*span = (wcfs_span){.kind = WCFS_SPAN_MEM, .off = 0, .len = l->prefix_len,
				    .mem = l->prefix, .fd = -1};
		return WC_OK;
	}
	uint64_t d = l->data_voff + (off - l->prefix_len);
	uint32_t t = wc_qvq_find_tile(v->t->q, d);
	const wc_qvq_tile *tl = wc_qvq_tile_at(v->t->q, t);
	uint64_t start = tl->voff > l->data_voff ? tl->voff : l->data_voff;
	uint64_t end = tl->voff + tl->dsize;
	if (end > l->data_voff + l->data_len)
		end = l->data_voff + l->data_len;
	*span = (wcfs_span){.kind = WCFS_SPAN_TILE, .off = l->prefix_len + (start - l->data_voff),
			    .len = end - start, .src = wc_qvq_source(v->t->q), .tile = t,
			    .tile_off = (uint32_t)(start - tl->voff), .fd = -1};
	return WC_OK;
}

static const char *dir_child_name(const wcfs_vnode *n, uint32_t i)
{
	const qvq_vnode *v = (const qvq_vnode *)n;
	const qdir *d = &v->t->dirs[v->id];
	return i < d->n ? d->name[i] : NULL;
}

static const char *sorted_name(const void *d, uint32_t k)
{
	const qdir *q = d;
	return q->name[q->by_name[k]];
}

static wc_err dir_child_find(const wcfs_vnode *n, const char *name, uint32_t *i)
{
	const qvq_vnode *v = (const qvq_vnode *)n;
	const qdir *d = &v->t->dirs[v->id];
	uint32_t k;
	wc_err e = wcfs_sorted_find(name, d->n, sorted_name, d, &k);
	if (e == WC_OK)
		*i = d->by_name[k];
	return e;
}

static wc_err open_node(qvq_tree *t, uint32_t child, wcfs_vnode **out);

static wc_err dir_child_open(const wcfs_vnode *n, uint32_t i, wcfs_vnode **out)
{
	const qvq_vnode *v = (const qvq_vnode *)n;
	const qdir *d = &v->t->dirs[v->id];
	if (i >= d->n)
		return wc_fail(WC_E_RANGE, "qvq: child %u of %u", i, d->n);
	return open_node(v->t, d->child[i], out);
}

static const wcfs_vnode_ops dir_ops = {
	.release = vnode_release,
	.child_name = dir_child_name,
	.child_find = dir_child_find,
	.child_open = dir_child_open,
};

static const wcfs_vnode_ops file_ops = {
	.release = vnode_release,
	.locate = file_locate,
};

static wc_err open_node(qvq_tree *t, uint32_t child, wcfs_vnode **out)
{
	qvq_vnode *v = calloc(1, sizeof *v);
	if (!v)
		return wc_fail(WC_E_NOMEM, "qvq: no memory");
	v->t = t;
	if (child & IS_DIR) {
		v->id = child & ~IS_DIR;
		v->base.ops = &dir_ops;
		v->base.kind = WCFS_VDIR;
		v->base.nchildren = t->dirs[v->id].n;
		if (v->id == 0) /* the root: the archive's blocks are shared out */
			for (uint32_t f = 0; f < wc_qvq_nfiles(t->q); f++)
				v->base.size += wc_qvq_file_size(t->q, f);
	} else {
		v->id = child;
		wc_err e = wc_qvq_file_layout_of(t->q, child, v->ppm, &v->lay);
		if (e) {
			free(v);
			return e;
		}
		v->base.ops = &file_ops;
		v->base.kind = WCFS_VFILE;
		v->base.size = v->lay.prefix_len + v->lay.data_len;
		/* Preferred I/O: a tile (what one decode yields), 4 KiB..4 MiB. */
		uint32_t bs = v->lay.data_len
			? wc_qvq_tile_at(t->q, wc_qvq_find_tile(t->q, v->lay.data_voff))->dsize : 4096;
		bs = (bs + 4095) / 4096 * 4096;
		v->base.blksize = bs < 4096 ? 4096 : bs > (4u << 20) ? (4u << 20) : bs;
		v->base.readahead_max = QVQ_READAHEAD_MAX;
	}
	atomic_fetch_add(&t->refs, 1);
	*out = &v->base;
	return WC_OK;
}

static wc_err qvq_open(const wcfs_provider_ctx *ctx, const char *path, wcfs_vnode **out)
{
	qvq_tree *t = calloc(1, sizeof *t);
	if (!t)
		return wc_fail(WC_E_NOMEM, "qvq: no memory opening %s", path);
	t->ctx = ctx;
	atomic_init(&t->refs, 1);
	wc_err e = wc_qvq_open(path, &t->q);
	if (!e)
		e = build_tree(t);
	if (!e)
		e = open_node(t, IS_DIR | 0, out);
	tree_release(t); /* the root vnode holds the tree now, or it is freed */
	return e;
}

const wcfs_provider wcfs_provider_qvq = {
	.name = "qvq",
	.src_suffix = ".qvq",
	.virt_suffix = "",
	.kind = WCFS_VDIR,
	.open = qvq_open,
};
