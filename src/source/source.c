/* source.c - opening a source by name and the calls every kind shares
 * (source.h). */
#include "source/source_impl.h"

#include <string.h>

#include "config.h"

wc_err wc_source_open(const char *name, wc_source **out)
{
	if (strncmp(name, "s3://", 5) == 0) {
#ifdef WC_S3
		return wc_source_open_s3(name, out);
#else
		*out = NULL;
		return wc_fail(WC_E_UNSUPPORTED, "%s: this build reads no s3:// objects (configure found no libcurl "
			       "7.75, libinih or expat)", name);
#endif
	}
	return wc_source_open_file(name, out);
}

wc_err wc_source_read(wc_source *s, void *buf, size_t len, uint64_t off, const char *what)
{
	if (off > s->size || len > s->size - off)
		return wc_fail(WC_E_RANGE, "%s: reading %s: bytes [%llu, %llu) past the end (%llu bytes)", s->name, what,
			       (unsigned long long)off, (unsigned long long)(off + len), (unsigned long long)s->size);
	return len ? s->ops->read(s, buf, len, off, what) : WC_OK;
}

uint64_t wc_source_size(const wc_source *s) { return s->size; }
size_t wc_source_read_ahead(const wc_source *s) { return s->read_ahead; }
const char *wc_source_name(const wc_source *s) { return s->name; }

wc_err wc_source_set_path(wc_source *s, const char *path)
{
	if (!s->ops->set_path)
		return wc_fail(WC_E_INVAL, "%s: not a local file", s->name);
	return s->ops->set_path(s, path);
}

void wc_source_close(wc_source *s)
{
	if (s)
		s->ops->close(s);
}

#ifndef WC_S3
const char *wc_source_s3_support(void) { return "none (built without libcurl, libinih and expat)"; }

wc_err wc_source_list(const char *prefix_uri, int (*fn)(void *ctx, const char *key, uint64_t size), void *ctx)
{
	(void)fn;
	(void)ctx;
	return wc_fail(WC_E_UNSUPPORTED, "%s: this build lists no s3:// objects (configure found no libcurl 7.75, "
		       "libinih or expat)", prefix_uri);
}
#endif
