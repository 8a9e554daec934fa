/* image_jpeg.c - JPEG files to 8-bit RGB with libjpeg (image_internal.h). */
#include "images/image_internal.h"

#include <stdio.h> /* before jpeglib.h, which uses FILE */
#include <jpeglib.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

struct jpeg_err {
	struct jpeg_error_mgr mgr;
	jmp_buf jump;
	char msg[JMSG_LENGTH_MAX];
};

static void jpeg_error_exit(j_common_ptr cinfo)
{
	struct jpeg_err *je = (struct jpeg_err *)cinfo->err;
	je->mgr.format_message(cinfo, je->msg);
	longjmp(je->jump, 1);
}

static void jpeg_quiet(j_common_ptr cinfo, int level)
{
	(void)cinfo;
	(void)level; /* warnings (corrupt-but-decodable data) are not fatal */
}

/* CMYK as a JPEG stores it to RGB, as PIL's Image.open(f).convert("RGB")
 * does, bit for bit: PIL reads CMYK JPEGs as Adobe-inverted ("CMYK;I",
 * JpegImagePlugin.py), then cmyk2rgb (libImaging/Convert.c) computes
 * nk - nk * (255 - c) / 255 with nk = 255 - k and its MULDIV255 rounding.
 * With the stored values C and K (c = 255 - C, nk = K) that is
 * K - MULDIV255(255 - C, K). width pixels: 4 bytes each in, 3 out. */
static void cmyk_to_rgb(const uint8_t *in, uint8_t *out, uint32_t width)
{
	for (uint32_t x = 0; x < width; x++, in += 4, out += 3) {
		unsigned k = in[3];
		for (int j = 0; j < 3; j++) {
			unsigned t = (255u - in[j]) * k + 128u;
			out[j] = (uint8_t)(k - (((t >> 8) + t) >> 8));
		}
	}
}

wc_err wc_image_load_jpeg(const char *path, FILE *f, uint64_t max_pixels, wc_image *out)
{
	struct jpeg_decompress_struct cinfo;
	struct jpeg_err je;
	/* volatile: modified between setjmp and longjmp. */
	uint8_t *volatile rgb = NULL;
	volatile wc_err e = WC_OK;
	cinfo.err = jpeg_std_error(&je.mgr);
	je.mgr.error_exit = jpeg_error_exit;
	je.mgr.emit_message = jpeg_quiet;
	if (setjmp(je.jump)) {
		jpeg_destroy_decompress(&cinfo);
		free(rgb);
		return e ? e : wc_fail(WC_E_FORMAT, "%s: JPEG: %s", path, je.msg);
	}
	jpeg_create_decompress(&cinfo);
	jpeg_stdio_src(&cinfo, f);
	jpeg_read_header(&cinfo, TRUE);
	/* CMYK and YCCK (libjpeg turns YCCK into CMYK) are read as CMYK and
	 * converted below; everything else straight to RGB. */
	int cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
	cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
	if ((e = wc_image_check_dims(path, cinfo.image_width, cinfo.image_height, max_pixels)))
		longjmp(je.jump, 1);
	jpeg_start_decompress(&cinfo);
	if (cinfo.output_components != (cmyk ? 4 : 3)) {
		e = wc_fail(WC_E_FORMAT, "%s: JPEG decodes to %d components", path,
			    cinfo.output_components);
		longjmp(je.jump, 1);
	}
	size_t stride = (size_t)cinfo.output_width * 3;
	/* A CMYK row is decoded into 4 * width bytes past the image, then
	 * converted into its place. */
	size_t scratch = cmyk ? (size_t)cinfo.output_width * 4 : 0;
	rgb = malloc(stride * cinfo.output_height + scratch);
	if (!rgb) {
		e = wc_fail(WC_E_NOMEM, "%s: no memory", path);
		longjmp(je.jump, 1);
	}
	while (cinfo.output_scanline < cinfo.output_height) {
		uint8_t *dst = rgb + stride * cinfo.output_scanline;
		JSAMPROW row = cmyk ? rgb + stride * cinfo.output_height : dst;
		jpeg_read_scanlines(&cinfo, &row, 1);
		if (cmyk)
			cmyk_to_rgb(row, dst, cinfo.output_width);
	}
	out->width = cinfo.output_width;
	out->height = cinfo.output_height;
	out->rgb = rgb;
	jpeg_finish_decompress(&cinfo);
	jpeg_destroy_decompress(&cinfo);
	return WC_OK;
}

int wc_image_jpeg_version(void) { return JPEG_LIB_VERSION; }
