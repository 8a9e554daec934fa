/* source_s3.c - an object of an S3-compatible store as a wc_source
 * (source.h): its size from a HEAD request, its bytes from ranged GETs
 * (RFC 9110 14.2, "Range"; answer 206 with exactly the bytes asked for),
 * signed with AWS Signature Version 4 by libcurl (CURLOPT_AWS_SIGV4), with
 * the configuration of s3_config.h.
 *
 * Any number of threads read at once, each request on an easy handle of a
 * small pool, so connections are reused. Timeouts, refused or reset
 * connections, 5xx and 429 answers and bodies shorter than asked are
 * retried (max_attempts of s3_config.h, 8 by default, 0.2 s apart doubling
 * up to 2 s: about 9 s in all, so a server restarted within 5 s is waited
 * for); other answers (403, 404, ...) fail at once with the status and the
 * object's address, never a credential. A body is never handed on short or
 * long: the caller (the container reader) then checks every payload against
 * its checksum, so a network fault is an error or a retry, never wrong
 * bytes. An object is opened by one GET of its first 64 KiB (its size from
 * Content-Range, RFC 9110 14.4); every later GET carries that answer's
 * ETag as If-Match (RFC 9110 13.1.1) and its own answer's ETag is compared
 * with it, so an object replaced while it is read fails (412, or a
 * different ETag) instead of mixing the bytes of two versions. */
#include "source/source_impl.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "source/s3_config.h"
#include "source/s3_list.h"

#define POOL 16          /* idle easy handles kept */
#define FIRST_BACKOFF_MS 200
#define MAX_BACKOFF_MS 2000
#define HEAD_BYTES ((size_t)64 << 10) /* read by the GET that opens an object */

typedef struct s3_source {
	struct wc_source base;
	wc_s3_config cfg;
	char *url;         /* the object's; NULL for a listing client */
	char bucket[256];
	char sigv4[96];
	char etag[256];    /* the opening answer's ETag ("" if none): sent as If-Match */
	long status;       /* the last opening or listing answer's HTTP status, for the opener's message */
	uint8_t *head;     /* the object's first head_len bytes, from the opening GET */
	size_t head_len;
	struct curl_slist *headers;
	pthread_mutex_t mu;
	CURL *idle[POOL];
	int nidle;
} s3_source;

static pthread_once_t g_curl_once = PTHREAD_ONCE_INIT;
static CURLcode g_curl_init = CURLE_FAILED_INIT;
static void curl_init_once(void) { g_curl_init = curl_global_init(CURL_GLOBAL_DEFAULT); }

/* One request's body: into dst, at most cap bytes, more being an error;
 * or (grow) into a buffer grown up to LIST_MAX. */
#define LIST_MAX ((size_t)64 << 20)
typedef struct sink {
	uint8_t *dst;
	size_t cap, got;
	int overflow, grow;
} sink;

static size_t on_body(char *p, size_t size, size_t n, void *ctx)
{
	sink *k = ctx;
	size_t len = size * n;
	if (k->grow && len > k->cap - k->got && k->got + len <= LIST_MAX) {
		size_t cap = k->cap ? k->cap : 65536;
		while (cap < k->got + len)
			cap *= 2;
		uint8_t *d = realloc(k->dst, cap);
		if (!d)
			return 0;
		k->dst = d;
		k->cap = cap;
	}
	if (len > k->cap - k->got) {
		k->overflow = 1;
		return 0; /* abort the transfer */
	}
	memcpy(k->dst + k->got, p, len);
	k->got += len;
	return len;
}

static CURL *take(s3_source *s)
{
	CURL *h = NULL;
	pthread_mutex_lock(&s->mu);
	if (s->nidle)
		h = s->idle[--s->nidle];
	pthread_mutex_unlock(&s->mu);
	if (h)
		curl_easy_reset(h);
	else
		h = curl_easy_init();
	return h;
}

