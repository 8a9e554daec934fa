# src/engine: decode backends (CPU thread pool, CUDA plugin loader) and the
# decoded-tile cache. Appends to the variables in Makefile.am.
libwcodec_la_SOURCES += \
	src/engine/backend.c \
	src/engine/backend_cpu.c \
	src/engine/threadpool.c \
	src/engine/cache.c
noinst_HEADERS += \
	src/engine/backend.h \
	src/engine/cache.h \
	src/engine/tile_source.h \
	src/engine/threadpool.h \
	tests/fake_tiles.h

check_PROGRAMS += tests/test_cache tests/test_backend
TESTS += tests/test_cache tests/test_backend
tests_test_cache_SOURCES = tests/test_cache.c
tests_test_cache_CFLAGS = $(TEST_CFLAGS)
tests_test_cache_LDADD = $(TEST_LIBS)
tests_test_backend_SOURCES = tests/test_backend.c
tests_test_backend_CFLAGS = $(TEST_CFLAGS)
tests_test_backend_LDADD = $(TEST_LIBS)

# Hit-path latency and throughput of the cache, 1..16 threads (not a test).
noinst_PROGRAMS += bench/bench_cache
bench_bench_cache_SOURCES = bench/bench_cache.c
bench_bench_cache_CFLAGS = $(AM_CFLAGS) -I$(srcdir)/tests
bench_bench_cache_LDADD = libwcodec.la
