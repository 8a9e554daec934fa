/* image_png.c - PNG files to 8-bit RGB with libpng (image_internal.h). */
#include "images/image_internal.h"

#include <png.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

/* libpng's classic API with transforms to 8-bit RGB: palette and grey
 * expanded, 16-bit scaled (png_set_scale_16: v * 255 / 65535, rounded),
 * alpha and tRNS dropped. Samples are taken as stored (no gamma
 * correction), as PIL does. */
struct png_err {
	jmp_buf jump;
	char msg[200];
};

static void png_error_fn(png_structp png, png_const_charp msg)
{
	struct png_err *pe = png_get_error_ptr(png);
	snprintf(pe->msg, sizeof pe->msg, "%s", msg);
	longjmp(pe->jump, 1);
}

static void png_warning_fn(png_structp png, png_const_charp msg)
{
	(void)png;
	(void)msg;
}

wc_err wc_image_load_png(const char *path, FILE *f, uint64_t max_pixels, wc_image *out)
{
	struct png_err pe = {.msg = ""};
	png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &pe, png_error_fn,
						 png_warning_fn);
	png_infop info = png ? png_create_info_struct(png) : NULL;
	uint8_t *volatile rgb = NULL;
	png_bytep *volatile rows = NULL;
	volatile wc_err e = WC_OK;
	if (!png || !info) {
		png_destroy_read_struct(png ? &png : NULL, NULL, NULL);
		return wc_fail(WC_E_NOMEM, "%s: no memory for libpng", path);
	}
	if (setjmp(pe.jump)) {
		png_destroy_read_struct(&png, &info, NULL);
		free(rgb);
		free(rows);
		return e ? e : wc_fail(WC_E_FORMAT, "%s: PNG: %s", path, pe.msg);
	}
	png_init_io(png, f);
	png_set_user_limits(png, WC_IMAGE_MAX_SIDE, WC_IMAGE_MAX_SIDE);
	png_read_info(png, info);
	png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
	if ((e = wc_image_check_dims(path, w, h, max_pixels)))
		longjmp(pe.jump, 1);
	int type = png_get_color_type(png, info);
	png_set_expand(png); /* palette -> RGB, grey < 8 bits -> 8, tRNS -> alpha */
	png_set_scale_16(png);
	if (type == PNG_COLOR_TYPE_GRAY || type == PNG_COLOR_TYPE_GRAY_ALPHA)
		png_set_gray_to_rgb(png);
	png_set_strip_alpha(png);
	png_set_interlace_handling(png);
	png_read_update_info(png, info);
	if (png_get_rowbytes(png, info) != (size_t)w * 3 || png_get_channels(png, info) != 3) {
		e = wc_fail(WC_E_FORMAT, "%s: PNG did not convert to 8-bit RGB", path);
		longjmp(pe.jump, 1);
	}
	rgb = malloc((size_t)w * h * 3);
	rows = malloc(h * sizeof *rows);
	if (!rgb || !rows) {
		e = wc_fail(WC_E_NOMEM, "%s: no memory", path);
		longjmp(pe.jump, 1);
	}
	for (png_uint_32 y = 0; y < h; y++)
		rows[y] = rgb + (size_t)y * w * 3;
	png_read_image(png, rows);
	png_read_end(png, NULL);
	png_destroy_read_struct(&png, &info, NULL);
	free(rows);
	out->width = w;
	out->height = h;
	out->rgb = rgb;
	return WC_OK;
}

const char *wc_image_png_version(void) { return png_get_libpng_ver(NULL); }
