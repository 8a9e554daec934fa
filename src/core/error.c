/* error.c - wc_err descriptions, per-thread failure reasons, log sink. */
#include "core/wc_error.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>

static const char *const descriptions[WC_E__COUNT] = {
	[WC_OK] = "success",
	[WC_E_NOMEM] = "out of memory",
	[WC_E_IO] = "I/O error",
	[WC_E_FORMAT] = "malformed file",
	[WC_E_CORRUPT] = "checksum mismatch or corrupt stream",
	[WC_E_UNSUPPORTED] = "unsupported",
	[WC_E_INVAL] = "invalid argument",
	[WC_E_RANGE] = "value out of range",
	[WC_E_NOTFOUND] = "not found",
	[WC_E_BACKEND] = "decode backend failure",
};

const char *wc_strerror(wc_err e)
{
	if ((unsigned)e >= WC_E__COUNT)
		return "unknown error";
	return descriptions[e];
}

int wc_err_to_errno(wc_err e)
{
	switch (e) {
	case WC_OK: return 0;
	case WC_E_NOMEM: return ENOMEM;
	case WC_E_INVAL: return EINVAL;
	case WC_E_RANGE: return EOVERFLOW;
	case WC_E_NOTFOUND: return ENOENT;
	case WC_E_UNSUPPORTED: return EOPNOTSUPP;
	default: return EIO;
	}
}

static _Thread_local char detail[512];

wc_err wc_fail(wc_err e, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof detail, fmt, ap);
	va_end(ap);
	return e;
}

const char *wc_last_detail(void) { return detail; }
void wc_clear_detail(void) { detail[0] = '\0'; }

wc_err wc_fail_context(wc_err e, const char *fmt, ...)
{
	char saved[512], ctx[256];
	snprintf(saved, sizeof saved, "%s", detail);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(ctx, sizeof ctx, fmt, ap);
	va_end(ap);
	return wc_fail(e, "%s: %s", ctx, saved);
}

static const char *level_name(int level)
{
	switch (level) {
	case WC_LOG_ERR: return "error";
	case WC_LOG_WARN: return "warning";
	case WC_LOG_INFO: return "info";
	default: return "debug";
	}
}

static const char *_Atomic program = "wcodec";

void wc_log_set_program(const char *name) { program = name ? name : "wcodec"; }

static void stderr_sink(int level, const char *msg, void *ctx)
{
	(void)ctx;
	fprintf(stderr, "%s: %s: %s\n", program, level_name(level), msg);
}

static pthread_mutex_t sink_lock = PTHREAD_MUTEX_INITIALIZER;
static wc_log_sink sink = stderr_sink;
static void *sink_ctx;
static int max_level = WC_LOG_INFO;

void wc_log_set_sink(wc_log_sink s, void *ctx)
{
	pthread_mutex_lock(&sink_lock);
	sink = s ? s : stderr_sink;
	sink_ctx = ctx;
	pthread_mutex_unlock(&sink_lock);
}

void wc_log_set_level(int level) { max_level = level; }

void wc_log(int level, const char *fmt, ...)
{
	if (level > max_level)
		return;
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&sink_lock);
	sink(level, msg, sink_ctx);
	pthread_mutex_unlock(&sink_lock);
}
