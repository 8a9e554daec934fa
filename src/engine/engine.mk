# src/engine: decode backends (CPU thread pool, CUDA plugin loader) and the
# decoded-tile cache. Appends to the variables in Makefile.am.
libwcodec_impl_la_SOURCES += \
	src/engine/backend.c \
	src/engine/backend_cpu.c \
	src/engine/backend_warm.c \
	src/engine/threadpool.c \
	src/engine/cache.c src/engine/cache_get.c \
	src/engine/cache_buffers.c \
	src/engine/cache_dispatch.c \
	src/engine/tile_source.c
# backend.h and tile_source.h are public: container.h and the CUDA plugin's
# wcodec_cuda.h include them.
engineincdir = $(pkgincludedir)/engine
engineinc_HEADERS = src/engine/backend.h src/engine/tile_source.h
noinst_HEADERS += \
	src/engine/cache.h \
	src/engine/cache_impl.h \
	src/engine/threadpool.h \
	tests/fake_tiles.h

check_PROGRAMS += tests/test_threadpool tests/test_cache tests/test_backend
TESTS += tests/test_threadpool tests/test_cache tests/test_backend
tests_test_threadpool_SOURCES = tests/test_threadpool.c
tests_test_threadpool_CFLAGS = $(TEST_CFLAGS)
tests_test_threadpool_LDADD = $(TEST_LIBS)
tests_test_cache_SOURCES = tests/test_cache.c
tests_test_cache_CFLAGS = $(TEST_CFLAGS)
tests_test_cache_LDADD = $(TEST_LIBS)
tests_test_backend_SOURCES = tests/test_backend.c
tests_test_backend_CFLAGS = $(TEST_CFLAGS)
tests_test_backend_LDADD = $(TEST_LIBS)

# A stand-in CUDA plugin so test_backend goes through the real dlopen() path.
# (check_LTLIBRARIES is not declared in Makefile.am; this fragment sets it.)
check_LTLIBRARIES = tests/fakeplugin/wcodec-cuda.la
tests_fakeplugin_wcodec_cuda_la_SOURCES = tests/fake_cuda_plugin.c
tests_fakeplugin_wcodec_cuda_la_CFLAGS = $(AM_CFLAGS)
tests_fakeplugin_wcodec_cuda_la_LDFLAGS = -module -avoid-version -shared \
	-rpath $(abs_builddir)/tests/fakeplugin $(AM_LDFLAGS)
tests_test_backend_CPPFLAGS = $(AM_CPPFLAGS) \
	-DFAKE_PLUGIN_DIR='"$(abs_builddir)/tests/fakeplugin/.libs"'
