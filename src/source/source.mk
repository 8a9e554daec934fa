# src/source: where a container's bytes come from (source.h), under the
# container reader and the checkpoint loader: a local file today.
libwcodec_impl_la_SOURCES += src/source/source_file.c
noinst_HEADERS += src/source/source.h
