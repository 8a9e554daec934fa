/* image_io.c - PNG (libpng simplified API), JPEG (libjpeg), PPM readers. */
#include "qvq/image_io.h"

#include <errno.h>
#include <stdio.h> /* before jpeglib.h, which uses FILE */
#include <jpeglib.h>
#include <png.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fileio.h"

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

/* The header's size against the limits, before any pixel buffer exists. */
static wc_err check_dims(const char *path, uint64_t w, uint64_t h, uint64_t max_pixels)
{
	if (w < 1 || h < 1 || w > WC_IMAGE_MAX_SIDE || h > WC_IMAGE_MAX_SIDE || w * h > max_pixels)
		return wc_fail(WC_E_RANGE, "%s: %llux%llu pixels (limits: sides 1..%u, %llu pixels)",
			       path, (unsigned long long)w, (unsigned long long)h,
			       WC_IMAGE_MAX_SIDE, (unsigned long long)max_pixels);
	return WC_OK;
}

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

static wc_err load_png(const char *path, FILE *f, uint64_t max_pixels, wc_image *out)
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
	if ((e = check_dims(path, w, h, max_pixels)))
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

static wc_err load_jpeg(const char *path, FILE *f, uint64_t max_pixels, wc_image *out)
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
	if ((e = check_dims(path, cinfo.image_width, cinfo.image_height, max_pixels)))
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

static wc_err load_ppm(const char *path, FILE *f, uint64_t max_pixels, wc_image *out)
{
	char magic[2];
	unsigned long w, h, maxval;
	if (fread(magic, 1, 2, f) != 2 || pnm_int(f, &w) || pnm_int(f, &h) || pnm_int(f, &maxval))
		return wc_fail(WC_E_FORMAT, "%s: malformed PPM/PGM header", path);
	wc_err e = check_dims(path, w, h, max_pixels);
	if (e)
		return e;
	if (maxval < 1 || maxval > 65535)
		return wc_fail(WC_E_FORMAT, "%s: PPM maxval %lu outside 1..65535", path, maxval);
	unsigned comps = magic[1] == '6' ? 3 : 1, bps = maxval > 255 ? 2 : 1;
	size_t n = (size_t)w * h;
	/* The pixels are stored uncompressed: a file too short for the header's
	 * size is refused before any buffer of that size is allocated. */
	struct stat st;
	long at = ftell(f);
	if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && at >= 0 &&
	    (uint64_t)st.st_size - (uint64_t)at < (uint64_t)n * comps * bps)
		return wc_fail(WC_E_FORMAT, "%s: PPM pixel data truncated (%llu bytes for %lux%lu pixels)",
			       path, (unsigned long long)((uint64_t)st.st_size - (uint64_t)at), w, h);
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
	return wc_image_load_max(path, WC_IMAGE_MAX_PIXELS, out);
}

wc_err wc_image_load_max(const char *path, uint64_t max_pixels, wc_image *out)
{
	memset(out, 0, sizeof *out);
	if (max_pixels > WC_IMAGE_MAX_PIXELS)
		max_pixels = WC_IMAGE_MAX_PIXELS;
	int fd;
	wc_err oe = wc_open_regular(path, &fd);
	if (oe)
		return oe;
	FILE *f = fdopen(fd, "rb");
	if (!f) {
		oe = wc_fail(WC_E_IO, "%s: %s", path, strerror(errno));
		close(fd);
		return oe;
	}
	uint8_t head[8];
	size_t n = fread(head, 1, sizeof head, f);
	const char *kind = wc_image_sniff(head, n);
	wc_err e;
	rewind(f);
	if (!kind)
		e = wc_fail(WC_E_FORMAT, "%s: not a PNG, JPEG or binary PPM/PGM image", path);
	else if (strcmp(kind, "png") == 0)
		e = load_png(path, f, max_pixels, out);
	else if (strcmp(kind, "jpeg") == 0)
		e = load_jpeg(path, f, max_pixels, out);
	else
		e = load_ppm(path, f, max_pixels, out);
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
