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
