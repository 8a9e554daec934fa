# src/loader: checkpoints (.wcodec or safetensors) read straight into a
# caller's memory; the library half of the Python package (python/).
libwcodec_impl_la_SOURCES += src/loader/tensor_file.c src/loader/load_host.c src/loader/images.c \
	src/loader/images_resident.c
loaderincdir = $(pkgincludedir)/loader
loaderinc_HEADERS = src/loader/loader.h src/loader/images.h
noinst_HEADERS += src/loader/images_internal.h

check_PROGRAMS += tests/test_loader
TESTS += tests/test_loader
tests_test_loader_SOURCES = tests/test_loader.c tests/st_builder.c tests/st_builder.h
tests_test_loader_CFLAGS = $(TEST_CFLAGS)
tests_test_loader_LDADD = $(TEST_LIBS)
