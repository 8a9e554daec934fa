/* fuzz_image.c - fuzz target for the image readers of `wcodec pack-images`
 * (qvq/image_io.h): PNG through libpng, JPEG through libjpeg, binary
 * PPM/PGM of our own, then the resize + centre crop. Photographs come from
 * anywhere, so these read untrusted bytes.
 *
 * Properties checked (abort() on a violation):
 * - wc_image_load ends in WC_OK or one of its documented errors
 *   (WC_E_FORMAT, WC_E_UNSUPPORTED, WC_E_RANGE, WC_E_NOMEM), and in
 *   WC_E_FORMAT whenever wc_image_sniff knows no reader for the bytes;
 * - a loaded image is within the limits (sides 1..WC_IMAGE_MAX_SIDE, at
 *   most WC_IMAGE_MAX_PIXELS) and loading the same bytes again gives the
 *   same pixels (no uninitialised memory in the output);
 * - written as binary PPM and loaded back, it has the same pixels;
 * - wc_image_resize_crop to its own size gives the same pixels, and to other
 *   sizes gives exactly w x h pixels, each channel of each a value between
 *   that channel's least and greatest in the image (the triangle filter's
 *   weights are a convex combination).
 * The sanitizers catch reads and writes outside the buffers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/hash.h"
#include "fuzz/fuzz_target.h"
#include "images/image_io.h"

#define FUZZ_MAX_INPUT (1u << 20)
/* Images past this many pixels are only loaded (twice): the resizes and
 * the PPM round trip would make each input slow without testing more. */
#define FUZZ_MAX_CHECKED_PIXELS (1u << 16)

static void fail(const char *what)
{
	fprintf(stderr, "fuzz_image: %s\n", what);
	abort();
}

static uint64_t pixels_hash(const wc_image *img)
{
	return wc_xxh3_64(img->rgb, (size_t)img->width * img->height * 3);
}

static void expect_same(const wc_image *a, const wc_image *b, const char *what)
{
	if (a->width != b->width || a->height != b->height ||
	    memcmp(a->rgb, b->rgb, (size_t)a->width * a->height * 3) != 0)
		fail(what);
}

/* Resize + crop img to w x h and check the output's size and range. */
static void check_resize(const wc_image *img, uint32_t w, uint32_t h, const uint8_t lo[3],
			 const uint8_t hi[3])
{
	wc_image out;
	wc_err e = wc_image_resize_crop(img, w, h, &out);
	if (e == WC_E_NOMEM)
		return;
	if (e != WC_OK)
		fail("resize_crop failed on a loaded image");
	if (out.width != w || out.height != h || !out.rgb)
		fail("resize_crop output has the wrong size");
	for (size_t i = 0; i < (size_t)w * h * 3; i++)
		if (out.rgb[i] < lo[i % 3] || out.rgb[i] > hi[i % 3])
			fail("a resized pixel is outside its channel's range in the image");
	wc_image_free(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > FUZZ_MAX_INPUT)
		return 0;
	char path[64];
	int fd = fuzz_memfd(data, size, path);
	wc_image img;
	wc_err e = wc_image_load(path, &img);
	if (e != WC_OK) {
		if (e != WC_E_FORMAT && e != WC_E_UNSUPPORTED && e != WC_E_RANGE && e != WC_E_NOMEM)
			fail("wc_image_load: an error it does not document");
		if (!wc_image_sniff(data, size < 8 ? size : 8) && e != WC_E_FORMAT)
			fail("bytes of no known kind did not end in WC_E_FORMAT");
		close(fd);
		return 0;
	}
	if (!wc_image_sniff(data, size < 8 ? size : 8))
		fail("an image loaded from bytes of no known kind");
	const uint64_t npix = (uint64_t)img.width * img.height;
	if (!img.rgb || img.width < 1 || img.height < 1 || img.width > WC_IMAGE_MAX_SIDE ||
	    img.height > WC_IMAGE_MAX_SIDE || npix > WC_IMAGE_MAX_PIXELS)
		fail("a loaded image is outside the limits");
	const uint64_t h1 = pixels_hash(&img);

	wc_image again;
	if (wc_image_load(path, &again) != WC_OK)
		fail("the same bytes loaded once and failed the second time");
	if (pixels_hash(&again) != h1)
		fail("loading the same bytes twice gave different pixels");
	expect_same(&img, &again, "loading the same bytes twice gave different images");
	wc_image_free(&again);

	if (npix <= FUZZ_MAX_CHECKED_PIXELS) {
		/* The PPM written for it, loaded back (over the input's memfd). */
		if (wc_image_write_ppm(path, &img) != WC_OK)
			fail("wc_image_write_ppm to a memfd failed");
		if (wc_image_load(path, &again) != WC_OK)
			fail("our own PPM does not load");
		expect_same(&img, &again, "the PPM round trip changed the pixels");
		wc_image_free(&again);

		if (wc_image_resize_crop(&img, img.width, img.height, &again) == WC_OK) {
			expect_same(&img, &again, "resize_crop to the image's own size changed it");
			wc_image_free(&again);
		}
		uint8_t lo[3] = {255, 255, 255}, hi[3] = {0, 0, 0};
		for (size_t i = 0; i < npix * 3; i++) {
			if (img.rgb[i] < lo[i % 3])
				lo[i % 3] = img.rgb[i];
			if (img.rgb[i] > hi[i % 3])
				hi[i % 3] = img.rgb[i];
		}
		check_resize(&img, 1, 1, lo, hi);
		check_resize(&img, 5, 3, lo, hi);
		check_resize(&img, img.height, img.width, lo, hi); /* the other aspect */
		check_resize(&img, 2 * img.width + 1, 1, lo, hi);
	}
	wc_image_free(&img);
	close(fd);
	return 0;
}
