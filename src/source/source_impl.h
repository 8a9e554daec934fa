/* source_impl.h - what a kind of source supplies (source.c dispatches to
 * it); each kind's state starts with a struct wc_source. Not installed. */
#ifndef WC_SOURCE_IMPL_H
#define WC_SOURCE_IMPL_H

#include <pthread.h>
#include <stdbool.h>

#include "source/source.h"

typedef struct wc_source_ops {
	/* [off, off + len) is within the size (source.c checked). */
	wc_err (*read)(wc_source *s, void *buf, size_t len, uint64_t off, const char *what);
	wc_err (*set_path)(wc_source *s, const char *path); /* NULL: not a file */
	void (*close)(wc_source *s);                        /* frees s and its name */
} wc_source_ops;

/* Windows a source keeps (wc_source_set_read_window): one per reader
 * going through it at once (the mount's dispatchers), so readers at
 * different places do not take each other's. */
#define WC_SOURCE_WINDOWS 4

struct wc_source {
	const wc_source_ops *ops;
	char *name;
	uint64_t size;
	size_t read_ahead; /* wc_source_read_ahead */
	/* wc_source_set_read_window: small reads served from the windows
	 * read last; window 0: none. */
	size_t window;
	pthread_mutex_t win_mu; /* initialised with window, as is win_cv */
	pthread_cond_t win_cv;  /* a window's fetch ended */
	struct wc_source_window {
		uint8_t *bytes; /* NULL: unused, or being fetched */
		bool fetching;  /* [off, off + len) is being read: wait for it */
		uint64_t off;
		size_t len;
		uint64_t used; /* for LRU */
	} win[WC_SOURCE_WINDOWS];
	uint64_t win_clock;
};

/* An object of an S3-compatible store, "s3://BUCKET/KEY" (source_s3.c). */
wc_err wc_source_open_s3(const char *uri, wc_source **out);

#endif /* WC_SOURCE_IMPL_H */
