/* image_io.c - PNG (libpng simplified API), JPEG (libjpeg), PPM readers. */
#include "qvq/image_io.h"

#include <errno.h>
#include <stdio.h> /* before jpeglib.h, which uses FILE */
#include <jpeglib.h>
#include <png.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

const char *wc_image_sniff(const uint8_t *head, size_t len)
{
	if (len >= 8 && memcmp(head, "\x89PNG\r\n\x1a\n", 8) == 0)
		return "png";
	if (len >= 3 && head[0] == 0xff && head[1] == 0xd8 && head[2] == 0xff)
		return "jpeg";
	if (len >= 2 && head[0] == 'P' && (head[1] == '6' || head[1] == '5'))
		return "ppm";
	return NULL;
}

static wc_err check_dims(const char *path, uint64_t w, uint64_t h)
{
	if (w < 1 || h < 1 || w > WC_IMAGE_MAX_SIDE || h > WC_IMAGE_MAX_SIDE ||
	    w * h > WC_IMAGE_MAX_PIXELS)
		return wc_fail(WC_E_RANGE, "%s: %llux%llu pixels (limits: sides 1..%u, %u pixels)",
			       path, (unsigned long long)w, (unsigned long long)h,
			       WC_IMAGE_MAX_SIDE, WC_IMAGE_MAX_PIXELS);
	return WC_OK;
}

static wc_err load_png(const char *path, wc_image *out)
{
	png_image im;
	memset(&im, 0, sizeof im);
	im.version = PNG_IMAGE_VERSION;
	if (!png_image_begin_read_from_file(&im, path))
		return wc_fail(WC_E_FORMAT, "%s: PNG: %s", path, im.message);
	wc_err e = check_dims(path, im.width, im.height);
	if (e) {
		png_image_free(&im);
		return e;
	}
	im.format = PNG_FORMAT_RGBA;
	size_t n = (size_t)im.width * im.height;
	uint8_t *rgba = malloc(n * 4);
	if (!rgba) {
		png_image_free(&im);
		return wc_fail(WC_E_NOMEM, "%s: no memory", path);
	}
	if (!png_image_finish_read(&im, NULL, rgba, 0, NULL)) {
		free(rgba);
		return wc_fail(WC_E_FORMAT, "%s: PNG: %s", path, im.message);
	}
	/* Drop alpha in place: RGBA -> RGB. */
	for (size_t i = 0; i < n; i++)
		memmove(rgba + 3 * i, rgba + 4 * i, 3);
	out->width = im.width;
	out->height = im.height;
	uint8_t *shrunk = realloc(rgba, n * 3);
	out->rgb = shrunk ? shrunk : rgba;
	return WC_OK;
}

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

static wc_err load_jpeg(const char *path, FILE *f, wc_image *out)
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
	if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
		e = wc_fail(WC_E_UNSUPPORTED, "%s: CMYK JPEG is not supported", path);
		longjmp(je.jump, 1);
	}
	cinfo.out_color_space = JCS_RGB;
	if ((e = check_dims(path, cinfo.image_width, cinfo.image_height)))
		longjmp(je.jump, 1);
	jpeg_start_decompress(&cinfo);
	if (cinfo.output_components != 3) {
		e = wc_fail(WC_E_FORMAT, "%s: JPEG decodes to %d components", path,
			    cinfo.output_components);
		longjmp(je.jump, 1);
	}
	size_t stride = (size_t)cinfo.output_width * 3;
	rgb = malloc(stride * cinfo.output_height);
	if (!rgb) {
		e = wc_fail(WC_E_NOMEM, "%s: no memory", path);
		longjmp(je.jump, 1);
	}
	while (cinfo.output_scanline < cinfo.output_height) {
		JSAMPROW row = rgb + stride * cinfo.output_scanline;
		jpeg_read_scanlines(&cinfo, &row, 1);
	}
	out->width = cinfo.output_width;
	out->height = cinfo.output_height;
	out->rgb = rgb;
	jpeg_finish_decompress(&cinfo);
	jpeg_destroy_decompress(&cinfo);
	return WC_OK;
}

