/* qvq_names.c - validation and mapping of .qvq image names. */
#include "qvq/qvq_names.h"

#include <stdlib.h>
#include <string.h>

#include "qvq/qvq_format.h"

/* Quote up to 80 bytes of a name for an error message, escaping
 * non-printable bytes, into buf (at least 330 bytes). */
static const char *quote(const char *s, size_t len, char *buf)
{
	size_t o = 0;
	for (size_t i = 0; i < len && i < 80; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x20 && c < 0x7f && c != '\\') {
			buf[o++] = (char)c;
		} else {
			static const char hex[] = "0123456789abcdef";
			buf[o++] = '\\'; buf[o++] = 'x';
			buf[o++] = hex[c >> 4]; buf[o++] = hex[c & 15];
		}
	}
	if (len > 80) { memcpy(buf + o, "...", 3); o += 3; }
	buf[o] = 0;
	return buf;
}

wc_err wc_qvq_name_check(const char *name, size_t len)
{
	char q[400];
	if (len == 0)
		return wc_fail(WC_E_FORMAT, "qvq: empty image name");
	if (len > WC_QVQ_MAX_NAME)
		return wc_fail(WC_E_FORMAT, "qvq: image name of %zu bytes (limit %u)", len,
			       WC_QVQ_MAX_NAME);
	if (name[0] == '/')
		return wc_fail(WC_E_FORMAT, "qvq: absolute image name \"%s\" refused",
			       quote(name, len, q));
	size_t start = 0;
	for (size_t i = 0; i <= len; i++) {
		if (i < len && (unsigned char)name[i] < 0x20)
			return wc_fail(WC_E_FORMAT, "qvq: image name \"%s\" holds a control byte",
				       quote(name, len, q));
		if (i < len && name[i] != '/')
			continue;
		size_t clen = i - start;
		const char *c = name + start;
		if (clen == 0)
			return wc_fail(WC_E_FORMAT, "qvq: image name \"%s\" has an empty component",
				       quote(name, len, q));
		if ((clen == 1 && c[0] == '.') || (clen == 2 && c[0] == '.' && c[1] == '.'))
			return wc_fail(WC_E_FORMAT, "qvq: image name \"%s\" has a \"%.*s\" component "
				       "(would escape or alias its directory)",
				       quote(name, len, q), (int)clen, c);
		/* Every component, and the last as shown (its extension made
		 * ".ppm"), must be a name a file system takes (NAME_MAX). */
		size_t shown = clen;
		if (i == len) {
			const char *dot = memrchr(c, '.', clen);
			shown = (dot && dot != c ? (size_t)(dot - c) : clen) + 4;
		}
		if (clen > WC_QVQ_MAX_COMPONENT || shown > WC_QVQ_MAX_COMPONENT)
			return wc_fail(WC_E_FORMAT, "qvq: image name \"%s\" has a component of %zu bytes%s "
				       "(a file name takes at most %u)", quote(name, len, q), clen,
				       shown > clen ? " shown with .ppm" : "", WC_QVQ_MAX_COMPONENT);
		if (start == 0 && i < len &&
		    ((clen == 10 && memcmp(c, "images.npy", 10) == 0) ||
		     (clen == 10 && memcmp(c, "labels.txt", 10) == 0)))
			return wc_fail(WC_E_FORMAT, "qvq: image name \"%s\" uses the reserved "
				       "directory name \"%.*s\"", quote(name, len, q), (int)clen, c);
		start = i + 1;
	}
	return WC_OK;
}

char *wc_qvq_ppm_name(const char *name)
{
	size_t len = strlen(name);
	const char *slash = strrchr(name, '/');
	const char *base = slash ? slash + 1 : name;
	const char *dot = strrchr(base, '.');
	size_t keep = (dot && dot != base) ? (size_t)(dot - name) : len;
	char *out = malloc(keep + 5);
	if (!out)
		return NULL;
	memcpy(out, name, keep);
	memcpy(out + keep, ".ppm", 5);
	return out;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

wc_err wc_qvq_names_unique(const char *const *names, size_t n)
{
	const char **sorted = malloc((n ? n : 1) * sizeof *sorted);
	if (!sorted)
		return wc_fail(WC_E_NOMEM, "qvq: no memory for %zu names", n);
	memcpy(sorted, names, n * sizeof *sorted);
	qsort(sorted, n, sizeof *sorted, cmp_str);
	wc_err e = WC_OK;
	for (size_t i = 1; i < n && !e; i++)
		if (strcmp(sorted[i - 1], sorted[i]) == 0)
			e = wc_fail(WC_E_FORMAT, "qvq: two images are both shown as \"%.200s\"",
				    sorted[i]);
	/* A file name that is also a directory of another name. */
	char *prefix = NULL;
	for (size_t i = 0; i < n && !e; i++) {
		const char *s = names[i];
		for (const char *p = strchr(s, '/'); p && !e; p = strchr(p + 1, '/')) {
			size_t plen = (size_t)(p - s);
			char *np = realloc(prefix, plen + 1);
			if (!np) { e = wc_fail(WC_E_NOMEM, "qvq: no memory"); break; }
			prefix = np;
			memcpy(prefix, s, plen);
			prefix[plen] = 0;
			const char *key = prefix;
			if (bsearch(&key, sorted, n, sizeof *sorted, cmp_str))
				e = wc_fail(WC_E_FORMAT, "qvq: \"%.200s\" is both an image and a "
					    "directory", prefix);
		}
	}
	free(prefix);
	free(sorted);
	return e;
}
