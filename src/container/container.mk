# src/container: the safetensors parser and the .wcodec reader and writer.
libwcodec_la_SOURCES += src/container/safetensors.c src/container/format.c \
	src/container/reader.c src/container/metadata.c src/container/writer.c \
	src/container/writer_analyse.c src/container/writer_verify.c
containerincdir = $(pkgincludedir)/container
containerinc_HEADERS = src/container/container.h
noinst_HEADERS += src/container/safetensors.h src/container/format.h src/container/container_impl.h src/container/writer_impl.h

check_PROGRAMS += tests/test_safetensors tests/test_container
TESTS += tests/test_safetensors tests/test_container
tests_test_safetensors_SOURCES = tests/test_safetensors.c
tests_test_safetensors_CFLAGS = $(TEST_CFLAGS)
tests_test_safetensors_LDADD = $(TEST_LIBS)
tests_test_container_SOURCES = tests/test_container.c tests/st_builder.c tests/st_builder.h
tests_test_container_CFLAGS = $(TEST_CFLAGS)
tests_test_container_LDADD = $(TEST_LIBS)
EXTRA_DIST += tests/gen_safetensors.py