static void give(s3_source *s, CURL *h)
{
	pthread_mutex_lock(&s->mu);
	if (s->nidle < POOL) {
		s->idle[s->nidle++] = h;
		h = NULL;
	}
	pthread_mutex_unlock(&s->mu);
	if (h)
		curl_easy_cleanup(h);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static int transient(CURLcode rc, long status)
{
	if (rc == CURLE_OK)
		return status >= 500 || status == 429;
	return rc == CURLE_OPERATION_TIMEDOUT || rc == CURLE_COULDNT_CONNECT || rc == CURLE_RECV_ERROR ||
	       rc == CURLE_SEND_ERROR || rc == CURLE_GOT_NOTHING || rc == CURLE_PARTIAL_FILE ||
	       rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_SSL_CONNECT_ERROR || rc == CURLE_HTTP2 ||
	       rc == CURLE_HTTP2_STREAM;
}

/* What an answer's headers say: its ETag, and the object's size from a
 * ranged answer's Content-Range ("bytes 0-65535/SIZE"; RFC 9110 14.4). */
typedef struct answer_hdrs {
	char etag[256];
	long long total; /* -1: not given */
} answer_hdrs;

static size_t on_header(char *p, size_t size, size_t n, void *ctx)
{
	size_t len = size * n;
	answer_hdrs *a = ctx;
	const char *end = p + len;
	while (end > p && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
		end--;
	if (len > 5 && !strncasecmp(p, "etag:", 5)) {
		const char *v = p + 5;
		while (v < end && (*v == ' ' || *v == '\t'))
			v++;
		if ((size_t)(end - v) < sizeof a->etag && !memchr(v, '\n', (size_t)(end - v))) {
			memcpy(a->etag, v, (size_t)(end - v));
			a->etag[end - v] = '\0';
		}
	} else if (len > 14 && !strncasecmp(p, "content-range:", 14)) {
		const char *slash = memchr(p, '/', (size_t)(end - p));
		char num[32];
		size_t k = slash ? (size_t)(end - slash - 1) : 0;
		if (k && k < sizeof num) {
			memcpy(num, slash + 1, k);
			num[k] = '\0';
			char *e;
			long long v = strtoll(num, &e, 10);
			if (*e == '\0' && v >= 0)
				a->total = v;
		}
	}
	return len;
}

/* One request to url: HEAD (dst and all NULL; *length gets Content-Length,
 * s->etag the ETag); a GET of [off, off + len) into dst; with dst and
 * length both, the opening GET: [0, len) of an object that may be shorter,
 * *length getting its size (Content-Range) and s->head_len the bytes
 * received, s->etag the ETag; or (all) a whole GET answered 200
 * into a buffer *all of *length bytes (malloc'ed; the caller frees it).
 * Retries what transient() names. */
static wc_err request(s3_source *s, const char *url, uint8_t *dst, size_t len, uint64_t off, uint64_t *length,
		      uint8_t **all, const char *what)
{
	char range[64];
	snprintf(range, sizeof range, "%llu-%llu", (unsigned long long)off, (unsigned long long)(off + len - 1));
	long backoff = FIRST_BACKOFF_MS;
	char why[256] = "";
	const int attempts = s->cfg.max_attempts > 0 ? s->cfg.max_attempts : 1;
	int attempt;
	for (attempt = 1; attempt <= attempts; attempt++) {
		CURL *h = take(s);
		if (!h)
			return wc_fail(WC_E_NOMEM, "%s: no curl handle", s->base.name);
		sink k = { .dst = dst, .cap = dst ? len : 0, .grow = all != NULL };
		curl_easy_setopt(h, CURLOPT_URL, url);
		curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
		curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1024L); /* a stalled transfer: under 1 KiB/s for 30 s */
		curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 30L);
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, s->headers);
		if (s->cfg.ca_bundle[0])
			curl_easy_setopt(h, CURLOPT_CAINFO, s->cfg.ca_bundle);
		if (s->cfg.key_id[0]) {
			curl_easy_setopt(h, CURLOPT_AWS_SIGV4, s->sigv4);
			curl_easy_setopt(h, CURLOPT_USERNAME, s->cfg.key_id);
			curl_easy_setopt(h, CURLOPT_PASSWORD, s->cfg.secret);
		}
		answer_hdrs ah = { .total = -1 };
		const char *etag = ah.etag;
		curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
		curl_easy_setopt(h, CURLOPT_HEADERDATA, &ah);
		if (dst || all) {
			if (dst)
				curl_easy_setopt(h, CURLOPT_RANGE, range);
			curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
			curl_easy_setopt(h, CURLOPT_WRITEDATA, &k);
		} else {
			curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
		}
		CURLcode rc = curl_easy_perform(h);
		long status = 0;
		curl_off_t clen = -1;
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
		if (length) /* opening or listing: one thread */
			s->status = status;
		curl_easy_getinfo(h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &clen);
		give(s, h);
		if (rc == CURLE_OK && !dst && !all && status == 200 && clen >= 0) {
			*length = (uint64_t)clen;
			memcpy(s->etag, etag, sizeof s->etag);
			return WC_OK;
		}
		if (rc == CURLE_OK && dst && length &&
		    ((status == 206 && ah.total >= 0 && k.got == ((uint64_t)ah.total < len ? (size_t)ah.total : len)) ||
		     (status == 200 && clen >= 0 && k.got == (uint64_t)clen))) {
			*length = status == 206 ? (uint64_t)ah.total : k.got;
			s->head_len = k.got;
			memcpy(s->etag, etag, sizeof s->etag);
			return WC_OK;
		}
		/* Servers that ignore If-Match (s3rver) still name the version
		 * they sent. */
		if (rc == CURLE_OK && dst && s->etag[0] && etag[0] && strcmp(etag, s->etag))
			return wc_fail(WC_E_IO, "%s: reading %s: the object changed since it was opened (its ETag "
				       "is now %s, was %s)", s->base.name, what, etag, s->etag);
		if (rc == CURLE_OK && all && status == 200 && (clen < 0 || (uint64_t)clen == k.got)) {
			*all = k.dst;
			*length = k.got;
			return WC_OK;
		}
		/* An error's body names its cause (S3's <Code>), where there
		 * is one: a listing of a bucket that does not exist. */
		int no_bucket = status == 404 && k.dst && k.got && memmem(k.dst, k.got, "<Code>NoSuchBucket</Code>", 25);
		if (all)
			free(k.dst);
		/* 206 with the range, or 200 with the whole object when the range is all of it */
		if (rc == CURLE_OK && dst && (status == 206 || (status == 200 && off == 0 && len == s->base.size)) &&
		    k.got == len)
			return WC_OK;
		if (k.overflow)
			return wc_fail(WC_E_IO, "%s: reading %s: the server sent more than the %zu bytes asked for (HTTP %ld)",
				       s->base.name, what, len, status);
		if (rc == CURLE_OK && status >= 200 && status < 300)
			snprintf(why, sizeof why, "a body of %zu bytes for %zu asked (HTTP %ld)", k.got, len, status);
		else if (rc == CURLE_OK)
			snprintf(why, sizeof why, "HTTP %ld%s", status,
				 status == 403 && !s->cfg.key_id[0]
					 ? " (access denied, and no credentials were found: set AWS_ACCESS_KEY_ID "
					   "and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE with ~/.aws/credentials)"
				 : status == 403 ? " (access denied: check the credentials and the region)"
				 : no_bucket ? " (no such bucket)"
				 : status == 404 ? " (no such bucket or object)"
				 : status == 412 ? " (the object changed since it was opened)" : "");
		else
			snprintf(why, sizeof why, "%s", curl_easy_strerror(rc));
		int again = transient(rc, status) || (rc == CURLE_OK && status >= 200 && status < 300);
		if (!again || attempt == attempts)
			break;
		sleep_ms(backoff);
		backoff = backoff * 2 > MAX_BACKOFF_MS ? MAX_BACKOFF_MS : backoff * 2;
	}
	if (attempt > 1)
		snprintf(why + strlen(why), sizeof why - strlen(why), " (attempt %d)", attempt > attempts ? attempts : attempt);
	return wc_fail(WC_E_IO, "%s: %s: %s", s->base.name, dst || all ? what : "HEAD", why);
}

