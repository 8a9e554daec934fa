/* s3_config.c - the S3 configuration of s3_config.h. */
#include "source/s3_config.h"

#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a file's profile section gave. */
typedef struct profile_vals {
	const char *section; /* the section to take */
	char key_id[256], secret[256], token[4096], region[64], endpoint[512], ca_bundle[1024];
	char max_attempts[16];
	int too_long;
} profile_vals;

static void put(char *dst, size_t cap, const char *v, int *too_long)
{
	if (strlen(v) >= cap) {
		*too_long = 1;
		return;
	}
	strcpy(dst, v);
}

static int on_entry(void *user, const char *section, const char *name, const char *value)
{
	profile_vals *p = user;
	if (strcmp(section, p->section) != 0)
		return 1;
	if (!strcmp(name, "aws_access_key_id"))
		put(p->key_id, sizeof p->key_id, value, &p->too_long);
	else if (!strcmp(name, "aws_secret_access_key"))
		put(p->secret, sizeof p->secret, value, &p->too_long);
	else if (!strcmp(name, "aws_session_token"))
		put(p->token, sizeof p->token, value, &p->too_long);
	else if (!strcmp(name, "region"))
		put(p->region, sizeof p->region, value, &p->too_long);
	else if (!strcmp(name, "endpoint_url"))
		put(p->endpoint, sizeof p->endpoint, value, &p->too_long);
	else if (!strcmp(name, "ca_bundle"))
		put(p->ca_bundle, sizeof p->ca_bundle, value, &p->too_long);
	else if (!strcmp(name, "max_attempts"))
		put(p->max_attempts, sizeof p->max_attempts, value, &p->too_long);
	return 1;
}

/* Read section `section` of the INI file named by $env_var or ~/.aws/leaf. */
static wc_err read_file(const char *env_var, const char *leaf, const char *section, profile_vals *p)
{
	char path[1024];
	const char *f = getenv(env_var), *home = getenv("HOME");
	memset(p, 0, sizeof *p);
	p->section = section;
	if (f && *f)
		snprintf(path, sizeof path, "%s", f);
	else if (home && *home)
		snprintf(path, sizeof path, "%s/.aws/%s", home, leaf);
	else
		return WC_OK;
	FILE *fh = fopen(path, "r");
	if (!fh)
		return errno == ENOENT || errno == ENOTDIR ? WC_OK : wc_fail(WC_E_IO, "%s: %s", path, strerror(errno));
	int rc = ini_parse_file(fh, on_entry, p);
	fclose(fh);
	if (rc != 0)
		return wc_fail(WC_E_INVAL, "%s: malformed at line %d", path, rc);
	if (p->too_long)
		return wc_fail(WC_E_INVAL, "%s: [%s]: a value is too long", path, section);
	return WC_OK;
}

static int env_set(const char *name) { const char *v = getenv(name); return v && *v; }

static wc_err env_put(char *dst, size_t cap, const char *name)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return WC_OK;
	if (strlen(v) >= cap)
		return wc_fail(WC_E_INVAL, "$%s is too long", name);
	strcpy(dst, v);
	return WC_OK;
}