/* Next PNM header integer, skipping whitespace and # comments. */
static int pnm_int(FILE *f, unsigned long *v)
{
	int c;
	for (;;) {
		c = getc(f);
		if (c == '#') {
			while ((c = getc(f)) != EOF && c != '\n')
				;
		} else if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
			break;
		}
	}
	if (c < '0' || c > '9')
		return -1;
	*v = 0;
	while (c >= '0' && c <= '9') {
		if (*v > 100000000ul)
			return -1;
		*v = *v * 10 + (unsigned long)(c - '0');
		c = getc(f);
	}
	/* Exactly one whitespace byte ends the header's last number. */
	return (c == ' ' || c == '\t' || c == '\n' || c == '\r') ? 0 : -1;
}

static wc_err load_ppm(const char *path, FILE *f, wc_image *out)
{
	char magic[2];
	unsigned long w, h, maxval;
	if (fread(magic, 1, 2, f) != 2 || pnm_int(f, &w) || pnm_int(f, &h) || pnm_int(f, &maxval))
		return wc_fail(WC_E_FORMAT, "%s: malformed PPM/PGM header", path);
	wc_err e = check_dims(path, w, h);
	if (e)
		return e;
	if (maxval < 1 || maxval > 65535)
		return wc_fail(WC_E_FORMAT, "%s: PPM maxval %lu outside 1..65535", path, maxval);
	unsigned comps = magic[1] == '6' ? 3 : 1, bps = maxval > 255 ? 2 : 1;
	size_t n = (size_t)w * h;
	uint8_t *raw = malloc(n * comps * bps), *rgb = malloc(n * 3);
	if (!raw || !rgb) {
		free(raw);
		free(rgb);
		return wc_fail(WC_E_NOMEM, "%s: no memory", path);
	}
	if (fread(raw, 1, n * comps * bps, f) != n * comps * bps) {
		free(raw);
		free(rgb);
		return wc_fail(WC_E_FORMAT, "%s: PPM pixel data truncated", path);
	}
	for (size_t i = 0; i < n; i++) {
		for (unsigned c = 0; c < 3; c++) {
			size_t s = (i * comps + (comps == 3 ? c : 0)) * bps;
			unsigned long v = bps == 2 ? (unsigned long)raw[s] << 8 | raw[s + 1] : raw[s];
			if (v > maxval)
				v = maxval;
			rgb[3 * i + c] = (uint8_t)((v * 255 + maxval / 2) / maxval);
		}
	}
	free(raw);
	out->width = (uint32_t)w;
	out->height = (uint32_t)h;
	out->rgb = rgb;
	return WC_OK;
}

wc_err wc_image_load(const char *path, wc_image *out)
{
	memset(out, 0, sizeof *out);
	FILE *f = fopen(path, "rb");
	if (!f)
		return wc_fail(WC_E_IO, "%s: %s", path, strerror(errno));
	uint8_t head[8];
	size_t n = fread(head, 1, sizeof head, f);
	const char *kind = wc_image_sniff(head, n);
	wc_err e;
	rewind(f);
	if (!kind)
		e = wc_fail(WC_E_FORMAT, "%s: not a PNG, JPEG or binary PPM/PGM image", path);
	else if (strcmp(kind, "png") == 0)
		e = load_png(path, out);
	else if (strcmp(kind, "jpeg") == 0)
		e = load_jpeg(path, f, out);
	else
		e = load_ppm(path, f, out);
	fclose(f);
	return e;
}

void wc_image_free(wc_image *img)
{
	free(img->rgb);
	img->rgb = NULL;
}

wc_err wc_image_write_ppm(const char *path, const wc_image *img)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		return wc_fail(WC_E_IO, "%s: %s", path, strerror(errno));
	fprintf(f, "P6\n%u %u\n255\n", img->width, img->height);
	size_t n = (size_t)img->width * img->height * 3;
	int ok = fwrite(img->rgb, 1, n, f) == n;
	if (fclose(f) != 0)
		ok = 0;
	return ok ? WC_OK : wc_fail(WC_E_IO, "%s: write failed: %s", path, strerror(errno));
}