static wc_err s3_read(wc_source *src, void *buf, size_t len, uint64_t off, const char *what)
{
	s3_source *s = (s3_source *)src;
	if (off + len <= s->head_len) { /* within the opening GET's bytes */
		memcpy(buf, s->head + off, len);
		return WC_OK;
	}
	return request(s, s->url, buf, len, off, NULL, NULL, what);
}

static void s3_close(wc_source *src)
{
	s3_source *s = (s3_source *)src;
	for (int i = 0; i < s->nidle; i++)
		curl_easy_cleanup(s->idle[i]);
	curl_slist_free_all(s->headers);
	pthread_mutex_destroy(&s->mu);
	free(s->head);
	free(s->url);
	free(s->base.name);
	memset(&s->cfg, 0, sizeof s->cfg); /* no secret left in freed memory */
	free(s);
}

static const wc_source_ops s3_ops = { .read = s3_read, .close = s3_close };

/* The client for s3://BUCKET/KEY (KEY may be empty: a listing's prefix):
 * its configuration, headers and URL; no request made yet. */
static wc_err open_client(const char *uri, int want_key, s3_source **out)
{
	*out = NULL;
	const char *b = uri + 5, *slash = strchr(b, '/');
	if (strncmp(uri, "s3://", 5) || !slash || slash == b || (want_key && !slash[1]))
		return wc_fail(WC_E_INVAL, "%s: not an %s address (s3://BUCKET/%s)", uri, want_key ? "object" : "S3",
			       want_key ? "KEY" : "PREFIX");
	pthread_once(&g_curl_once, curl_init_once);
	if (g_curl_init != CURLE_OK)
		return wc_fail(WC_E_IO, "%s: libcurl: %s", uri, curl_easy_strerror(g_curl_init));
	s3_source *s = calloc(1, sizeof *s);
	if (!s || !(s->base.name = strdup(uri))) {
		free(s);
		return wc_fail(WC_E_NOMEM, "out of memory");
	}
	s->base.ops = &s3_ops;
	s->base.read_ahead = (size_t)64 << 10;
	pthread_mutex_init(&s->mu, NULL);
	char bucket[256];
	wc_err e = WC_OK;
	if ((size_t)(slash - b) >= sizeof bucket)
		e = wc_fail(WC_E_INVAL, "%s: the bucket name is too long", uri);
	else {
		memcpy(bucket, b, (size_t)(slash - b));
		bucket[slash - b] = '\0';
		if (!(e = wc_s3_config_load(&s->cfg)))
			e = wc_s3_object_url(&s->cfg, bucket, slash + 1, &s->url);
	}
	if (!e) {
		snprintf(s->sigv4, sizeof s->sigv4, "aws:amz:%s:s3", s->cfg.region);
		/* Unsigned payloads (a GET has none): what S3 and the servers that
		 * copy it accept with SigV4 (AWS, "Signature Calculations for the
		 * Authorization Header"). */
		s->headers = curl_slist_append(NULL, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
		if (s->headers && s->cfg.token[0]) {
			size_t n = strlen(s->cfg.token) + 32;
			char *t = malloc(n);
			if (t) {
				snprintf(t, n, "x-amz-security-token: %s", s->cfg.token);
				struct curl_slist *l = curl_slist_append(s->headers, t);
				memset(t, 0, n);
				free(t);
				if (l)
					s->headers = l;
				else
					e = wc_fail(WC_E_NOMEM, "out of memory");
			}
		}
		if (!s->headers)
			e = wc_fail(WC_E_NOMEM, "out of memory");
	}
	if (e) {
		s3_close(&s->base);
		return e;
	}
	snprintf(s->bucket, sizeof s->bucket, "%s", bucket);
	*out = s;
	return WC_OK;
}

static char *list_url(const s3_source *s, const char *prefix, const char *token);

wc_err wc_source_open_s3(const char *uri, wc_source **out)
{
	*out = NULL;
	s3_source *s;
	wc_err e = open_client(uri, 1, &s);
	if (e)
		return e;
	/* One GET opens it: the first HEAD_BYTES (what a reader reads first:
	 * a container's header, a safetensors header), the size from its
	 * Content-Range and the ETag; an empty object (416: no byte to
	 * give) is asked with a HEAD. */
	if (!(s->head = malloc(HEAD_BYTES))) {
		s3_close(&s->base);
		return wc_fail(WC_E_NOMEM, "out of memory");
	}
	e = request(s, s->url, s->head, HEAD_BYTES, 0, &s->base.size, NULL, "the start");
	if (e && s->status == 416)
		e = request(s, s->url, NULL, 0, 0, &s->base.size, NULL, "size");
	if (e) {
		/* A HEAD answer has no body to say which is missing: a listing
		 * of no keys tells a missing bucket from a missing object. */
		if (s->status == 404) {
			char *url = list_url(s, "", "");
			uint8_t *body = NULL;
			uint64_t len;
			if (url && strlen(url) + 12 < 4096) {
				char probe[4096];
				snprintf(probe, sizeof probe, "%s&max-keys=0", url);
				wc_err le = request(s, probe, NULL, 0, 0, &len, &body, "the bucket");
				e = wc_fail(WC_E_IO, "%s: HTTP 404 (%s)", uri,
					    le == WC_OK ? "no such object" : s->status == 404 ? "no such bucket"
					    : "no such bucket or object");
			}
			free(body);
			free(url);
		}
		s3_close(&s->base);
		return e;
	}
	if (s->etag[0]) {
		char h[300];
		snprintf(h, sizeof h, "If-Match: %s", s->etag);
		struct curl_slist *l = curl_slist_append(s->headers, h);
		if (!l) {
			s3_close(&s->base);
			return wc_fail(WC_E_NOMEM, "out of memory");
		}
		s->headers = l;
	}
	*out = &s->base;
	return WC_OK;
}

/* listing: the URL of one page of GET ?list-type=2 */
static char *list_url(const s3_source *s, const char *prefix, const char *token)
{
	char *p = wc_s3_query_encode(prefix), *t = wc_s3_query_encode(token);
	size_t need = strlen(s->cfg.endpoint) + strlen(s->bucket) + strlen(s->cfg.region) + (p ? strlen(p) : 0) +
		      (t ? strlen(t) : 0) + 128;
	char *u = p && t ? malloc(need) : NULL;
	if (u) {
		int n = s->cfg.endpoint[0] ? snprintf(u, need, "%s/%s?", s->cfg.endpoint, s->bucket)
					   : snprintf(u, need, "https://%s.s3.%s.amazonaws.com/?", s->bucket, s->cfg.region);
		snprintf(u + n, need - (size_t)n, "%s%s%slist-type=2&prefix=%s", token[0] ? "continuation-token=" : "",
			 t, token[0] ? "&" : "", p);
	}
	free(p);
	free(t);
	return u;
}

wc_err wc_source_list(const char *prefix_uri, int (*fn)(void *ctx, const char *key, uint64_t size), void *ctx)
{
	s3_source *s;
	wc_err e = open_client(prefix_uri, 0, &s);
	if (e)
		return e;
	const char *prefix = strchr(prefix_uri + 5, '/') + 1;
	char token[2048] = "";
	for (int more = 1, stop = 0; !e && more && !stop;) {
		char *url = list_url(s, prefix, token);
		uint8_t *body = NULL;
		uint64_t len = 0;
		if (!url)
			e = wc_fail(WC_E_NOMEM, "out of memory");
		else if (!(e = request(s, url, NULL, 0, 0, &len, &body, "the listing")))
			e = wc_s3_list_parse((const char *)body, (size_t)len, fn, ctx, &more, token, sizeof token, &stop);
		free(url);
		free(body);
	}
	if (e && strncmp(wc_last_detail(), prefix_uri, strlen(prefix_uri)))
		wc_fail_context(e, "%s", prefix_uri);
	s3_close(&s->base);
	return e;
}

const char *wc_source_s3_support(void)
{
	static char buf[64];
	snprintf(buf, sizeof buf, "libcurl %s", curl_version_info(CURLVERSION_NOW)->version);
	return buf;
}
