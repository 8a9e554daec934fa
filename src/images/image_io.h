/*
 * image_io.h - reading images into 8-bit RGB (PNG via libpng, JPEG via
 * libjpeg, binary PPM/PGM), writing binary PPM, and the resize + centre
 * crop of training pipelines: what `wcodec pack-images` reads. A build
 * configured --disable-image-codecs has neither libpng nor libjpeg and
 * reads PPM and PGM only.
 */
#ifndef WC_IMAGE_IO_H
#define WC_IMAGE_IO_H

#include <stddef.h>
#include <stdint.h>

#include "core/wc_error.h"

#define WC_IMAGE_MAX_SIDE 32768u           /* largest side accepted on input */
#define WC_IMAGE_MAX_PIXELS (256u << 20)   /* largest w*h accepted on input */

typedef struct wc_image {
	uint32_t width, height;
	uint8_t *rgb; /* width * height * 3 bytes, row-major, malloc()ed */
} wc_image;

/* The formats wc_image_load reads, with their libraries' versions:
 * "PNG (libpng 1.6.39), JPEG (libjpeg 62), PPM, PGM", or "PPM, PGM" in a
 * build without image codecs. A static string. */
const char *wc_image_formats(void);

/* Which reader handles a file, from its first bytes: "png", "jpeg", "ppm"
 * (P5/P6), or NULL for none of them. */
const char *wc_image_sniff(const uint8_t *head, size_t len);

/* Decode the image file at path to 8-bit RGB. PNG: any bit depth, palette
 * and grey are expanded, 16-bit is reduced to 8, alpha is dropped (as
 * PIL's convert("RGB")). JPEG: greyscale, YCbCr, CMYK and YCCK (CMYK to RGB
 * as PIL's convert("RGB") computes it, bit for bit). PPM:
 * binary P6 (RGB) and P5 (grey), maxval 1..65535 scaled to 0..255 with
 * rounding. Errors: WC_E_IO, WC_E_FORMAT (not an image, a decoder error,
 * with the reason), WC_E_RANGE (beyond the limits
 * above), WC_E_UNSUPPORTED (a PNG or JPEG in a build without their
 * readers), WC_E_NOMEM. */
wc_err wc_image_load(const char *path, wc_image *out);

/* wc_image_load with a lower pixel limit (at most WC_IMAGE_MAX_PIXELS),
 * checked against the file's header before the pixels are decoded: a
 * small compressed file that claims a huge image is refused without first
 * allocating its decoded size. The path must name a regular file (a FIFO
 * is refused rather than waited on). */
wc_err wc_image_load_max(const char *path, uint64_t max_pixels, wc_image *out);
void wc_image_free(wc_image *img);

/* Write img as binary PPM (P6, maxval 255). Errors: WC_E_IO. */
wc_err wc_image_write_ppm(const char *path, const wc_image *img);

/* Resize then centre-crop to w x h, as torchvision's Resize(min side) +
 * CenterCrop: scale s = max(w / src.width, h / src.height), resample with
 * an antialiased triangle (bilinear) filter whose support widens by 1/s
 * when shrinking (so it averages like an area filter), round to 8 bits,
 * and keep the centre w x h pixels (offset floor((scaled - w) / 2)).
 * Errors: WC_E_INVAL (w or h 0), WC_E_RANGE (a scaled side past 2^32 - 1
 * pixels: a sliver of an image stretched to a tall crop), WC_E_NOMEM. */
wc_err wc_image_resize_crop(const wc_image *src, uint32_t w, uint32_t h, wc_image *out);

#endif /* WC_IMAGE_IO_H */
