/* test_json_walk.c - src/core/json_walk.h: members and array elements come
 * one at a time with their values, and every malformed document is refused
 * with its reason: trailing text, duplicate keys (at the top and inside a
 * value), a missing separator, a non-object, an array member that is not
 * an array, a callback's error passed through. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "core/json_walk.h"

typedef struct seen {
	char keys[512];
	long sum;
	size_t elements;
} seen;

static wc_err on_member(void *ctx, const char *key, json_t *v)
{
	seen *s = ctx;
	strncat(s->keys, key, sizeof s->keys - strlen(s->keys) - 2);
	strcat(s->keys, ",");
	if (json_is_integer(v))
		s->sum += (long)json_integer_value(v);
	if (strcmp(key, "stop") == 0)
		return wc_fail(WC_E_RANGE, "told to stop");
	return WC_OK;
}

static wc_err on_element(void *ctx, size_t i, json_t *v)
{
	seen *s = ctx;
	ck_assert_uint_eq(i, s->elements);
	s->elements++;
	ck_assert(json_is_object(v));
	s->sum += (long)json_integer_value(json_object_get(v, "n"));
	return WC_OK;
}

static wc_err walk(const char *text, seen *s)
{
	memset(s, 0, sizeof *s);
	return wc_json_walk_object(text, strlen(text), "doc", on_member, "items", on_element, s);
}

START_TEST(members_and_elements_in_order)
{
	seen s;
	ck_assert_int_eq(walk(" { \"a\" : 1 ,\"b\":{\"x\":[1,2]}, \"items\" : [ {\"n\":10}, {\"n\":20} ] ,\"c\":3 }\n ", &s),
			 WC_OK);
	ck_assert_str_eq(s.keys, "a,b,c,");
	ck_assert_uint_eq(s.elements, 2);
	ck_assert_int_eq(s.sum, 34);
	ck_assert_int_eq(walk("{}", &s), WC_OK);
	ck_assert_int_eq(walk("{\"items\":[]}", &s), WC_OK);
	ck_assert_uint_eq(s.elements, 0);
	ck_assert_int_eq(walk("{\"k\\u00e9y\":-5}", &s), WC_OK); /* escapes in keys */
	ck_assert_str_eq(s.keys, "k\xc3\xa9y,");
	ck_assert_int_eq(s.sum, -5);
}
END_TEST

START_TEST(malformed_documents_are_refused)
{
	static const struct {
		const char *text, *why;
	} cases[] = {
		{"[1,2]", "not an object"},
		{"{\"a\":1} x", "end of text expected"},
		{"{\"a\":1,\"a\":2}", "duplicate key \"a\""},
		{"{\"a\":{\"x\":1,\"x\":2}}", "not valid JSON"},
		{"{\"a\":1 \"b\":2}", "',' or '}' expected"},
		{"{\"items\":[{\"n\":1} {\"n\":2}]}", "',' or ']' expected"},
		{"{\"items\":{}}", "\"items\" is not an array"},
		{"{a:1}", "a string key expected"},
		{"{\"a\" 1}", "':' expected"},
		{"{\"a\":", "not valid JSON"},
		{"", "not valid JSON"},
	};
	seen s;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		ck_assert_msg(walk(cases[i].text, &s) == WC_E_FORMAT, "case %zu accepted", i);
		ck_assert_msg(strstr(wc_last_detail(), cases[i].why) && strncmp(wc_last_detail(), "doc", 3) == 0,
			      "case %zu: %s", i, wc_last_detail());
	}
	ck_assert_int_eq(walk("{\"a\":1,\"stop\":2,\"b\":3}", &s), WC_E_RANGE);
	ck_assert_str_eq(wc_last_detail(), "told to stop");
	ck_assert_str_eq(s.keys, "a,stop,");
}
END_TEST

/* One member value of WC_JSON_VALUE_MAX bytes or more is refused before
 * it is built into a tree (a "{}," bomb in one member); one just under it,
 * and many members adding up to more, are taken. */
static char *doc_with_value(size_t value_bytes, size_t members)
{
	char *d = malloc(value_bytes * members + 64 * members + 16);
	ck_assert_ptr_nonnull(d);
	size_t at = 0;
	d[at++] = '{';
	for (size_t m = 0; m < members; m++) {
		at += (size_t)sprintf(d + at, "%s\"k%zu\":[", m ? "," : "", m);
		size_t end = at + value_bytes - 2;
		while (at + 3 < end) {
			memcpy(d + at, "{},", 3);
			at += 3;
		}
		memcpy(d + at, "{}", 2);
		at += 2;
		d[at++] = ']';
	}
	d[at++] = '}';
	d[at] = 0;
	return d;
}

START_TEST(a_value_longer_than_the_limit_is_refused)
{
	seen s = {0};
	char *big = doc_with_value(WC_JSON_VALUE_MAX + 1024, 1);
	ck_assert_int_eq(wc_json_walk_object(big, strlen(big), "bomb", on_member, NULL, NULL, &s), WC_E_RANGE);
	ck_assert_msg(strstr(wc_last_detail(), "longer than"), "%s", wc_last_detail());
	free(big);
	memset(&s, 0, sizeof s);
	char *many = doc_with_value(WC_JSON_VALUE_MAX / 2, 3);
	ck_assert_int_eq(wc_json_walk_object(many, strlen(many), "many", on_member, NULL, NULL, &s), WC_OK);
	ck_assert_str_eq(s.keys, "k0,k1,k2,");
	free(many);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("json_walk");
	TCase *tc = tcase_create("json_walk");
	tcase_add_test(tc, members_and_elements_in_order);
	tcase_add_test(tc, malformed_documents_are_refused);
	tcase_add_test(tc, a_value_longer_than_the_limit_is_refused);
	suite_add_tcase(s, tc);
	return check_run(s);
}
