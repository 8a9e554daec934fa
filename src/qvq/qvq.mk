# src/qvq: .qvq image archives - format, reader, writer, VQ encoder (k-means),
# CPU decode of WC_JOB_VQ, the files an archive shows. Owned by the qvq component.
libwcodec_la_SOURCES += \
	src/qvq/image_io.c \
	src/qvq/image_resize.c \
	src/qvq/kmeans.c \
	src/qvq/qvq_decode.c \
	src/qvq/qvq_files.c \
	src/qvq/qvq_format.c \
	src/qvq/qvq_names.c \
	src/qvq/qvq_pack.c \
	src/qvq/qvq_parallel.c \
	src/qvq/qvq_reader.c \
	src/qvq/qvq_writer.c
noinst_HEADERS += \
	src/qvq/image_io.h \
	src/qvq/kmeans.h \
	src/qvq/qvq.h \
	src/qvq/qvq_files.h \
	src/qvq/qvq_format.h \
	src/qvq/qvq_internal.h \
	src/qvq/qvq_names.h \
	src/qvq/qvq_pack.h \
	src/qvq/qvq_parallel.h \
	src/qvq/qvq_writer.h

check_PROGRAMS += tests/test_qvq
TESTS += tests/test_qvq
tests_test_qvq_SOURCES = tests/test_qvq.c
tests_test_qvq_CFLAGS = $(TEST_CFLAGS)
tests_test_qvq_LDADD = $(TEST_LIBS)

# The .qvq provider of the wcodecfs daemon (src/fuse/provider.h).
wcodecfs_SOURCES += src/qvq/provider_qvq.c

# The wcodec CLI: pack-images, and .qvq rows of unpack/info/verify.
wcodec_SOURCES += src/cli/cmd_pack_images.c src/qvq/qvq_cli.c src/qvq/qvq_cli.h

# Shell tests: CLI (always) and the mount (skip 77 without a usable /dev/fuse).
TESTS += tests/qvq_cli.sh tests/qvq_mount.sh
EXTRA_DIST += tests/qvq_cli.sh tests/qvq_mount.sh tests/qvq_check.py \
	contrib/fetch-photos.sh contrib/bench/bench-qvq.sh docs/BENCHMARKS-QVQ.md \
	cuda/vq_gather.cu cuda/vq_gather.h cuda/vq_bench.cu

# CPU decode benchmark (not a test; contrib/bench/bench-qvq.sh runs it).
noinst_PROGRAMS += src/qvq/qvq_bench
src_qvq_qvq_bench_SOURCES = src/qvq/qvq_bench.c
src_qvq_qvq_bench_CFLAGS = $(AM_CFLAGS)
src_qvq_qvq_bench_LDADD = libwcodec.la
