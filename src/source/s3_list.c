/* s3_list.c - a ListObjectsV2 page parsed with expat (s3_list.h). */
#include "source/s3_list.h"

#include <expat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct list_parse {
	XML_Parser p;
	int (*fn)(void *ctx, const char *key, uint64_t size);
	void *ctx;
	int root_ok, in_contents, depth, stop, more, too_long;
	char elem[32];    /* the element whose text is being gathered */
	char text[2048];  /* its text */
	size_t n;
	char key[1100];   /* the current <Contents>'s key (S3 keys are at most 1024 bytes) */
	uint64_t size;
	char *token;
	size_t cap;
} list_parse;

static void on_start(void *ud, const XML_Char *name, const XML_Char **atts)
{
	(void)atts;
	list_parse *l = ud;
	if (l->depth++ == 0)
		l->root_ok = !strcmp(name, "ListBucketResult");
	if (!strcmp(name, "Contents")) {
		l->in_contents = 1;
		l->key[0] = '\0';
		l->size = 0;
	}
	snprintf(l->elem, sizeof l->elem, "%s", name);
	l->n = 0;
}

static void on_text(void *ud, const XML_Char *s, int len)
{
	list_parse *l = ud;
	if ((size_t)len > sizeof l->text - 1 - l->n) {
		l->too_long = 1;
		return;
	}
	memcpy(l->text + l->n, s, (size_t)len);
	l->n += (size_t)len;
}

static void on_end(void *ud, const XML_Char *name)
{
	list_parse *l = ud;
	l->depth--;
	l->text[l->n] = '\0';
	if (l->in_contents && !strcmp(name, "Key")) {
		if (l->n >= sizeof l->key)
			l->too_long = 1;
		else
			memcpy(l->key, l->text, l->n + 1);
	} else if (l->in_contents && !strcmp(name, "Size")) {
		l->size = strtoull(l->text, NULL, 10);
	} else if (!strcmp(name, "Contents")) {
		l->in_contents = 0;
		if (!l->stop && l->key[0] && l->fn(l->ctx, l->key, l->size)) {
			l->stop = 1;
			XML_StopParser(l->p, XML_FALSE);
		}
	} else if (l->depth == 1 && !strcmp(name, "IsTruncated")) {
		l->more = !strcmp(l->text, "true");
	} else if (l->depth == 1 && !strcmp(name, "NextContinuationToken")) {
		if (l->n >= l->cap)
			l->too_long = 1;
		else
			memcpy(l->token, l->text, l->n + 1);
	}
	l->n = 0;
}

wc_err wc_s3_list_parse(const char *xml, size_t len, int (*fn)(void *ctx, const char *key, uint64_t size),
			void *ctx, int *more, char *token, size_t cap, int *stop)
{
	list_parse *l = calloc(1, sizeof *l);
	if (!l || !(l->p = XML_ParserCreate("UTF-8"))) {
		free(l);
		return wc_fail(WC_E_NOMEM, "out of memory");
	}
	l->fn = fn;
	l->ctx = ctx;
	l->token = token;
	l->cap = cap;
	token[0] = '\0';
	XML_SetUserData(l->p, l);
	XML_SetElementHandler(l->p, on_start, on_end);
	XML_SetCharacterDataHandler(l->p, on_text);
	enum XML_Status st = XML_Parse(l->p, xml, (int)len, XML_TRUE);
	wc_err e = WC_OK;
	if (st == XML_STATUS_ERROR && !l->stop)
		e = wc_fail(WC_E_FORMAT, "a bucket listing: malformed XML at line %lu: %s",
			    (unsigned long)XML_GetCurrentLineNumber(l->p), XML_ErrorString(XML_GetErrorCode(l->p)));
	else if (!l->root_ok)
		e = wc_fail(WC_E_FORMAT, "a bucket listing: not a ListBucketResult");
	else if (l->too_long)
		e = wc_fail(WC_E_FORMAT, "a bucket listing: a key or token too long");
	*more = l->more && !l->stop && token[0];
	*stop = l->stop;
	XML_ParserFree(l->p);
	free(l);
	return e;
}
