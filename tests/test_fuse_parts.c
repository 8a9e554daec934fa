/* test_fuse_parts.c - the daemon's parts that need no mount: size parsing
 * and option checks, the readahead stream detector, the inode table. */
#include <check.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_run.h"
#include "core/limits.h"
#include "core/size.h"
#include "fuse/inode.h"
#include "fuse/mountinfo.h"
#include "fuse/options.h"
#include "fuse/readahead.h"

START_TEST(sizes)
{
	uint64_t v;
	ck_assert_int_eq(wc_parse_size("4096", UINT64_MAX, &v), 0);
	ck_assert_uint_eq(v, 4096);
	ck_assert_int_eq(wc_parse_size("4M", UINT64_MAX, &v), 0);
	ck_assert_uint_eq(v, 4u << 20);
	ck_assert_int_eq(wc_parse_size("1g", UINT64_MAX, &v), 0);
	ck_assert_uint_eq(v, 1u << 30);
	ck_assert_int_eq(wc_parse_size("64KiB", UINT64_MAX, &v), 0);
	ck_assert_uint_eq(v, 64u << 10);
	ck_assert_int_eq(wc_parse_size("2T", UINT64_MAX, &v), 0);
	ck_assert_uint_eq(v, 2ull << 40);
	ck_assert_int_eq(wc_parse_size("", UINT64_MAX, &v), -1);
	ck_assert_int_eq(wc_parse_size("M", UINT64_MAX, &v), -1);
	ck_assert_int_eq(wc_parse_size("-1M", UINT64_MAX, &v), -1);
	ck_assert_int_eq(wc_parse_size("12Q", UINT64_MAX, &v), -1);
	ck_assert_int_eq(wc_parse_size("1M2", UINT64_MAX, &v), -1);
	ck_assert_int_eq(wc_parse_size("99999999999999999999", UINT64_MAX, &v), -1);
	ck_assert_int_eq(wc_parse_size("17179869184G", UINT64_MAX, &v), -1); /* 2^64 bytes */
}
END_TEST

static int parse(wcfs_options *o, const char *a1, const char *a2, const char *a3, const char *a4)
{
	char *argv[] = { "wcodecfs", (char *)a1, (char *)a2, (char *)a3, (char *)a4, NULL };
	int argc = 1;
	while (argv[argc])
		argc++;
	return wcfs_options_parse(argc, argv, o);
}

