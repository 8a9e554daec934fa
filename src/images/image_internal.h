/* image_internal.h - the readers behind wc_image_load_max (image_io.c),
 * one file per format; PNG and JPEG only in a build with image codecs
 * (configure's default; WC_IMAGE_CODECS in config.h). Not installed. */
#ifndef WC_IMAGE_INTERNAL_H
#define WC_IMAGE_INTERNAL_H

#include <stdio.h>

#include "config.h"
#include "images/image_io.h"

/* The header's size against the limits, before any pixel buffer exists.
 * Errors: WC_E_RANGE naming path and the size. */
wc_err wc_image_check_dims(const char *path, uint64_t w, uint64_t h, uint64_t max_pixels);

/* Decode the open file f (at its start) as wc_image_load_max says. */
wc_err wc_image_load_png(const char *path, FILE *f, uint64_t max_pixels, wc_image *out);
wc_err wc_image_load_jpeg(const char *path, FILE *f, uint64_t max_pixels, wc_image *out);

/* The libraries' versions as they report them: png_get_libver(), and
 * libjpeg's JPEG_LIB_VERSION (62, 80, ...). */
const char *wc_image_png_version(void);
int wc_image_jpeg_version(void);

#endif /* WC_IMAGE_INTERNAL_H */
