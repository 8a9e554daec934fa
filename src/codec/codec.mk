# src/codec: the lossless codec (byte planes, 32-lane rANS, tile payloads).
libwcodec_impl_la_SOURCES += \
	src/codec/bitpack.c \
	src/codec/codec_scratch.c \
	src/codec/dict.c \
	src/codec/entropy.c \
	src/codec/freq_normalize.c \
	src/codec/lossy.c \
	src/codec/planes.c \
	src/codec/planes_avx2.c \
	src/codec/rans_decode.c \
	src/codec/rans_decode_avx2.c \
	src/codec/rans_decode_avx512.c \
	src/codec/rans_encode.c \
	src/codec/tile_decode.c \
	src/codec/tile_encode.c \
	src/codec/tile_parse.c
noinst_HEADERS += src/codec/codec_internal.h src/codec/lossy.h
codecincdir = $(pkgincludedir)/codec
codecinc_HEADERS = src/codec/rans.h src/codec/planes.h src/codec/tile_codec.h

check_PROGRAMS += tests/test_rans tests/test_planes tests/test_tile_codec tests/test_dict tests/test_lossy
TESTS += tests/test_rans tests/test_planes tests/test_tile_codec tests/test_dict tests/test_lossy
tests_test_rans_SOURCES = tests/test_rans.c tests/codec_testutil.h
tests_test_rans_CFLAGS = $(TEST_CFLAGS)
tests_test_rans_LDADD = $(TEST_LIBS)
tests_test_planes_SOURCES = tests/test_planes.c tests/codec_testutil.h
tests_test_planes_CFLAGS = $(TEST_CFLAGS)
tests_test_planes_LDADD = $(TEST_LIBS)
tests_test_tile_codec_SOURCES = tests/test_tile_codec.c tests/codec_testutil.h
tests_test_tile_codec_CFLAGS = $(TEST_CFLAGS) $(ZSTD_CFLAGS)
tests_test_tile_codec_LDADD = $(TEST_LIBS)
tests_test_dict_SOURCES = tests/test_dict.c tests/codec_testutil.h
tests_test_dict_CFLAGS = $(TEST_CFLAGS)
tests_test_dict_LDADD = $(TEST_LIBS)
tests_test_lossy_SOURCES = tests/test_lossy.c
tests_test_lossy_CFLAGS = $(TEST_CFLAGS)
tests_test_lossy_LDADD = $(TEST_LIBS) -lm
