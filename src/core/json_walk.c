/* json_walk.c - a JSON object one member at a time (json_walk.h). */
#include "core/json_walk.h"

#include <stdlib.h>
#include <string.h>

/* Value parsing: one value, nothing after it read, duplicates inside it refused. */
#define VALUE_FLAGS (JSON_DECODE_ANY | JSON_DISABLE_EOF_CHECK | JSON_REJECT_DUPLICATES)

typedef struct walk {
	const char *text, *what;
	size_t len, pos;
	char **keys;
	size_t nkeys, cap;
} walk;

static void skip_ws(walk *w)
{
	while (w->pos < w->len && (w->text[w->pos] == ' ' || w->text[w->pos] == '\t' || w->text[w->pos] == '\n' ||
				   w->text[w->pos] == '\r'))
		w->pos++;
}

static wc_err bad_json(const walk *w, const char *why)
{
	return wc_fail(WC_E_FORMAT, "%s is not valid JSON: %s at byte %zu", w->what, why, w->pos);
}

/* The next value at w->pos; *out NULL on error (reason recorded). Its text
 * may take WC_JSON_VALUE_MAX bytes at most: jansson's tree of a value takes
 * up to some 30 times its text, and one member of a hostile document could
 * otherwise be the whole document. */
static wc_err next_value(walk *w, json_t **out)
{
	json_error_t jerr;
	size_t rest = w->len - w->pos;
	*out = json_loadb(w->text + w->pos, rest < WC_JSON_VALUE_MAX ? rest : WC_JSON_VALUE_MAX, VALUE_FLAGS,
			  &jerr);
	if (!*out && rest > WC_JSON_VALUE_MAX && jerr.position >= (int)(WC_JSON_VALUE_MAX - 1))
		return wc_fail(WC_E_RANGE, "%s: a value at byte %zu is longer than %u bytes", w->what, w->pos,
			       WC_JSON_VALUE_MAX);
	if (!*out) {
		w->pos += (size_t)(jerr.position > 0 ? jerr.position : 0);
		return bad_json(w, jerr.text);
	}
	w->pos += (size_t)jerr.position;
	return WC_OK;
}

/* Expect character c (after whitespace) and step over it. */
static int expect(walk *w, char c)
{
	skip_ws(w);
	if (w->pos >= w->len || w->text[w->pos] != c)
		return -1;
	w->pos++;
	return 0;
}

/* After a member or element: 1 if a ',' follows (another one comes), 0 if
 * `close` does (the object or array ends), else an error recorded. */
static int after_item(walk *w, char close, wc_err *e)
{
	skip_ws(w);
	if (w->pos < w->len && w->text[w->pos] == ',') {
		w->pos++;
		return 1;
	}
	if (expect(w, close) == 0)
		return 0;
	*e = bad_json(w, close == ']' ? "',' or ']' expected" : "',' or '}' expected");
	return -1;
}

static int by_string(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static wc_err keep_key(walk *w, const char *key)
{
	if (w->nkeys == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 64;
		char **k = realloc(w->keys, cap * sizeof *k);
		if (!k)
			return wc_fail(WC_E_NOMEM, "%s: out of memory", w->what);
		w->keys = k;
		w->cap = cap;
	}
	if (!(w->keys[w->nkeys] = strdup(key)))
		return wc_fail(WC_E_NOMEM, "%s: out of memory", w->what);
	w->nkeys++;
	return WC_OK;
}

static wc_err walk_array(walk *w, const char *key, wc_json_element_fn element_fn, void *ctx)
{
	skip_ws(w);
	if (w->len - w->pos >= 4 && memcmp(w->text + w->pos, "null", 4) == 0) {
		w->pos += 4; /* no elements */
		return WC_OK;
	}
	if (expect(w, '['))
		return wc_fail(WC_E_FORMAT, "%s: \"%s\" is not an array", w->what, key);
	skip_ws(w);
	if (w->pos < w->len && w->text[w->pos] == ']') {
		w->pos++;
		return WC_OK;
	}
	for (size_t i = 0;; i++) {
		json_t *v;
		wc_err e = next_value(w, &v);
		if (e)
			return e;
		e = element_fn(ctx, i, v);
		json_decref(v);
		if (e || after_item(w, ']', &e) <= 0)
			return e;
	}
}

static wc_err walk_members(walk *w, wc_json_member_fn member_fn, const char *array_key,
			   wc_json_element_fn element_fn, void *ctx)
{
	skip_ws(w);
	if (w->pos >= w->len || w->text[w->pos] != '{') {
		/* valid JSON of another kind, or not JSON at all */
		json_t *v;
		wc_err e = next_value(w, &v);
		if (e)
			return e;
		json_decref(v);
		return wc_fail(WC_E_FORMAT, "%s: the JSON is not an object", w->what);
	}
	w->pos++;
	skip_ws(w);
	if (w->pos < w->len && w->text[w->pos] == '}') {
		w->pos++;
		return WC_OK;
	}
	for (;;) {
		skip_ws(w);
		if (w->pos >= w->len || w->text[w->pos] != '"')
			return bad_json(w, "a string key expected");
		json_t *k;
		wc_err e = next_value(w, &k);
		if (e)
			return e;
		e = keep_key(w, json_string_value(k));
		json_decref(k);
		if (e)
			return e;
		const char *key = w->keys[w->nkeys - 1];
		if (expect(w, ':'))
			return bad_json(w, "':' expected");
		if (array_key && strcmp(key, array_key) == 0) {
			e = walk_array(w, key, element_fn, ctx);
		} else {
			json_t *v;
			if ((e = next_value(w, &v)))
				return e;
			e = member_fn(ctx, key, v);
			json_decref(v);
		}
		if (e || after_item(w, '}', &e) <= 0)
			return e;
	}
}

wc_err wc_json_walk_object(const char *text, size_t len, const char *what, wc_json_member_fn member_fn,
			   const char *array_key, wc_json_element_fn element_fn, void *ctx)
{
	walk w = { .text = text, .len = len, .what = what };
	wc_err e = walk_members(&w, member_fn, array_key, element_fn, ctx);
	if (!e) {
		skip_ws(&w);
		if (w.pos != w.len)
			e = bad_json(&w, "end of text expected");
	}
	if (!e && w.nkeys > 1) {
		qsort(w.keys, w.nkeys, sizeof *w.keys, by_string);
		for (size_t i = 1; i < w.nkeys && !e; i++)
			if (strcmp(w.keys[i - 1], w.keys[i]) == 0)
				e = wc_fail(WC_E_FORMAT, "%s: duplicate key \"%s\"", w.what, w.keys[i]);
	}
	for (size_t i = 0; i < w.nkeys; i++)
		free(w.keys[i]);
	free(w.keys);
	return e;
}
