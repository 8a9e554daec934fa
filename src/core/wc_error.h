/*
 * wc_error.h - the one error type of libwcodec, and logging.
 *
 * Every fallible library function returns a wc_err. errno values appear only
 * at the FUSE edge (src/fuse), which maps a wc_err with wc_err_to_errno().
 *
 * A function that fails may record a human-readable reason with wc_fail();
 * the reason is kept per thread and read back with wc_last_detail() by the
 * caller that reports the error (the CLI prints it, the daemon logs it).
 */
#ifndef WC_ERROR_H
#define WC_ERROR_H

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum wc_err {
	WC_OK = 0,
	WC_E_NOMEM,       /* an allocation failed */
	WC_E_IO,          /* an OS call failed (open, pread, write, rename, ...) */
	WC_E_FORMAT,      /* malformed input: container, safetensors, qvq, image */
	WC_E_CORRUPT,     /* checksum mismatch or an entropy stream failed its checks */
	WC_E_UNSUPPORTED, /* well-formed but not supported: version, dtype, option */
	WC_E_INVAL,       /* a bad argument from the caller */
	WC_E_RANGE,       /* a size, count or offset beyond a documented limit */
	WC_E_NOTFOUND,    /* no such tensor, tile, file or backend */
	WC_E_BACKEND,     /* a decode backend (GPU) failed; the CPU may redo the work */
	WC_E__COUNT
} wc_err;

/* Short fixed description of an error code ("checksum mismatch or corrupt
 * stream"); never NULL, also for out-of-range values. */
const char *wc_strerror(wc_err e);

/* The errno the FUSE edge answers for e, the one mapping it uses:
 * FORMAT/CORRUPT/IO/BACKEND -> EIO (the daemon logs the reason), NOMEM ->
 * ENOMEM, INVAL -> EINVAL, RANGE -> EOVERFLOW (a file beyond a format
 * limit), NOTFOUND -> ENOENT, UNSUPPORTED -> EOPNOTSUPP (a newer format
 * version or flag), OK -> 0. */
int wc_err_to_errno(wc_err e);

/* Record a printf-style reason for the calling thread and return e, so a
 * failing function can write `return wc_fail(WC_E_FORMAT, "tile %u ...", i);`.
 * The reason is truncated to 512 bytes. */
wc_err wc_fail(wc_err e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The calling thread's last reason recorded by wc_fail(), or "" if none. The
 * pointer stays valid until this thread's next wc_fail()/wc_clear_detail(). */
const char *wc_last_detail(void);
void wc_clear_detail(void);

/* Re-record the calling thread's failure reason prefixed with a formatted
 * context, "<context>: <previous reason>" (e.g. "plane 1: ..."); returns e.
 * Each part is truncated as wc_fail() truncates. */
wc_err wc_fail_context(wc_err e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Logging. Levels follow syslog's order. The default sink writes
 * "PROGRAM: LEVEL: message\n" to stderr for levels <= the threshold
 * (default WC_LOG_INFO); PROGRAM is "wcodec" unless wc_log_set_program()
 * named another (a string that outlives the logging). The daemon installs a
 * syslog sink once it detaches. */
enum { WC_LOG_ERR = 3, WC_LOG_WARN = 4, WC_LOG_INFO = 6, WC_LOG_DEBUG = 7 };
typedef void (*wc_log_sink)(int level, const char *msg, void *ctx);
void wc_log_set_sink(wc_log_sink sink, void *ctx);
void wc_log_set_level(int max_level);
void wc_log_set_program(const char *name);
void wc_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif

#endif /* WC_ERROR_H */
