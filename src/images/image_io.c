/* image_io.c - which reader a file needs, the PPM/PGM reader and writer
 * (image_io.h); PNG and JPEG in image_png.c and image_jpeg.c. */
#include "images/image_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fileio.h"

#ifdef WC_IMAGE_CODECS
static char formats[96];
static void formats_fill(void)
{
	snprintf(formats, sizeof formats, "PNG (libpng %s), JPEG (libjpeg %d), PPM, PGM", wc_image_png_version(),
		 wc_image_jpeg_version());
}
#endif

const char *wc_image_formats(void)
{
#ifdef WC_IMAGE_CODECS
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, formats_fill);
	return formats;
#else
	return "PPM, PGM";
#endif
}

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

wc_err wc_image_check_dims(const char *path, uint64_t w, uint64_t h, uint64_t max_pixels)
{
	if (w < 1 || h < 1 || w > WC_IMAGE_MAX_SIDE || h > WC_IMAGE_MAX_SIDE || w * h > max_pixels)
		return wc_fail(WC_E_RANGE, "%s: %llux%llu pixels (limits: sides 1..%u, %llu pixels)",
			       path, (unsigned long long)w, (unsigned long long)h,
			       WC_IMAGE_MAX_SIDE, (unsigned long long)max_pixels);
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
	wc_err e = wc_image_check_dims(path, w, h, max_pixels);
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
#ifdef WC_IMAGE_CODECS
	else if (strcmp(kind, "png") == 0)
		e = wc_image_load_png(path, f, max_pixels, out);
	else if (strcmp(kind, "jpeg") == 0)
		e = wc_image_load_jpeg(path, f, max_pixels, out);
#else
	else if (strcmp(kind, "ppm") != 0)
		e = wc_fail(WC_E_UNSUPPORTED, "%s: a %s image, and this build reads PPM and PGM only "
			    "(configured --disable-image-codecs)", path, kind);
#endif
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
