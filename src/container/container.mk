# src/container: the safetensors parser and the .wcodec reader and writer.
libwcodec_impl_la_SOURCES += src/container/safetensors.c src/container/format.c \
	src/container/reader.c src/container/metadata.c src/container/metadata_json.c \
	src/container/lossy_job.c src/container/lossy_codes.c src/container/writer.c \
	src/container/writer_analyse.c src/container/writer_lossy.c src/container/writer_verify.c
containerincdir = $(pkgincludedir)/container
containerinc_HEADERS = src/container/container.h
noinst_HEADERS += src/container/container_source.h src/container/safetensors.h src/container/format.h src/container/container_impl.h src/container/writer_impl.h \
	src/container/lossy_job.h

check_PROGRAMS += tests/test_safetensors tests/test_container tests/test_container_damage tests/test_container_dict tests/test_metadata
TESTS += tests/test_safetensors tests/test_container tests/test_container_damage tests/test_container_dict \
	tests/test_metadata
tests_test_safetensors_SOURCES = tests/test_safetensors.c
tests_test_safetensors_CFLAGS = $(TEST_CFLAGS)
tests_test_safetensors_LDADD = $(TEST_LIBS)
CONTAINER_FIXTURE = tests/container_fixture.c tests/container_fixture.h tests/st_builder.c tests/st_builder.h
tests_test_container_SOURCES = tests/test_container.c $(CONTAINER_FIXTURE)
tests_test_container_CFLAGS = $(TEST_CFLAGS)
tests_test_container_LDADD = $(TEST_LIBS)
tests_test_container_damage_SOURCES = tests/test_container_damage.c $(CONTAINER_FIXTURE)
tests_test_container_damage_CFLAGS = $(TEST_CFLAGS)
tests_test_container_damage_LDADD = $(TEST_LIBS)
tests_test_container_dict_SOURCES = tests/test_container_dict.c $(CONTAINER_FIXTURE)
tests_test_container_dict_CFLAGS = $(TEST_CFLAGS)
tests_test_container_dict_LDADD = $(TEST_LIBS)
tests_test_metadata_SOURCES = tests/test_metadata.c $(CONTAINER_FIXTURE)
tests_test_metadata_CFLAGS = $(TEST_CFLAGS)
tests_test_metadata_LDADD = $(TEST_LIBS)
EXTRA_DIST += tests/gen_safetensors.py tests/data/all-v1.wcodec tests/data/all-v2.wcodec
