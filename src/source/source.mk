# src/source: where a container's bytes come from (source.h), under the
# container reader and the checkpoint loader: a local file, or (where
# configure found libcurl, libinih and expat: HAVE_S3) an object of an
# S3-compatible store (libcurl and its SigV4 signing; libinih for the AWS
# configuration files).
libwcodec_impl_la_SOURCES += src/source/source.c src/source/source_file.c
noinst_HEADERS += src/source/source.h src/source/source_impl.h src/source/s3_config.h src/source/s3_list.h
EXTRA_DIST += src/source/source_s3.c src/source/s3_config.c src/source/s3_list.c
if HAVE_S3
libwcodec_impl_la_SOURCES += src/source/source_s3.c src/source/s3_config.c src/source/s3_list.c
libwcodec_impl_la_CFLAGS += $(CURL_CFLAGS) $(INIH_CFLAGS) $(EXPAT_CFLAGS)
libwcodec_impl_la_LIBADD += $(CURL_LIBS) $(INIH_LIBS) $(EXPAT_LIBS)
WCODEC_INTERNAL += $(CURL_LIBS) $(INIH_LIBS) $(EXPAT_LIBS)
endif

# s3:// against a real S3 server on 127.0.0.1 (s3rver; skips without it),
# through a fault-injecting proxy too.
TESTS += tests/s3_source.sh tests/s3_mount.sh tests/s3_faults.sh
EXTRA_DIST += tests/s3_source.sh tests/s3_mount.sh tests/s3_faults.sh tests/s3_lib.sh tests/s3_proxy.py
