# contrib: owned by that component; appends to the variables in Makefile.am.
#
# Tools around the product that are not the product: the TensorFlow.js ->
# safetensors converter, the sample-data fetcher, the demo, and the
# benchmark programs and scripts (benchmarks are never tests: they are only
# built and shipped, `make check` does not run them).

# Benchmark programs (not installed): the RAM-backed FUSE ceiling and the
# random-read latency meter with byte-exact verification.
noinst_PROGRAMS += contrib/bench/randread
if HAVE_FUSE
noinst_PROGRAMS += contrib/bench/ramfs
endif
contrib_bench_ramfs_SOURCES = contrib/bench/ramfs.c src/fuse/bdi.c src/fuse/mountinfo.c
contrib_bench_ramfs_CFLAGS = $(AM_CFLAGS) $(FUSE_CFLAGS)
contrib_bench_ramfs_LDADD = $(FUSE_LIBS)
contrib_bench_randread_SOURCES = contrib/bench/randread.c
contrib_bench_randread_CFLAGS = $(AM_CFLAGS)

# An example of libwcodec's public API (not installed): built against the
# source tree for `make check` (tests/lib_extract.sh), and against the
# installed headers and wcodec.pc by `make installcheck`, which distcheck runs.
check_PROGRAMS += contrib/examples/wcodec_extract
contrib_examples_wcodec_extract_SOURCES = contrib/examples/wcodec_extract.c
contrib_examples_wcodec_extract_CPPFLAGS = -I$(srcdir)/src
contrib_examples_wcodec_extract_LDADD = libwcodec.la
TESTS += tests/lib_extract.sh
EXTRA_DIST += tests/lib_extract.sh tests/install_check.sh contrib/examples/wcodec_gpu_load.c
installcheck-local:
	CC='$(CC)' PKG_CONFIG='$(PKG_CONFIG)' libdir='$(libdir)' bindir='$(bindir)' \
	pkgincludedir='$(pkgincludedir)' pkglibdir='$(pkglibdir)' srcdir='$(srcdir)' \
	PYTHON3='$(PYTHON3)' pythondir='$(pythondir)' cuda_incdir='$(CUDA_INCDIR)' cuda_libdir='$(CUDA_LIBDIR)' \
	$(SHELL) $(srcdir)/tests/install_check.sh

# Tests of the contrib tools themselves (fast: well under a second each).
TESTS += contrib/tests/tfjs2safetensors.sh contrib/tests/onnx2safetensors.sh contrib/tests/ramfs.sh
# A wcodecfs bug found by the benchmarks (docs/BENCHMARKS.md, fixed): reads
# over more than 1024 tiles never returned.
TESTS += contrib/tests/mount_many_tiles.sh

EXTRA_DIST += \
	contrib/tfjs2safetensors.py \
	contrib/fetch-models.sh \
	contrib/demo.sh \
	contrib/bench/bench-ratio.sh \
	contrib/bench/bench-qvq.sh \
	contrib/bench/bench-mount.sh \
	contrib/bench/bench-gpu-mount.sh \
	contrib/bench/bench-ab-readers.sh \
	contrib/bench/bench-walk.sh \
	contrib/bench/bench-random-ab.sh \
	contrib/bench/gpu_mount_model.py \
	contrib/bench/hostcopy.cu \
	contrib/bench/hostload.cu \
	contrib/bench/fuse_trace_summary.py \
	contrib/bench/lib.sh \
	contrib/bench/prepare-data.sh \
	contrib/bench/merge-safetensors.py \
	contrib/bench/ratio_table.py contrib/bench/pooled_entropy.py \
	contrib/tests/tfjs2safetensors.sh \
	contrib/tests/onnx2safetensors.sh \
	contrib/onnx2safetensors.py \
	contrib/tests/check_tfjs2safetensors.py \
	contrib/tests/ramfs.sh \
	contrib/tests/mount_many_tiles.sh
