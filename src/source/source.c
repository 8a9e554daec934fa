/* source.c - opening a source by name and the calls every kind shares
 * (source.h). */
#include "source/source_impl.h"

#include <stdatomic.h>
#include <stdlib.h>
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

/* Bytes all read windows hold at most, and hold now. */
#define WINDOWS_MAX ((size_t)64 << 20)
static atomic_size_t g_window_bytes;

wc_err wc_source_set_read_window(wc_source *s, size_t bytes)
{
	if (s->window || !bytes)
		return WC_OK;
	if (pthread_mutex_init(&s->win_mu, NULL) != 0)
		return wc_fail(WC_E_NOMEM, "%s: no mutex for a read window", s->name);
	if (pthread_cond_init(&s->win_cv, NULL) != 0) {
		pthread_mutex_destroy(&s->win_mu);
		return wc_fail(WC_E_NOMEM, "%s: no condition variable for a read window", s->name);
	}
	s->window = bytes;
	return WC_OK;
}

static void window_free(struct wc_source_window *w)
{
	if (w->bytes) {
		free(w->bytes);
		atomic_fetch_sub(&g_window_bytes, w->len);
	}
	*w = (struct wc_source_window){ 0 };
}

/* A read through the windows: 1 served (from a window holding all of it,
 * waiting for one being fetched; or, for a read of less than a quarter of
 * a window, from a window it fetches now), 0 not (the caller reads as
 * usual), or an error in *e. Readers that miss at once near each other
 * (the mount's dispatchers reading a run of small tiles) wait for the
 * first one's fetch instead of each fetching a window. */
static int window_read(wc_source *s, void *buf, size_t len, uint64_t off, uint64_t fetch_len, const char *what,
		       wc_err *e)
{
	pthread_mutex_lock(&s->win_mu);
	for (;;) {
		struct wc_source_window *hold = NULL;
		for (int i = 0; i < WC_SOURCE_WINDOWS && !hold; i++)
			if ((s->win[i].bytes || s->win[i].fetching) && off >= s->win[i].off &&
			    off + len <= s->win[i].off + s->win[i].len)
				hold = &s->win[i];
		if (hold && hold->fetching) {
			pthread_cond_wait(&s->win_cv, &s->win_mu);
			continue; /* fetched, or failed and gone: look again */
		}
		if (hold) {
			memcpy(buf, hold->bytes + (off - hold->off), len);
			hold->used = ++s->win_clock;
			pthread_mutex_unlock(&s->win_mu);
			return 1;
		}
		break;
	}
	/* Fetch a window into the least recently used slot not being fetched. */
	struct wc_source_window *slot = NULL;
	for (int i = 0; i < WC_SOURCE_WINDOWS; i++)
		if (!s->win[i].fetching && (!slot || s->win[i].used < slot->used))
			slot = &s->win[i];
	uint64_t n = fetch_len < len ? len : fetch_len > s->window ? s->window : fetch_len;
	if (n > s->size - off)
		n = s->size - off;
	if (!slot || len >= s->window / 4 || atomic_fetch_add(&g_window_bytes, n) + n > WINDOWS_MAX) {
		if (slot && len < s->window / 4)
			atomic_fetch_sub(&g_window_bytes, n);
		pthread_mutex_unlock(&s->win_mu);
		return 0;
	}
	window_free(slot);
	*slot = (struct wc_source_window){ .fetching = true, .off = off, .len = (size_t)n, .used = ++s->win_clock };
	pthread_mutex_unlock(&s->win_mu);
	uint8_t *w = malloc((size_t)n);
	wc_err err = w ? s->ops->read(s, w, (size_t)n, off, what) : WC_E_NOMEM;
	pthread_mutex_lock(&s->win_mu);
	slot->fetching = false;
	if (err == WC_OK) {
		slot->bytes = w;
		memcpy(buf, w + 0, len);
	} else {
		free(w);
		atomic_fetch_sub(&g_window_bytes, n);
		*slot = (struct wc_source_window){ 0 };
	}
	pthread_cond_broadcast(&s->win_cv);
	pthread_mutex_unlock(&s->win_mu);
	if (err == WC_E_NOMEM && !w)
		return 0; /* read as usual */
	*e = err;
	return 1;
}

wc_err wc_source_read_within(wc_source *s, void *buf, size_t len, uint64_t off, uint64_t fetch_len, const char *what)
{
	if (off > s->size || len > s->size - off)
		return wc_fail(WC_E_RANGE, "%s: reading %s: bytes [%llu, %llu) past the end (%llu bytes)", s->name, what,
			       (unsigned long long)off, (unsigned long long)(off + len), (unsigned long long)s->size);
	if (!len)
		return WC_OK;
	wc_err e = WC_OK;
	if (s->window && window_read(s, buf, len, off, fetch_len, what, &e))
		return e;
	return s->ops->read(s, buf, len, off, what);
}

wc_err wc_source_read(wc_source *s, void *buf, size_t len, uint64_t off, const char *what)
{
	return wc_source_read_within(s, buf, len, off, s->window, what);
}

size_t wc_source_window(const wc_source *s) { return s->window; }

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
	if (!s)
		return;
	if (s->window) { /* no reader is left: nothing is being fetched */
		for (int i = 0; i < WC_SOURCE_WINDOWS; i++)
			window_free(&s->win[i]);
		pthread_cond_destroy(&s->win_cv);
		pthread_mutex_destroy(&s->win_mu);
	}
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
