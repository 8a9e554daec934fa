# src/images: reading images into RGB for the .qvq encoder (wcodec
# pack-images): PPM/PGM always, PNG (libpng) and JPEG (libjpeg) unless
# configured --disable-image-codecs.
libwcodec_impl_la_SOURCES += src/images/image_io.c src/images/image_resize.c
noinst_HEADERS += src/images/image_io.h src/images/image_internal.h
if IMAGE_CODECS
libwcodec_impl_la_SOURCES += src/images/image_png.c src/images/image_jpeg.c
else
EXTRA_DIST += src/images/image_png.c src/images/image_jpeg.c
endif
