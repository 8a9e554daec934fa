# src/fuse: the wcodecfs daemon (libfuse3 low-level API), with one provider
# per format (src/fuse/provider.h). Built where configure found libfuse3
# (HAVE_FUSE); its sources and tests are in the dist either way, and the
# mount tests skip (77) when there is no wcodecfs.
if HAVE_FUSE
bin_PROGRAMS += wcodecfs
wcodecfs_SOURCES = \
	src/fuse/main.c \
	src/fuse/options.c src/fuse/options.h \
	src/fuse/daemon.c src/fuse/daemon.h \
	src/fuse/bdi.c src/fuse/bdi.h \
	src/fuse/inode.c src/fuse/inode.h \
	src/fuse/vtree.c src/fuse/vtree.h \
	src/fuse/readahead.c src/fuse/readahead.h \
	src/fuse/prefetch.c src/fuse/prefetch.h \
	src/fuse/read.c src/fuse/read.h \
	src/fuse/mountinfo.c src/fuse/mountinfo.h \
	src/fuse/ops.c src/fuse/ops.h \
	src/fuse/stats.c src/fuse/stats.h \
	src/fuse/idle.c src/fuse/idle.h \
	src/fuse/provider.h src/fuse/providers.c src/fuse/provider_wcodec.c src/fuse/provider_qvq.c \
	src/fuse/bucket.c src/fuse/bucket.h
wcodecfs_CFLAGS = $(AM_CFLAGS) $(FUSE_CFLAGS) $(XXHASH_CFLAGS) $(SYSTEMD_CFLAGS) $(JANSSON_CFLAGS)
wcodecfs_LDADD = $(WCODEC_INTERNAL) $(FUSE_LIBS) $(SYSTEMD_LIBS)
endif

# Mount tests (need /dev/fuse and fusermount3; they skip otherwise).
TESTS += tests/mount_passthrough.sh tests/mount_lifecycle.sh tests/mount_wcodec.sh tests/mount_large.sh \
	tests/mount_concurrent.sh tests/mount_corrupt.sh tests/mount_fdlimit.sh tests/mount_random_ops.sh \
	tests/mount_rewrite.sh tests/mount_many_tensors.sh tests/mount_owner.sh tests/mount_service.sh \
	tests/mount_claim.sh tests/bad_files.sh
EXTRA_DIST += tests/mount_lib.sh tests/mount_passthrough.sh tests/mount_lifecycle.sh
dist_man_MANS += docs/wcodecfs.1
EXTRA_DIST += tests/mount_check.py tests/mount_wcodec.sh tests/mount_concurrent.sh \
	tests/mount_corrupt.sh tests/mount_fdlimit.sh tests/mount_large.sh \
	tests/mount_random_ops.sh tests/random_ops.py tests/mount_rewrite.sh tests/mount_many_tensors.sh \
	tests/mount_owner.sh tests/mount_service.sh tests/mount_claim.sh tests/bad_files.sh \
	tests/data/bad/EXPECT tests/data/bad/good-tiny.wcodec tests/data/bad/claim-1gib.wcodec \
	tests/data/bad/meta-bomb-json.wcodec tests/data/bad/meta-bomb-table.wcodec \
	tests/data/bad/ntensors-huge.wcodec tests/data/bad/index-past-end.wcodec \
	tests/data/bad/payload-damaged.wcodec

# Unit tests of the parts that need no mount (but libfuse3's headers).
if HAVE_FUSE
check_PROGRAMS += tests/test_fuse_parts
TESTS += tests/test_fuse_parts
tests_test_fuse_parts_SOURCES = tests/test_fuse_parts.c src/fuse/options.c src/fuse/readahead.c \
	src/fuse/inode.c src/fuse/mountinfo.c
tests_test_fuse_parts_CFLAGS = $(TEST_CFLAGS) $(FUSE_CFLAGS)
tests_test_fuse_parts_LDADD = $(TEST_LIBS) $(FUSE_LIBS)
endif

# mount(8)'s helper for `mount -t fuse.wcodecfs` and fstab: installed where
# mount(8) looks (configure --with-mount-helper-dir, default /sbin), calling
# $(bindir)/wcodecfs by its absolute path.
if HAVE_FUSE
mounthelper_SCRIPTS = mount.fuse.wcodecfs
endif
mount.fuse.wcodecfs: $(srcdir)/src/fuse/mount.fuse.wcodecfs.in Makefile
	$(AM_V_GEN)sed -e 's|@bindir[@]|$(bindir)|g' $(srcdir)/src/fuse/mount.fuse.wcodecfs.in > $@ && chmod +x $@
CLEANFILES += mount.fuse.wcodecfs
EXTRA_DIST += src/fuse/mount.fuse.wcodecfs.in

# The systemd unit template (contrib/systemd/wcodecfs@.service.in), with
# $(bindir) filled in; installed in $(systemdunitdir) (configure
# --with-systemdunitdir, default $(prefix)/lib/systemd/system).
if HAVE_FUSE
systemdunit_DATA = wcodecfs@.service
endif
wcodecfs@.service: $(srcdir)/contrib/systemd/wcodecfs@.service.in Makefile
	$(AM_V_GEN)sed -e 's|@bindir[@]|$(bindir)|g' $(srcdir)/contrib/systemd/wcodecfs@.service.in > $@
CLEANFILES += wcodecfs@.service
EXTRA_DIST += contrib/systemd/wcodecfs@.service.in

# Hostile containers made from good ones (tests/mount_claim.sh, tests/data/bad).
check_PROGRAMS += tests/craft_bad
tests_craft_bad_SOURCES = tests/craft_bad.c
tests_craft_bad_CFLAGS = $(TEST_CFLAGS) $(ZSTD_CFLAGS)
tests_craft_bad_LDADD = $(TEST_LIBS)
