# python: the package `wcodec` (ctypes over libwcodec and the CUDA plugin),
# installed into the site directory of the python3 configure found. Its
# _paths.py, written here, tells it where libwcodec and the plugin are
# installed; from the build tree the tests set WCODEC_LIBRARY and
# WCODEC_PLUGIN_DIR instead.
WCODEC_PY = python/wcodec/__init__.py python/wcodec/_lib.py python/wcodec/_file.py \
	python/wcodec/_safe_open.py python/wcodec/numpy.py python/wcodec/torch.py \
	python/wcodec/transformers.py python/wcodec/images.py python/wcodec/torch_images.py \
	python/wcodec/packed.py python/wcodec/packed_cuda.py python/wcodec/_torch_framework.py \
	python/wcodec/_cli.py python/wcodec/distributed.py
EXTRA_DIST += $(WCODEC_PY)

if HAVE_PYTHON
wcodecpydir = $(pythondir)/wcodec
wcodecpy_PYTHON = $(WCODEC_PY)
nodist_wcodecpy_PYTHON = python/wcodec/_paths.py
python/wcodec/_paths.py: Makefile
	@$(MKDIR_P) python/wcodec
	$(AM_V_GEN)printf '"""Where make install put libwcodec and the CUDA plugin."""\nLIBDIR = "%s"\nPLUGINDIR = "%s"\n' \
		'$(libdir)' '$(pkglibdir)' > $@
CLEANFILES += python/wcodec/_paths.py
endif

# make check: the package against the safetensors layout (GPU parts skip
# without a GPU).
TESTS += tests/python_loader.sh tests/python_images.sh tests/python_packed.sh tests/python_bindings.sh \
	tests/python_distributed.sh tests/python_transformers_tp.sh
EXTRA_DIST += tests/python_bindings.sh tests/test_bindings.py tests/python_distributed.sh tests/python_transformers_tp.sh tests/test_distributed.py tests/python_loader.sh tests/python_env.sh tests/test_python.py tests/python_images.sh \
	tests/test_python_images.py tests/python_packed.sh tests/test_python_packed.py

# pip and Debian packaging (the files they read; contrib/package-tests.sh
# builds and checks both, run by .ci/run after the tests).
EXTRA_DIST += pyproject.toml setup.py python/native_build.py tests/installed_check.py contrib/package-tests.sh \
	debian/changelog debian/control debian/copyright debian/rules debian/source/format debian/not-installed \
	debian/wcodecfs.install debian/wcodecfs.links debian/libwcodec0.install debian/libwcodec-dev.install \
	debian/python3-wcodec.install debian/wcodecfs-cuda.install