wc_err wc_s3_config_load(wc_s3_config *c)
{
	memset(c, 0, sizeof *c);
	wc_err e = env_put(c->profile, sizeof c->profile, "AWS_PROFILE");
	if (e)
		return e;
	if (!c->profile[0])
		strcpy(c->profile, "default");
	profile_vals cred, conf;
	char section[160];
	snprintf(section, sizeof section, strcmp(c->profile, "default") ? "profile %s" : "%s", c->profile);
	if ((e = read_file("AWS_SHARED_CREDENTIALS_FILE", "credentials", c->profile, &cred)) ||
	    (e = read_file("AWS_CONFIG_FILE", "config", section, &conf)))
		return e;
	if (env_set("AWS_ACCESS_KEY_ID") || env_set("AWS_SECRET_ACCESS_KEY")) {
		if ((e = env_put(c->key_id, sizeof c->key_id, "AWS_ACCESS_KEY_ID")) ||
		    (e = env_put(c->secret, sizeof c->secret, "AWS_SECRET_ACCESS_KEY")) ||
		    (e = env_put(c->token, sizeof c->token, "AWS_SESSION_TOKEN")))
			return e;
	} else if (cred.key_id[0] || cred.secret[0]) {
		strcpy(c->key_id, cred.key_id);
		strcpy(c->secret, cred.secret);
		strcpy(c->token, cred.token);
	} else {
		strcpy(c->key_id, conf.key_id);
		strcpy(c->secret, conf.secret);
		strcpy(c->token, conf.token);
	}
	if (!c->key_id[0] != !c->secret[0])
		return wc_fail(WC_E_INVAL, "S3 credentials of profile %s: an access key id without a secret key, or "
			       "the other way round", c->profile);
	if ((e = env_put(c->region, sizeof c->region, "AWS_REGION")))
		return e;
	if (!c->region[0] && (e = env_put(c->region, sizeof c->region, "AWS_DEFAULT_REGION")))
		return e;
	if (!c->region[0])
		strcpy(c->region, conf.region[0] ? conf.region : "us-east-1");
	if ((e = env_put(c->endpoint, sizeof c->endpoint, "AWS_ENDPOINT_URL_S3")))
		return e;
	if (!c->endpoint[0] && (e = env_put(c->endpoint, sizeof c->endpoint, "AWS_ENDPOINT_URL")))
		return e;
	if (!c->endpoint[0])
		strcpy(c->endpoint, conf.endpoint);
	if ((e = env_put(c->ca_bundle, sizeof c->ca_bundle, "AWS_CA_BUNDLE")))
		return e;
	if (!c->ca_bundle[0])
		strcpy(c->ca_bundle, conf.ca_bundle);
	char attempts[16] = "";
	if ((e = env_put(attempts, sizeof attempts, "AWS_MAX_ATTEMPTS")))
		return e;
	if (!attempts[0])
		strcpy(attempts, conf.max_attempts);
	c->max_attempts = WC_S3_MAX_ATTEMPTS_DEFAULT;
	if (attempts[0]) {
		char *end;
		errno = 0;
		long v = strtol(attempts, &end, 10);
		if (errno || *end || end == attempts || v < 1 || v > 100)
			return wc_fail(WC_E_INVAL, "max_attempts (AWS_MAX_ATTEMPTS, or max_attempts of profile %s) must "
				       "be a number from 1 to 100", c->profile);
		c->max_attempts = (int)v;
	}
	size_t n = strlen(c->endpoint);
	while (n && c->endpoint[n - 1] == '/')
		c->endpoint[--n] = '\0';
	if (n && strncmp(c->endpoint, "http://", 7) && strncmp(c->endpoint, "https://", 8))
		return wc_fail(WC_E_INVAL, "the S3 endpoint (AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL or endpoint_url of "
			       "profile %s) must start with http:// or https://", c->profile);
	return WC_OK;
}

/* RFC 3986 percent-encoding of s (but '/' when keep_slash) at out (NULL:
 * count only); returns the bytes. */
static size_t encode_as(const char *s, char *out, int keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = 0;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' ||
		    *p == '_' || *p == '.' || *p == '~' || (*p == '/' && keep_slash)) {
			if (out)
				out[n] = (char)*p;
			n++;
		} else {
			if (out) {
				out[n] = '%';
				out[n + 1] = hex[*p >> 4];
				out[n + 2] = hex[*p & 15];
			}
			n += 3;
		}
	}
	return n;
}

static size_t encode(const char *s, char *out) { return encode_as(s, out, 1); }

char *wc_s3_query_encode(const char *s)
{
	char *out = malloc(encode_as(s, NULL, 0) + 1);
	if (out)
		out[encode_as(s, out, 0)] = '\0';
	return out;
}

wc_err wc_s3_object_url(const wc_s3_config *c, const char *bucket, const char *key, char **url)
{
	const size_t need = strlen(c->endpoint) + strlen(bucket) + strlen(c->region) + encode(key, NULL) + 64;
	char *u = malloc(need);
	if (!u)
		return wc_fail(WC_E_NOMEM, "out of memory");
	int n = c->endpoint[0] ? snprintf(u, need, "%s/%s/", c->endpoint, bucket)
			       : snprintf(u, need, "https://%s.s3.%s.amazonaws.com/", bucket, c->region);
	u[(size_t)n + encode(key, u + n)] = '\0';
	*url = u;
	return WC_OK;
}