START_TEST(options)
{
	wcfs_options o;
	ck_assert_int_eq(parse(&o, "/", "/mnt", "-o",
			       "cache_size=4M,threads=3,readahead=0,backend=cpu,max_background=0"),
			 WCFS_EXIT_OK);
	ck_assert_uint_eq(o.max_background, 0);
	ck_assert_uint_eq(o.cache_size, 4u << 20);
	ck_assert_uint_eq(o.threads, 3);
	ck_assert_uint_eq(o.fuse_threads, 6);
	ck_assert_uint_eq(o.readahead, 0);
	ck_assert_str_eq(o.backend, "cpu");
	ck_assert_str_eq(o.source, "/");
	ck_assert_int_eq(o.foreground, 0);
	/* ro goes to the kernel unless rw; our options do not */
	int has_ro = 0;
	for (int i = 0; i < o.fuse_args.argc; i++) {
		ck_assert_ptr_null(strstr(o.fuse_args.argv[i], "cache_size"));
		if (strstr(o.fuse_args.argv[i], ",ro,"))
			has_ro = 1;
	}
	ck_assert_int_eq(has_ro, 1);
	wcfs_options_free(&o);

	/* fstab's own options never reach libfuse, which would reject them;
	 * the kernel's (noatime) still do. */
	ck_assert_int_eq(parse(&o, "/", "/mnt", "-o",
			       "defaults,noatime,x-systemd.automount,_netdev,nofail,comment=x,noauto,user"),
			 WCFS_EXIT_OK);
	int has_noatime = 0;
	for (int i = 0; i < o.fuse_args.argc; i++) {
		const char *a = o.fuse_args.argv[i];
		ck_assert_ptr_null(strstr(a, "defaults"));
		ck_assert_ptr_null(strstr(a, "x-"));
		ck_assert_ptr_null(strstr(a, "_netdev"));
		ck_assert_ptr_null(strstr(a, "nofail"));
		ck_assert_ptr_null(strstr(a, "comment"));
		ck_assert_ptr_null(strstr(a, "noauto"));
		ck_assert_ptr_null(strstr(a, "user,"));
		has_noatime |= strstr(a, "noatime") != NULL;
	}
	ck_assert_int_eq(has_noatime, 1);
	wcfs_options_free(&o);

	ck_assert_int_eq(parse(&o, "/", "/mnt", "-d", NULL), WCFS_EXIT_OK);
	ck_assert_int_eq(o.foreground, 1);
	/* defaults: 1 GiB, or a quarter of the memory (at least 16 MiB) */
	const uint64_t phys = wc_memory_limit();
	ck_assert_uint_gt(phys, 0);
	ck_assert_uint_le(phys, (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE));
	uint64_t want_cache = phys / 4 < (1u << 30) ? phys / 4 : (1u << 30);
	ck_assert_uint_eq(o.cache_size, want_cache > (16u << 20) ? want_cache : (16u << 20));
	ck_assert_uint_eq(o.readahead, 8);
	ck_assert_uint_eq(o.max_background, 64);
	ck_assert_str_eq(o.backend, "auto");
	ck_assert_int_eq(o.direct_io, 0);
	wcfs_options_free(&o);

	/* direct_io is ours (the page cache off for decoded files): libfuse's
	 * low level would refuse it as unknown, so it never reaches libfuse */
	ck_assert_int_eq(parse(&o, "/", "/mnt", "-o", "direct_io,noatime"), WCFS_EXIT_OK);
	ck_assert_int_eq(o.direct_io, 1);
	for (int i = 0; i < o.fuse_args.argc; i++)
		ck_assert_ptr_null(strstr(o.fuse_args.argv[i], "direct_io"));
	wcfs_options_free(&o);

	ck_assert_int_eq(parse(&o, "/", "/mnt", "-o", "cache_size=12X"), WCFS_EXIT_USAGE);
	wcfs_options_free(&o);
	ck_assert_int_eq(parse(&o, "/", "/mnt", "-o", "backend=tpu"), WCFS_EXIT_USAGE);
	wcfs_options_free(&o);
	ck_assert_int_eq(parse(&o, "/", "/mnt", "-o", "timeout=-1"), WCFS_EXIT_USAGE);
	wcfs_options_free(&o);
	ck_assert_int_eq(parse(&o, "/", "/mnt", "-o", "max_background=many"), WCFS_EXIT_USAGE);
	wcfs_options_free(&o);
	ck_assert_int_eq(parse(&o, "/", NULL, NULL, NULL), WCFS_EXIT_USAGE);
	wcfs_options_free(&o);
	ck_assert_int_eq(parse(&o, "/nonexistent/dir", "/mnt", NULL, NULL), WCFS_EXIT_SOURCE);
	wcfs_options_free(&o);
}
END_TEST

#define MIB (1u << 20)

START_TEST(readahead_sequential)
{
	wcfs_ra ra;
	wcfs_ra_init(&ra);
	/* 128 KiB requests through 1 MiB tiles: nothing for the first 2 MiB,
	 * then one prefetch per tile entered. */
	int fired = 0, first = -1;
	for (uint64_t off = 0; off < 8 * MIB; off += 128 << 10) {
		if (wcfs_ra_note(&ra, off, 128 << 10, off / MIB * MIB, MIB, 2 * MIB)) {
			fired++;
			if (first < 0)
				first = (int)(off / MIB);
		}
	}
	ck_assert_int_eq(first, 1); /* the request that completes 2 MiB */
	ck_assert_int_eq(fired, 7);  /* tiles 1..7 */
	wcfs_ra_destroy(&ra);
}
END_TEST

START_TEST(readahead_interleaved_and_reordered)
{
	wcfs_ra ra;
	wcfs_ra_init(&ra);
	/* Two streams far apart, requests alternating, each stream's pairs of
	 * requests swapped (two FUSE threads): both are detected. */
	uint64_t base[2] = { 0, 512 * MIB };
	int fired[2] = { 0, 0 };
	for (uint64_t k = 0; k < 64; k += 2) {
		for (int s = 0; s < 2; s++) {
			for (int j = 1; j >= 0; j--) {
				uint64_t off = base[s] + (k + (uint64_t)j) * (128 << 10);
				fired[s] += wcfs_ra_note(&ra, off, 128 << 10, off / MIB * MIB, MIB, 2 * MIB);
			}
		}
	}
	ck_assert_int_ge(fired[0], 5);
	ck_assert_int_ge(fired[1], 5);
	wcfs_ra_destroy(&ra);
}
END_TEST

