# bench: benchmarks, never run by make check (timing lives here, not in
# tests); docs/BENCHMARKS.md gives each one's command and figures.

# Decode/encode throughput of the codec.
noinst_PROGRAMS += bench/bench_decode bench/bench_rans_lookup bench/bench_huff_exponents
bench_bench_decode_SOURCES = bench/bench_decode.c
bench_bench_decode_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests
bench_bench_decode_LDADD = $(WCODEC_INTERNAL) -lm
bench_bench_rans_lookup_SOURCES = bench/bench_rans_lookup.c bench/exponent_input.h
bench_bench_rans_lookup_LDADD = $(WCODEC_INTERNAL) -lm
bench_bench_huff_exponents_SOURCES = bench/bench_huff_exponents.c bench/exponent_input.h
bench_bench_huff_exponents_LDADD = $(WCODEC_INTERNAL) -lm

# Hit-path latency and throughput of the tile cache, 1..16 threads.
noinst_PROGRAMS += bench/bench_cache
bench_bench_cache_SOURCES = bench/bench_cache.c
bench_bench_cache_CFLAGS = $(AM_CFLAGS) $(XXHASH_CFLAGS) -I$(srcdir)/tests
bench_bench_cache_LDADD = $(WCODEC_INTERNAL) $(XXHASH_LIBS) -lm

# CPU decode of a .qvq archive on one thread.
noinst_PROGRAMS += bench/qvq_bench
bench_qvq_bench_SOURCES = bench/qvq_bench.c
bench_qvq_bench_LDADD = $(WCODEC_INTERNAL)

EXTRA_DIST += bench/bench_s3.sh bench/bench_s3_load.py bench/image_codec_study.py bench/bench_image_rate.py bench/bench_distributed.py bench/bench_tp_transformers.py bench/bench_install.py bench/dict_vs_zstd.py bench/bench_load.py bench/bench_images.py bench/bench_packed.py bench/bench_llm_packed.py bench/bench_resident.py bench/lossy_study.py bench/lossy_quality.py bench/pread_ceiling.cu bench/bench_cuda.c \
	bench/bench_cuda.sh bench/vq_bench.cu

if HAVE_CUDA
# The GPU pipeline alone, built from the plugin's sources.
noinst_PROGRAMS += bench/bench_cuda
bench_bench_cuda_SOURCES = bench/bench_cuda.c cuda/wcc_device.c cuda/wcc_lane.c cuda/wcc_lossy.c cuda/wcc_copy.c cuda/wcc_pinned.c
bench_bench_cuda_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
bench_bench_cuda_CFLAGS = $(AM_CFLAGS) $(XXHASH_CFLAGS)
bench_bench_cuda_LDADD = cuda/wcc_kernels.lo $(WCODEC_INTERNAL) $(XXHASH_LIBS) $(CUDA_STATIC_LIBS)

# The .qvq gather kernel and a whole archive's decode on the GPU.
bench/vq_bench$(EXEEXT): $(srcdir)/bench/vq_bench.cu cuda/vq_gather.lo libwcodec_impl.la
	$(AM_V_GEN)$(NVCC_COMPILE) $(srcdir)/bench/vq_bench.cu cuda/vq_gather.o -o $@ \
		.libs/libwcodec_impl.a $(ZSTD_LIBS) $(JANSSON_LIBS) $(XXHASH_LIBS) $(PNG_LIBS) $(JPEG_LIBS) -ldl
CLEANFILES += bench/vq_bench$(EXEEXT)
endif
