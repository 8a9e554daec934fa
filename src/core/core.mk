# Core: the one error type and logging.
libwcodec_impl_la_SOURCES += src/core/atomic_file.c src/core/error.c src/core/size.c src/core/version.c src/core/fileio.c src/core/hash.c src/core/hash_avx2.c src/core/cpu.c src/core/limits.c src/core/fd_budget.c \
	src/core/json_walk.c
# Public headers install under $(pkgincludedir) in the directories the
# sources include them by ("core/wc_error.h"); wcodec.pc adds that -I.
coreincdir = $(pkgincludedir)/core
coreinc_HEADERS = src/core/wc_error.h
noinst_HEADERS += src/core/atomic_file.h src/core/size.h src/core/version.h src/core/json_walk.h src/core/fileio.h src/core/le.h src/core/hash.h src/core/cpu.h src/core/limits.h src/core/clock.h src/core/fd_budget.h
check_PROGRAMS += tests/test_error tests/test_json_walk tests/test_fd_budget
TESTS += tests/test_error tests/test_json_walk tests/test_fd_budget
tests_test_json_walk_SOURCES = tests/test_json_walk.c
tests_test_json_walk_CFLAGS = $(TEST_CFLAGS)
tests_test_json_walk_LDADD = $(TEST_LIBS)
tests_test_error_SOURCES = tests/test_error.c
tests_test_error_CFLAGS = $(TEST_CFLAGS)
tests_test_error_LDADD = $(TEST_LIBS)
tests_test_fd_budget_SOURCES = tests/test_fd_budget.c
tests_test_fd_budget_CFLAGS = $(TEST_CFLAGS)
tests_test_fd_budget_LDADD = $(TEST_LIBS)