START_TEST(readahead_many_streams)
{
	wcfs_ra ra;
	wcfs_ra_init(&ra);
	/* 32 readers each streaming its 64 MiB part of one file, 1 MiB
	 * requests taken round-robin (a loader's worker threads, or the
	 * kernel's readahead for 32 dd processes): every stream is detected
	 * and prefetches once per tile after its first 2 MiB. With fewer slots
	 * than streams, each request would evict a stream another needs next
	 * and none would ever be detected. */
	enum { NS = 32, TILES = 16 };
	int fired[NS] = { 0 };
	for (uint64_t t = 0; t < TILES; t++)
		for (int s = 0; s < NS; s++) {
			uint64_t off = (uint64_t)s * 64 * MIB + t * MIB;
			fired[s] += wcfs_ra_note(&ra, off, MIB, off, MIB, 2 * MIB);
		}
	for (int s = 0; s < NS; s++)
		ck_assert_int_eq(fired[s], TILES - 1);
	wcfs_ra_destroy(&ra);
}
END_TEST

START_TEST(readahead_random_never_fires)
{
	wcfs_ra ra;
	wcfs_ra_init(&ra);
	uint64_t x = 12345;
	int fired = 0;
	for (int i = 0; i < 2000; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		uint64_t off = (x >> 20) % (4096ull * MIB) / 4096 * 4096;
		fired += wcfs_ra_note(&ra, off, 4096, off / MIB * MIB, MIB, 2 * MIB);
	}
	ck_assert_int_eq(fired, 0);
	wcfs_ra_destroy(&ra);
}
END_TEST

START_TEST(readahead_random_in_a_small_file_never_fires)
{
	wcfs_ra ra;
	wcfs_ra_init(&ra);
	/* 20,000 random 4 KiB reads of a 145 MB file: with 64 slots most land
	 * within a tolerance of some slot's frontier and stretch it, but read
	 * a small share of what it spans. (The detector once took these for
	 * streams: 583 prefetches in a 2,000-read run, decoded in the way of
	 * the reader's misses.) */
	uint64_t x = 777;
	int fired = 0, streaming = 0;
	for (int i = 0; i < 20000; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		uint64_t off = (x >> 20) % (145ull * MIB) / 4096 * 4096;
		int s;
		fired += wcfs_ra_note_stream(&ra, off, 4096, off / MIB * MIB, MIB, 2 * MIB, &s);
		streaming += s;
	}
	ck_assert_int_eq(fired, 0);
	ck_assert_int_eq(streaming, 0);
	/* A stream through the same file is still found at once. */
	int first = -1;
	for (uint64_t off = 40 * MIB; off < 48 * MIB && first < 0; off += 128 << 10)
		if (wcfs_ra_note(&ra, off, 128 << 10, off / MIB * MIB, MIB, 2 * MIB))
			first = (int)((off - 40 * MIB) / MIB);
	ck_assert_int_eq(first, 1);
	wcfs_ra_destroy(&ra);
}
END_TEST

/* A stand-in vnode counting its releases. */
static int released;
static void count_release(wcfs_vnode *n)
{
	released++;
	free(n);
}
static const wcfs_vnode_ops count_ops = { .release = count_release };

