# src/qvq: .qvq image archives - format, reader, writer, VQ encoder (k-means),
# CPU decode of WC_JOB_VQ (registered with the engine), the files an archive
# shows. Its slices of the other layers live there: src/fuse/provider_qvq.c,
# src/cli/cmd_qvq.c, cuda/vq_*.cu.
libwcodec_impl_la_SOURCES += \
	src/qvq/kmeans.c \
	src/qvq/qvq_dct.c \
	src/qvq/qvq_dct_rate.c \
	src/qvq/qvq_decode.c \
	src/qvq/qvq_files.c \
	src/qvq/qvq_gather_avx512.c \
	src/qvq/qvq_format.c \
	src/qvq/qvq_names.c \
	src/qvq/qvq_pack.c \
	src/qvq/qvq_pack_tx.c \
	src/qvq/qvq_parallel.c \
	src/qvq/qvq_reader.c \
	src/qvq/qvq_tx.c \
	src/qvq/qvq_tx_tile.c \
	src/qvq/qvq_write_archive.c \
	src/qvq/qvq_writer.c \
	src/qvq/qvq_writer_tx.c \
	src/qvq/qvq_writer_vq.c
noinst_HEADERS += \
	src/qvq/kmeans.h \
	src/qvq/qvq.h \
	src/qvq/qvq_dct.h \
	src/qvq/qvq_dct_rate.h \
	src/qvq/qvq_files.h \
	src/qvq/qvq_gather.h \
	src/qvq/qvq_format.h \
	src/qvq/qvq_internal.h \
	src/qvq/qvq_job.h \
	src/qvq/qvq_names.h \
	src/qvq/qvq_pack.h \
	src/qvq/qvq_pack_tx.h \
	src/qvq/qvq_parallel.h \
	src/qvq/qvq_tx.h \
	src/qvq/qvq_tx_tile.h \
	src/qvq/qvq_write_archive.h \
	src/qvq/qvq_writer.h

check_PROGRAMS += tests/test_qvq tests/test_qvq_dct tests/test_qvq_tx
TESTS += tests/test_qvq tests/test_qvq_dct tests/test_qvq_tx
tests_test_qvq_tx_SOURCES = tests/test_qvq_tx.c
tests_test_qvq_tx_CFLAGS = $(TEST_CFLAGS)
tests_test_qvq_tx_LDADD = $(TEST_LIBS)
tests_test_qvq_dct_SOURCES = tests/test_qvq_dct.c
tests_test_qvq_dct_CFLAGS = $(TEST_CFLAGS)
tests_test_qvq_dct_LDADD = $(TEST_LIBS)
tests_test_qvq_SOURCES = tests/test_qvq.c
tests_test_qvq_CFLAGS = $(TEST_CFLAGS)
tests_test_qvq_LDADD = $(TEST_LIBS)

# Shell tests: CLI (always), the mount (skip 77 without a usable /dev/fuse),
# the CUDA plugin's VQ path (skip 77 without a GPU).
TESTS += tests/qvq_cli.sh tests/qvq_mount.sh tests/qvq_cuda.sh
EXTRA_DIST += tests/qvq_cli.sh tests/qvq_mount.sh tests/qvq_cuda.sh tests/qvq_check.py tests/doc_reader_qvq.py \
	contrib/fetch-photos.sh
