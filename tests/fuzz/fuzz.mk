# tests/fuzz: fuzz targets for every reader of untrusted bytes; appends to the
# variables in Makefile.am.
#
# Each target (tests/fuzz/fuzz_*.c) defines LLVMFuzzerTestOneInput. Here
# they are linked with fuzz_main.c and make check replays the committed seed
# corpus (tests/fuzz/corpus/TARGET) plus deterministic variants of each seed
# (tests/fuzz_corpus.sh); contrib/fuzz.sh builds them with clang's libFuzzer
# for open-ended runs.
FUZZ_TARGETS = tests/fuzz/fuzz_tile tests/fuzz/fuzz_wcodec tests/fuzz/fuzz_qvq \
	tests/fuzz/fuzz_safetensors tests/fuzz/fuzz_image
check_PROGRAMS += $(FUZZ_TARGETS)
noinst_HEADERS += tests/fuzz/fuzz_target.h tests/wcodec_resign.h
FUZZ_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests
FUZZ_CFLAGS = $(AM_CFLAGS) $(XXHASH_CFLAGS) $(ZSTD_CFLAGS) $(JANSSON_CFLAGS)
FUZZ_LIBS = $(WCODEC_INTERNAL)

tests_fuzz_fuzz_tile_SOURCES = tests/fuzz/fuzz_tile.c tests/fuzz/fuzz_main.c
tests_fuzz_fuzz_tile_CPPFLAGS = $(FUZZ_CPPFLAGS)
tests_fuzz_fuzz_tile_CFLAGS = $(FUZZ_CFLAGS)
tests_fuzz_fuzz_tile_LDADD = $(FUZZ_LIBS)
tests_fuzz_fuzz_wcodec_SOURCES = tests/fuzz/fuzz_wcodec.c tests/fuzz/fuzz_main.c
tests_fuzz_fuzz_wcodec_CPPFLAGS = $(FUZZ_CPPFLAGS)
tests_fuzz_fuzz_wcodec_CFLAGS = $(FUZZ_CFLAGS)
tests_fuzz_fuzz_wcodec_LDADD = $(FUZZ_LIBS)
tests_fuzz_fuzz_qvq_SOURCES = tests/fuzz/fuzz_qvq.c tests/fuzz/fuzz_main.c
tests_fuzz_fuzz_qvq_CPPFLAGS = $(FUZZ_CPPFLAGS)
tests_fuzz_fuzz_qvq_CFLAGS = $(FUZZ_CFLAGS)
tests_fuzz_fuzz_qvq_LDADD = $(FUZZ_LIBS)
tests_fuzz_fuzz_safetensors_SOURCES = tests/fuzz/fuzz_safetensors.c tests/fuzz/fuzz_main.c
tests_fuzz_fuzz_safetensors_CPPFLAGS = $(FUZZ_CPPFLAGS)
tests_fuzz_fuzz_safetensors_CFLAGS = $(FUZZ_CFLAGS)
tests_fuzz_fuzz_safetensors_LDADD = $(FUZZ_LIBS)
tests_fuzz_fuzz_image_SOURCES = tests/fuzz/fuzz_image.c tests/fuzz/fuzz_main.c
tests_fuzz_fuzz_image_CPPFLAGS = $(FUZZ_CPPFLAGS)
tests_fuzz_fuzz_image_CFLAGS = $(FUZZ_CFLAGS)
tests_fuzz_fuzz_image_LDADD = $(FUZZ_LIBS)

TESTS += tests/fuzz_corpus.sh
EXTRA_DIST += tests/fuzz_corpus.sh tests/fuzz/corpus contrib/fuzz.sh