START_TEST(inode_table_lifetimes)
{
	int root_fd = open("/", O_PATH | O_DIRECTORY);
	ck_assert_int_ge(root_fd, 0);
	struct stat st;
	ck_assert_int_eq(fstat(root_fd, &st), 0);
	wcfs_itable *t = wcfs_itable_create(root_fd, &st);
	ck_assert_ptr_nonnull(t);
	ck_assert_uint_eq(wcfs_ino_of(t, wcfs_itable_root(t)), 1);
	ck_assert_ptr_eq(wcfs_node_of(t, 1), wcfs_itable_root(t));

	released = 0;
	enum { N = 5000 }; /* enough to grow the hash table */
	static wcfs_node *nodes[N];
	for (int i = 0; i < N; i++) {
		wcfs_vnode *vn = calloc(1, sizeof *vn);
		vn->ops = &count_ops;
		vn->kind = WCFS_VFILE;
		wcfs_key k = { .dev = 1, .ino = (uint64_t)i, .child = WCFS_PROV_ROOT };
		nodes[i] = wcfs_itable_insert(t, wcfs_node_new(&k, S_IFREG, -1, NULL, vn, NULL));
		ck_assert_ptr_eq(wcfs_node_of(t, wcfs_ino_of(t, nodes[i])), nodes[i]);
	}
	ck_assert_uint_eq(wcfs_itable_count(t), N + 1);
	/* The same key finds the same node; a duplicate insert is folded in. */
	wcfs_key k7 = { .dev = 1, .ino = 7, .child = WCFS_PROV_ROOT };
	ck_assert_ptr_eq(wcfs_itable_lookup(t, &k7), nodes[7]);
	wcfs_vnode *dup = calloc(1, sizeof *dup);
	dup->ops = &count_ops;
	ck_assert_ptr_eq(wcfs_itable_insert(t, wcfs_node_new(&k7, S_IFREG, -1, NULL, dup, NULL)),
			 nodes[7]);
	ck_assert_int_eq(released, 1); /* the loser's vnode */
	/* Node 7 has 3 lookups and an open handle: it lives until all are gone. */
	wcfs_node_ref(t, nodes[7]);
	wcfs_node_forget(t, nodes[7], 3);
	ck_assert_int_eq(released, 1);
	ck_assert_ptr_eq(wcfs_itable_lookup(t, &k7), nodes[7]);
	wcfs_node_forget(t, nodes[7], 1);
	wcfs_node_unref(t, nodes[7]);
	ck_assert_int_eq(released, 2);
	ck_assert_ptr_null(wcfs_itable_lookup(t, &k7));
	/* Forgetting the rest frees them all; the root stays. */
	for (int i = 0; i < N; i++)
		if (i != 7)
			wcfs_node_forget(t, nodes[i], 1);
	ck_assert_int_eq(released, N + 1);
	ck_assert_uint_eq(wcfs_itable_count(t), 1);
	wcfs_itable_destroy(t);
}
END_TEST

/* wcfs_mount_at: the mount point, device and type fields of proc(5)'s
 * mountinfo lines, octal escapes undone, optional fields skipped up to "-",
 * the topmost of stacked mounts. */
START_TEST(mountinfo_lookup)
{
	char path[] = "/tmp/test_fuse_parts.XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	const char text[] =
		"22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
		"43 22 0:39 / /srv/models ro,nosuid shared:7 master:2 - fuse.wcodecfs /data/m ro\n"
		"44 22 0:40 / /mnt/with\\040space ro - fuse.wcodecfs /data/a\\040b ro\n"
		"45 22 0:41 / /mnt/other ro - fuse.sshfs host:/x ro\n"
		"46 22 0:42 / /stacked ro - fuse.wcodecfs /a ro\n"
		"47 46 0:43 / /stacked ro - fuse.wcodecfs /b ro\n"
		"garbage\n";
	ck_assert_int_eq(write(fd, text, sizeof text - 1), (int)(sizeof text - 1));
	close(fd);
	wcfs_mount m;
	ck_assert_int_eq(wcfs_mount_at(path, "/srv/models", &m), 1);
	ck_assert_str_eq(m.fstype, "fuse.wcodecfs");
	ck_assert_str_eq(m.source, "/data/m");
	ck_assert_uint_eq(m.major, 0);
	ck_assert_uint_eq(m.minor, 39);
	ck_assert_int_eq(wcfs_mount_at(path, "/mnt/with space", &m), 1);
	ck_assert_str_eq(m.fstype, "fuse.wcodecfs");
	ck_assert_str_eq(m.source, "/data/a b");
	ck_assert_int_eq(wcfs_mount_at(path, "/mnt/other", &m), 1);
	ck_assert_str_eq(m.fstype, "fuse.sshfs"); /* not a wcodecfs mount */
	ck_assert_int_eq(wcfs_mount_at(path, "/srv", &m), 0);
	ck_assert_int_eq(wcfs_mount_at(path, "/", &m), 1);
	ck_assert_str_eq(m.fstype, "ext4");
	ck_assert_int_eq(wcfs_mount_at(path, "/stacked", &m), 1);
	ck_assert_uint_eq(m.minor, 43); /* the topmost of two */
	unlink(path);
	ck_assert_int_eq(wcfs_mount_at(path, "/", &m), -1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("fuse_parts");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, sizes);
	tcase_add_test(tc, options);
	tcase_add_test(tc, readahead_sequential);
	tcase_add_test(tc, readahead_interleaved_and_reordered);
	tcase_add_test(tc, readahead_many_streams);
	tcase_add_test(tc, readahead_random_never_fires);
	tcase_add_test(tc, readahead_random_in_a_small_file_never_fires);
	tcase_add_test(tc, inode_table_lifetimes);
	tcase_add_test(tc, mountinfo_lookup);
	suite_add_tcase(s, tc);
	return check_run(s);
}
